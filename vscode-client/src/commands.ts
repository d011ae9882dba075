/**
 * The extension's commands (helion-ls.*). Server work goes through the server's own commands and requests;
 * the ids differ from the server's helion.* ones, which vscode-languageclient registers for code lenses.
 */
import * as vscode from "vscode";
import type { GeneratedCodeProvider } from "./generatedView";
import { GENERATED_SCHEME, type GeneratedTarget } from "./generatedUri";
import type { TuningPlots } from "./plot";
import type { TuningResults } from "./plotData";
import { pythonExtensionInstalled } from "./pythonEnv";
import type { HelionServer } from "./server";
import { selectChip, updateSetting } from "./statusBar";
import type { TuningProgress } from "./tuning";

export interface CommandContext {
  server: HelionServer;
  generated: GeneratedCodeProvider;
  tuning: TuningProgress;
  plots: TuningPlots;
  chips: readonly string[];
}

/** A failure the user can act on; shown as a plain message rather than as an error. */
class UserError extends Error {}

/** The active Python editor: a file's, or a Jupyter notebook cell's (its document is the cell). */
function pythonEditor(): vscode.TextEditor {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined || editor.document.languageId !== "python" || editor.document.uri.scheme === GENERATED_SCHEME) {
    throw new UserError("Open a Python file or notebook cell with a Helion kernel first.");
  }
  return editor;
}

/**
 * The kernel under the cursor (helion/kernelAt). Its `uri` is the document the kernel belongs to, as the server
 * says: the file, or for a notebook cell the notebook (tuning runs and generated views are the notebook's).
 */
async function kernelAtCursor(server: HelionServer, editor: vscode.TextEditor): Promise<GeneratedTarget> {
  const uri = editor.document.uri.toString();
  const { line, character } = editor.selection.active;
  const at = await server.request<{ kernel: string; shapeSet: number; uri?: string } | null>("helion/kernelAt", {
    uri,
    position: { line, character },
  });
  if (at === null || at === undefined) {
    throw new UserError("The cursor is not in a Helion kernel (a function decorated with @helion.kernel).");
  }
  return { uri: at.uri ?? uri, kernel: at.kernel, shapeSet: at.shapeSet ?? 0 };
}

async function applyBestConfig(context: CommandContext): Promise<void> {
  const target = await kernelAtCursor(context.server, pythonEditor());
  const results = await context.server.request<TuningResults>("helion/tuningResults", target);
  if (!results?.best?.config) {
    const tune = "Tune Kernel";
    const choice = await vscode.window.showInformationMessage(
      `No tuning results for ${target.kernel} (shape set ${target.shapeSet}) yet.`,
      tune,
    );
    if (choice === tune) await vscode.commands.executeCommand("helion-ls.tuneKernel");
    return;
  }
  await context.server.executeCommand("helion.applyConfig", { ...target, config: results.best.config });
}

async function cancelTuning(context: CommandContext): Promise<void> {
  const runs = context.tuning.tracker.active();
  if (runs.length === 0) {
    void vscode.window.showInformationMessage("No Helion tuning is running.");
    return;
  }
  if (runs.length === 1) {
    await context.tuning.cancel(runs[0].uri, runs[0].kernel);
    return;
  }
  const all = { label: "All tuning runs", uri: null as string | null, kernel: null as string | null };
  const picked = await vscode.window.showQuickPick(
    [all, ...runs.map((r) => ({ label: r.kernel, description: vscode.Uri.parse(r.uri).fsPath, uri: r.uri, kernel: r.kernel }))],
    { title: "Cancel which tuning run?" },
  );
  if (picked !== undefined) await context.tuning.cancel(picked.uri, picked.kernel);
}

/**
 * Tuning runs kernel code (its correctness check runs the kernel eagerly), so in Restricted Mode it is off:
 * say why and offer to manage trust. (The server refuses too, for tuning started from a code lens.)
 */
async function tuningAllowed(): Promise<boolean> {
  if (vscode.workspace.isTrusted) return true;
  const manage = "Manage Workspace Trust";
  const choice = await vscode.window.showWarningMessage(
    "Tuning is off in Restricted Mode: its correctness check runs this file's kernel code. Trust the workspace to tune.",
    manage,
  );
  if (choice === manage) await vscode.commands.executeCommand("workbench.trust.manage");
  return false;
}

