/**
 * Tuning progress as the user sees it: one cancellable notification per kernel being tuned, driven by the
 * server's helion/tuningState notifications (whoever started the run: a code lens or a command). Cancelling
 * the notification sends helion.cancelTuning for that kernel.
 */
import * as path from "node:path";
import * as vscode from "vscode";
import { formatSeconds } from "./plotData";
import type { HelionServer } from "./server";
import { TuningTracker, type TuningRun, type TuningStateParams } from "./tuningModel";

/** One progress notification; reports that arrive before VS Code hands over the progress object are kept. */
class ProgressView {
  private progress: vscode.Progress<{ message?: string; increment?: number }> | undefined;
  private pendingIncrement = 0;
  private pendingMessage: string | undefined;
  private resolve: (() => void) | undefined;
  /** The user cancelled: later reports of this run are dropped instead of reopening a notification. */
  closed = false;

  constructor(run: TuningRun, onCancel: () => void) {
    const file = path.basename(vscode.Uri.parse(run.uri).path);
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Tuning ${run.kernel} (${file})`, cancellable: true },
      (progress, token) => {
        this.progress = progress;
        this.flush();
        token.onCancellationRequested(() => {
          this.closed = true;
          onCancel();
          this.finish();
        });
        return new Promise<void>((resolve) => {
          this.resolve = resolve;
          if (this.closed) resolve();
        });
      },
    );
  }

  report(increment: number, message: string): void {
    this.pendingIncrement += increment;
    this.pendingMessage = message;
    this.flush();
  }

  finish(): void {
    this.closed = true;
    this.resolve?.();
  }

  private flush(): void {
    if (this.progress === undefined || (this.pendingIncrement === 0 && this.pendingMessage === undefined)) return;
    this.progress.report({ increment: this.pendingIncrement, message: this.pendingMessage });
    this.pendingIncrement = 0;
    this.pendingMessage = undefined;
  }
}

export class TuningProgress implements vscode.Disposable {
  readonly tracker = new TuningTracker(formatSeconds);
  private readonly views = new Map<string, ProgressView>();
  private readonly changed = new vscode.EventEmitter<TuningStateParams | undefined>();
  private readonly subscriptions: vscode.Disposable[];
  /** Fires after each notification is folded in (with it), and with undefined when all runs were dropped. */
  readonly onDidChange = this.changed.event;

  constructor(private readonly server: HelionServer) {
    this.subscriptions = [
      server.onTuningState((params) => this.handle(params)),
      server.onDidChangeStatus((status) => {
        if (status.state !== "running") this.dropAll();
      }),
    ];
  }

  /** Asks the server to cancel the runs of `uri`/`kernel` (nulls: all runs). */
  async cancel(uri: string | null, kernel: string | null): Promise<void> {
    await this.server.executeCommand("helion.cancelTuning", { uri, kernel });
  }

  private handle(params: TuningStateParams): void {
    const update = this.tracker.update(params);
    const key = update.run.key;
    let view = this.views.get(key);
    if (view === undefined && !update.finished) {
      view = new ProgressView(update.run, () => {
        this.cancel(update.run.uri, update.run.kernel).catch((error) =>
          vscode.window.showErrorMessage(`Could not cancel tuning: ${String(error)}`),
        );
      });
      this.views.set(key, view);
    }
    if (view !== undefined && !view.closed) view.report(update.increment, update.message);
    if (update.finished) {
      view?.finish();
      this.views.delete(key);
      const failed = [...update.run.shapeSets.values()].filter((s) => s.state === "failed");
      if (failed.length > 0) {
        const why = failed.map((s) => s.message).filter(Boolean).join("; ");
        void vscode.window.showWarningMessage(`Tuning ${update.run.kernel} failed${why ? `: ${why}` : "."}`);
      }
    }
    this.changed.fire(params);
  }

  private dropAll(): void {
    this.tracker.clear();
    for (const view of this.views.values()) view.finish();
    this.views.clear();
    this.changed.fire(undefined);
  }

  dispose(): void {
    this.dropAll();
    for (const subscription of this.subscriptions) subscription.dispose();
    this.changed.dispose();
  }
}
