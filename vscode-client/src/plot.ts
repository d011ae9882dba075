/**
 * A webview per kernel and shape set plotting its tuning results (helion/tuningResults); it re-reads them,
 * at most once a second, while tuning notifications for that kernel arrive. The page itself is plotData.ts.
 */
import * as vscode from "vscode";
import type { GeneratedTarget } from "./generatedUri";
import { formatSeconds, renderPlotHtml, type TuningResults } from "./plotData";
import type { HelionServer } from "./server";
import type { TuningProgress } from "./tuning";
import { describeRun, runKey } from "./tuningModel";

const REFRESH_MS = 1000;

class PlotPanel {
  private timer: NodeJS.Timeout | undefined;
  private dirty = false;

  constructor(
    readonly panel: vscode.WebviewPanel,
    readonly target: GeneratedTarget,
    private readonly server: HelionServer,
    private readonly tuning: TuningProgress,
  ) {}

  /** Re-renders now, or once the current throttle window ends. */
  schedule(): void {
    if (this.timer !== undefined) {
      this.dirty = true;
      return;
    }
    void this.render();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.dirty) {
        this.dirty = false;
        this.schedule();
      }
    }, REFRESH_MS);
  }

  async render(): Promise<void> {
    const { uri, kernel, shapeSet } = this.target;
    const run = this.tuning.tracker.active().find((r) => r.key === runKey(uri, kernel));
    const state = run ? `Tuning now: ${describeRun(run, formatSeconds)}` : undefined;
    try {
      const results = await this.server.request<TuningResults>("helion/tuningResults", this.target);
      this.panel.webview.html = renderPlotHtml(results, { kernel, shapeSet, state });
    } catch (error) {
      this.panel.webview.html = renderPlotHtml(null, { kernel, shapeSet, state, error: String(error) });
    }
  }

  dispose(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
  }
}

export class TuningPlots implements vscode.Disposable {
  private readonly panels = new Map<string, PlotPanel>();
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly server: HelionServer,
    private readonly tuning: TuningProgress,
  ) {
    this.subscription = tuning.onDidChange((params) => {
      for (const plot of this.panels.values()) {
        if (params === undefined || (params.uri === plot.target.uri && params.kernel === plot.target.kernel)) plot.schedule();
      }
    });
  }

  /** Shows (or brings forward) the plot of `target` beside the active editor. */
  show(target: GeneratedTarget): void {
    const key = `${runKey(target.uri, target.kernel)}#${target.shapeSet}`;
    const existing = this.panels.get(key);
    if (existing !== undefined) {
      existing.panel.reveal(vscode.ViewColumn.Beside, true);
      existing.schedule();
      return;
    }
    const panel = vscode.window.createWebviewPanel(
      "helionTuningPlot",
      `Tuning: ${target.kernel} [${target.shapeSet}]`,
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
      { enableScripts: false, retainContextWhenHidden: false },
    );
    const plot = new PlotPanel(panel, target, this.server, this.tuning);
    this.panels.set(key, plot);
    panel.onDidDispose(() => {
      plot.dispose();
      this.panels.delete(key);
    });
    panel.onDidChangeViewState((event) => {
      if (event.webviewPanel.visible) plot.schedule();
    });
    plot.schedule();
  }

  dispose(): void {
    this.subscription.dispose();
    for (const plot of this.panels.values()) {
      plot.dispose();
      plot.panel.dispose();
    }
  }
}
