/**
 * The status bar item: the chip kernels are compiled for (click to change it) and the tuning state; when the
 * server is down it says so instead, and a click offers to select another interpreter.
 */
import * as vscode from "vscode";
import { settingsFor, type HelionServer } from "./server";
import { settingTarget, type SettingTarget } from "./settings";
import { describeRun, waitingForChip } from "./tuningModel";
import { chipLabel, effectiveChip, type MachineInfo } from "./machine";
import { formatSeconds } from "./plotData";
import type { TuningProgress } from "./tuning";

const TARGETS: Record<SettingTarget, vscode.ConfigurationTarget> = {
  workspaceFolder: vscode.ConfigurationTarget.WorkspaceFolder,
  workspace: vscode.ConfigurationTarget.Workspace,
  global: vscode.ConfigurationTarget.Global,
};

/** Writes `helion.<key>` where it takes effect for `resource` (see settingTarget). */
export async function updateSetting(key: string, value: unknown, resource: vscode.Uri | undefined): Promise<void> {
  const config = vscode.workspace.getConfiguration("helion", resource);
  const hasWorkspace = (vscode.workspace.workspaceFolders?.length ?? 0) > 0;
  let target = settingTarget(config.inspect(key), hasWorkspace);
  if (target === "workspaceFolder" && (resource === undefined || vscode.workspace.getWorkspaceFolder(resource) === undefined)) {
    target = "workspace";
  }
  await config.update(key, value, TARGETS[target]);
}

/** Quick pick of the chips listed in the extension's own `helion.chip` setting; writes the choice. */
export async function selectChip(chips: readonly string[], machine?: MachineInfo): Promise<void> {
  const resource = vscode.window.activeTextEditor?.document.uri;
  const current = settingsFor(resource).chip;
  const describe = (chip: string): string | undefined => {
    const words = [chip === current ? "current" : "", chip === "auto" ? chipLabel("auto", machine) : ""].filter((w) => w);
    return words.length > 0 ? words.join(" · ") : undefined;
  };
  const picked = await vscode.window.showQuickPick(
    chips.map((chip) => ({ label: chip, description: describe(chip) })),
    { title: "Helion: TPU chip to compile and tune for", placeHolder: current },
  );
  if (picked !== undefined && picked.label !== current) await updateSetting("chip", picked.label, resource);
}

export class HelionStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("helion.status", vscode.StatusBarAlignment.Right, 100);
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly server: HelionServer,
    private readonly tuning: TuningProgress,
  ) {
    this.item.name = "Helion";
    this.subscriptions = [
      server.onDidChangeStatus(() => this.update()),
      server.onDidChangeMachine(() => this.update()),
      tuning.onDidChange(() => this.update()),
      vscode.window.onDidChangeActiveTextEditor(() => this.update()),
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (event.affectsConfiguration("helion")) this.update();
      }),
    ];
    this.update();
  }

  update(): void {
    const editor = vscode.window.activeTextEditor;
    const setting = settingsFor(editor?.document.uri).chip;
    const chip = effectiveChip(setting, this.server.machine);
    const label = chipLabel(setting, this.server.machine);
    const status = this.server.currentStatus;
    const runs = this.tuning.tracker.active();
    const tooltip = new vscode.MarkdownString(undefined, true);
    this.item.backgroundColor = undefined;
    if (status.state === "failed") {
      this.item.text = "$(error) Helion";
      this.item.command = "helion-ls.selectInterpreter";
      this.item.backgroundColor = new vscode.ThemeColor("statusBarItem.errorBackground");
      tooltip.appendText(`${status.message}\n\nClick to select an interpreter.`);
    } else {
      const spin = status.state === "starting" ? "$(loading~spin) " : "";
      let text = `${spin}$(circuit-board) ${label}`;
      if (runs.length === 1) {
        const [run] = runs;
        const sets = [...run.shapeSets.values()];
        const evaluated = sets.reduce((n, s) => n + s.evaluated, 0);
        const total = sets.reduce((n, s) => n + s.total, 0);
        const waiting = waitingForChip(run);
        text += waiting !== null ? ` $(watch) ${run.kernel}: ${waiting}` : ` $(sync~spin) tuning ${run.kernel}${total > 0 ? ` ${evaluated}/${total}` : ""}`;
      } else if (runs.length > 1) {
        text += ` $(sync~spin) tuning ${runs.length} kernels`;
      }
      this.item.text = text;
      this.item.command = "helion-ls.selectChip";
      tooltip.appendMarkdown(`**Helion** — chip \`${chip}\`${setting === "auto" ? " (helion.chip: auto)" : ""}: ${label} (click to change)`);
      if (status.state === "running") tooltip.appendMarkdown(`\n\nServer: Python ${status.version} at \`${status.interpreter}\``);
      if (status.state === "starting") tooltip.appendMarkdown("\n\nServer starting…");
      for (const run of runs) tooltip.appendMarkdown(`\n\nTuning \`${run.kernel}\`: ${describeRun(run, formatSeconds)}`);
      if (runs.length === 0) tooltip.appendMarkdown("\n\nNo tuning running.");
    }
    this.item.tooltip = tooltip;
    const relevant = editor?.document.languageId === "python" || runs.length > 0 || status.state === "failed";
    if (relevant) this.item.show();
    else this.item.hide();
  }

  dispose(): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.item.dispose();
  }
}
