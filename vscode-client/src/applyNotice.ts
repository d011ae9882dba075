/**
 * The server's "applied, not saved yet" notice (helion/applied): a notification that stays while the file has
 * the unsaved edit and goes away by itself once the file is saved, closed or no longer modified (an undo). A
 * plain information message could not be taken back after the save. It has no Cancel button: one that only
 * closed it read like "undo the apply" (seen in code-server, 2026-12-07).
 */
import * as vscode from "vscode";
import type { AppliedParams, HelionServer } from "./server";

export class ApplyNotices implements vscode.Disposable {
  /** The open notice per document URI: resolving it closes the notification. */
  private readonly open = new Map<string, () => void>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(server: HelionServer) {
    this.subscriptions = [
      server.onApplied((params) => this.show(params)),
      vscode.workspace.onDidSaveTextDocument((document) => this.close(document.uri.toString())),
      vscode.workspace.onDidCloseTextDocument((document) => this.close(document.uri.toString())),
      vscode.workspace.onDidChangeTextDocument((event) => {
        if (!event.document.isDirty) this.close(event.document.uri.toString());
      }),
    ];
  }

  private show(params: AppliedParams): void {
    this.close(params.uri);
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: params.message, cancellable: false },
      () =>
        new Promise<void>((resolve) => {
          const done = () => {
            if (this.open.get(params.uri) === done) this.open.delete(params.uri);
            resolve();
          };
          this.open.set(params.uri, done);
        }),
    );
  }

  private close(uri: string): void {
    this.open.get(uri)?.();
  }

  dispose(): void {
    for (const done of [...this.open.values()]) done();
    for (const subscription of this.subscriptions) subscription.dispose();
  }
}
