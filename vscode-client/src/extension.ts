/**
 * Entry point: wires the language server (server.ts) to the views and commands. Activated on Python files and
 * Jupyter notebooks.
 * Modules without a `vscode` import (settings, interpreter, generatedUri, plotData, tuningModel) hold the
 * logic that is unit-tested; the others are thin VS Code glue.
 */
import * as vscode from "vscode";
import { ApplyNotices } from "./applyNotice";
import { registerCommands } from "./commands";
import { GeneratedCodeProvider } from "./generatedView";
import { TuningPlots } from "./plot";
import { onPythonInterpreterChange } from "./pythonEnv";
import { HelionServer, settingsFor } from "./server";
import { HelionStatusBar } from "./statusBar";
import { TuningProgress } from "./tuning";

let server: HelionServer | undefined;

/** The chip names offered by the status bar: the `enum` of this extension's own `helion.chip` setting. */
function chipNames(packageJson: { contributes?: { configuration?: { properties?: Record<string, { enum?: string[] }> } } }): string[] {
  return packageJson.contributes?.configuration?.properties?.["helion.chip"]?.enum ?? [];
}

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel("Helion", { log: true });
  server = new HelionServer(output);
  const generated = new GeneratedCodeProvider(server);
  const tuning = new TuningProgress(server);
  const plots = new TuningPlots(server, tuning);
  const statusBar = new HelionStatusBar(server, tuning);
  const notices = new ApplyNotices(server);
  const running = server;
  context.subscriptions.push(
    output,
    running,
    generated,
    tuning,
    plots,
    statusBar,
    notices,
    ...registerCommands({ server: running, generated, tuning, plots, chips: chipNames(context.extension.packageJSON) }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      // Other helion.* settings reach the running server through workspace/didChangeConfiguration.
      if (event.affectsConfiguration("helion.interpreter")) void running.restart();
    }),
  );
  void running.start().then(async () => {
    const subscription = await onPythonInterpreterChange(() => {
      if (settingsFor(vscode.window.activeTextEditor?.document.uri).interpreter === null) void running.restart();
    });
    if (subscription !== undefined) context.subscriptions.push(subscription);
  });
}

export async function deactivate(): Promise<void> {
  await server?.stop();
}