/** Lets the user pick the server's interpreter; a change of helion.interpreter restarts the server. */
async function selectInterpreter(): Promise<void> {
  const resource = vscode.window.activeTextEditor?.document.uri;
  type Item = vscode.QuickPickItem & { action: "python" | "clear" | "enter" | "browse" };
  const items: Item[] = [];
  if (pythonExtensionInstalled()) {
    items.push({ label: "$(python) Use the Python extension's interpreter", action: "clear" });
    items.push({ label: "$(list-selection) Select it in the Python extension…", action: "python" });
  } else {
    items.push({ label: "$(terminal) Use python3 from PATH", action: "clear" });
  }
  items.push({ label: "$(edit) Enter interpreter path…", action: "enter" });
  items.push({ label: "$(folder-opened) Browse…", action: "browse" });
  const picked = await vscode.window.showQuickPick(items, { title: "Helion: Python interpreter for the language server" });
  if (picked === undefined) return;
  switch (picked.action) {
    case "clear":
      await updateSetting("interpreter", undefined, resource);
      return;
    case "python":
      await updateSetting("interpreter", undefined, resource);
      await vscode.commands.executeCommand("python.setInterpreter");
      return;
    case "enter": {
      const current = vscode.workspace.getConfiguration("helion", resource).get<string | null>("interpreter") ?? "";
      const value = await vscode.window.showInputBox({
        title: "Python interpreter (with helion_ls installed)",
        value: current,
        placeHolder: "/path/to/venv/bin/python",
      });
      if (value !== undefined) await updateSetting("interpreter", value.trim() || undefined, resource);
      return;
    }
    case "browse": {
      const files = await vscode.window.showOpenDialog({ canSelectMany: false, title: "Python interpreter" });
      if (files?.[0] !== undefined) await updateSetting("interpreter", files[0].fsPath, resource);
      return;
    }
  }
}

/** Runs a command body and turns its failure into a message (with the server's fixes when it is down). */
function guarded(context: CommandContext, body: (argument?: unknown) => Promise<void>): (argument?: unknown) => Promise<void> {
  return async (argument) => {
    try {
      await body(argument);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      context.server.output.warn(`command failed: ${message}`);
      if (error instanceof UserError) void vscode.window.showInformationMessage(message);
      else if (context.server.currentStatus.state !== "running") void context.server.showFailure(message);
      else void vscode.window.showErrorMessage(`Helion: ${message}`);
    }
  };
}

/** A target passed by a code lens (`{uri, kernel, shapeSet}`), if `value` is one. */
function lensTarget(value: unknown): GeneratedTarget | undefined {
  const v = value as Partial<GeneratedTarget> | undefined;
  if (typeof v?.uri !== "string" || typeof v.kernel !== "string") return undefined;
  return { uri: v.uri, kernel: v.kernel, shapeSet: typeof v.shapeSet === "number" ? v.shapeSet : 0 };
}

export function registerCommands(context: CommandContext): vscode.Disposable[] {
  const { server, generated, plots } = context;
  const commands: Record<string, (argument?: unknown) => Promise<void>> = {
    // From the palette: the kernel under the cursor; from the server's shape-set lens: that kernel and set.
    "helion-ls.showGeneratedCode": async (argument) => {
      const target = lensTarget(argument) ?? (await kernelAtCursor(server, pythonEditor()));
      const editor = vscode.window.activeTextEditor;
      const at = editor === undefined ? undefined : { uri: editor.document.uri.toString(), line: editor.selection.active.line };
      await generated.open(target, at);
    },
    // From a generated view: back to the kernel source line the statement under the cursor comes from.
    "helion-ls.goToSource": async () => {
      const editor = vscode.window.activeTextEditor;
      if (editor === undefined || !(await generated.goToSource(editor))) {
        void vscode.window.showInformationMessage("Go to Source works in a generated Pallas view, on generated code.");
      }
    },
    "helion-ls.tuneKernel": async () => {
      if (!(await tuningAllowed())) return;
      const { uri, kernel } = await kernelAtCursor(server, pythonEditor());
      await server.executeCommand("helion.tune", { uri, kernel, shapeSet: null });
    },
    "helion-ls.tuneFile": async () => {
      if (!(await tuningAllowed())) return;
      await server.executeCommand("helion.tuneFile", { uri: pythonEditor().document.uri.toString() });
    },
    "helion-ls.checkOnChip": async () => {
      if (!(await tuningAllowed())) return; // the check runs kernel code too
      const { uri, kernel } = await kernelAtCursor(server, pythonEditor());
      await server.executeCommand("helion.checkOnChip", { uri, kernel });
    },
    // From the kernel hover's link (that shape set) or the palette (the kernel under the cursor): the current
    // config's per-call time on this machine's TPU, in the chip's line; the hover shows it when it is done.
    "helion-ls.measureOnChip": async (argument) => {
      if (!(await tuningAllowed())) return; // the measurement runs kernel code too
      const target = lensTarget(argument) ?? (await kernelAtCursor(server, pythonEditor()));
      const again = (argument as { again?: unknown } | undefined)?.again === true;
      await server.executeCommand("helion.measureOnChip", { ...target, again });
    },
    "helion-ls.applyBestConfig": () => applyBestConfig(context),
    "helion-ls.cancelTuning": () => cancelTuning(context),
    "helion-ls.showTuningPlot": async () => plots.show(await kernelAtCursor(server, pythonEditor())),
    "helion-ls.selectChip": () => selectChip(context.chips, context.server.machine),
    "helion-ls.selectInterpreter": selectInterpreter,
    "helion-ls.restartServer": () => server.restart(),
    "helion-ls.showOutput": async () => server.output.show(true),
  };
  return Object.entries(commands).map(([id, body]) => vscode.commands.registerCommand(id, guarded(context, body)));
}
