/**
 * The server's "applied, not saved yet" notice (helion/applied): a plain information message with a Save
 * button. (It was a progress notification that closed itself on save; its progress bar and Cancel button,
 * which only closed it, read like a running job that Cancel would undo.) A second apply to the same file while
 * its message is up shows no second one.
 */
import * as vscode from "vscode";
import type { AppliedParams, HelionServer } from "./server";

const SAVE = "Save";

export class ApplyNotices implements vscode.Disposable {
  /** Documents whose message is up. */
  private readonly open = new Set<string>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(server: HelionServer) {
    this.subscriptions = [server.onApplied((params) => void this.show(params))];
  }

  private async show(params: AppliedParams): Promise<void> {
    if (this.open.has(params.uri)) return;
    this.open.add(params.uri);
    try {
      const choice = await vscode.window.showInformationMessage(params.message, SAVE);
      if (choice !== SAVE) return;
      const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === params.uri);
      if (document?.isDirty) await document.save();
    } finally {
      this.open.delete(params.uri);
    }
  }

  dispose(): void {
    for (const subscription of this.subscriptions) subscription.dispose();
  }
}
