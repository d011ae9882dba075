/**
 * Tuning results (helion/tuningResults) shaped into a plot and rendered as a self-contained HTML page with an
 * inline SVG: estimated time of each config tried, and the best so far, in the order they were tried. Pure; the
 * webview in plot.ts only shows the string. No scripts: tooltips are SVG <title> elements.
 * The TPU compiler's own estimates (evaluator "schedule") are drawn apart, as diamonds above the config they
 * estimate, and never enter the best-so-far line; the compiler's check of the model's pick is one line above.
 */

export interface Trial {
  config: Record<string, unknown>;
  seconds: number | null;
  tflops?: number | null;
  gbps?: number | null;
  verdict?: string | null;
  timestamp?: number | string | null;
  evaluator?: string | null;
}

/** The TPU compiler's check of the model's best configs (compiler/tune/crosscheck.py). */
export interface CompilerCheck {
  verdict: string;
  message: string;
  disagrees: boolean;
}

export interface TuningResults {
  trials: Trial[];
  best: { config: Record<string, unknown>; seconds?: number | null } | null;
  compilerCheck?: CompilerCheck | null;
}

/** The evaluator whose figures are the TPU compiler's, not the model's. */
export const COMPILER_EVALUATOR = "schedule";

export interface PlotPoint {
  /** 1-based position in the order the configs were tried. */
  index: number;
  seconds: number;
  label: string;
}

export interface PlotData {
  points: PlotPoint[];
  /** Configs that gave no time (pruned, failed to compile, out of VMEM...), with their verdict. */
  rejected: { index: number; verdict: string; label: string }[];
  /** The best time after each valid trial: a step function over `index`. */
  bestSoFar: { index: number; seconds: number }[];
  best: PlotPoint | null;
  /** The TPU compiler's estimates, each at the index of the config it estimates. */
  compiler: PlotPoint[];
}

function timeOf(trial: Trial): number {
  const t = trial.timestamp;
  if (typeof t === "number" && Number.isFinite(t)) return t;
  if (typeof t === "string") {
    const parsed = Date.parse(t);
    if (!Number.isNaN(parsed)) return parsed / 1000;
    const asNumber = Number(t);
    if (Number.isFinite(asNumber)) return asNumber;
  }
  return Number.POSITIVE_INFINITY;
}

/** `helion.Config`-like one-line text of a config, keys sorted, as the decorator would show it. */
export function configLabel(config: Record<string, unknown>): string {
  const parts = Object.keys(config)
    .sort()
    .map((key) => `${key}=${JSON.stringify(config[key])}`);
  return parts.join(", ");
}

/** Orders trials by timestamp (stable for equal or missing ones) and derives points, rejects and best-so-far. */
export function shapeTrials(all: readonly Trial[]): PlotData {
  const trials = all.filter((t) => t.evaluator !== COMPILER_EVALUATOR);
  const ordered = trials
    .map((trial, position) => ({ trial, position, time: timeOf(trial) }))
    .sort((a, b) => (a.time === b.time ? a.position - b.position : a.time < b.time ? -1 : 1));
  const points: PlotPoint[] = [];
  const rejected: PlotData["rejected"] = [];
  const bestSoFar: PlotData["bestSoFar"] = [];
  let best: PlotPoint | null = null;
  ordered.forEach(({ trial }, i) => {
    const index = i + 1;
    const label = configLabel(trial.config ?? {});
    const seconds = trial.seconds;
    if (typeof seconds === "number" && Number.isFinite(seconds) && seconds > 0) {
      const point = { index, seconds, label };
      points.push(point);
      if (best === null || seconds < best.seconds) best = point;
      bestSoFar.push({ index, seconds: (best as PlotPoint).seconds });
    } else {
      rejected.push({ index, verdict: trial.verdict ?? "no time", label });
    }
  });
  const where = new Map(points.map((p) => [p.label, p.index]));
  const compiler: PlotPoint[] = [];
  for (const trial of all) {
    const label = configLabel(trial.config ?? {});
    const index = where.get(label);
    const seconds = trial.seconds;
    if (trial.evaluator === COMPILER_EVALUATOR && index !== undefined && typeof seconds === "number" && seconds > 0) {
      compiler.push({ index, seconds, label });
    }
  }
  return { points, rejected, bestSoFar, best, compiler };
}

/** Seconds in the unit a kernel author reads at a glance (s, ms, µs, ns), three significant digits. */
export function formatSeconds(seconds: number): string {
  const units: [number, string][] = [
    [1, "s"],
    [1e-3, "ms"],
    [1e-6, "µs"],
    [1e-9, "ns"],
  ];
  const abs = Math.abs(seconds);
  for (const [scale, unit] of units) {
    if (abs >= scale || scale === 1e-9) return `${Number((seconds / scale).toPrecision(3))} ${unit}`;
  }
  return `${seconds} s`;
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

interface Scale {
  toPixel(value: number): number;
  ticks: number[];
}

/** A log scale when the times span more than 20×, so a few slow configs do not flatten the rest. */
function yScale(min: number, max: number, top: number, bottom: number): Scale {
  if (max / min > 20) {
    const lo = Math.floor(Math.log10(min));
    const hi = Math.ceil(Math.log10(max));
    const ticks: number[] = [];
    for (let e = lo; e <= hi; e++) ticks.push(10 ** e);
    return { toPixel: (v) => bottom - ((Math.log10(v) - lo) / (hi - lo || 1)) * (bottom - top), ticks };
  }
  const pad = (max - min) * 0.1 || max * 0.1;
  const lo = Math.max(0, min - pad);
  const hi = max + pad;
  const ticks = Array.from({ length: 5 }, (_, i) => lo + ((hi - lo) * i) / 4);
  return { toPixel: (v) => bottom - ((v - lo) / (hi - lo)) * (bottom - top), ticks };
}

/** The plot as an SVG element; `data` from shapeTrials. */
export function renderPlotSvg(data: PlotData, width = 720, height = 360): string {
  const margin = { left: 72, right: 16, top: 16, bottom: 44 };
  const plotRight = width - margin.right;
  const plotBottom = height - margin.bottom;
  const total = data.points.length + data.rejected.length;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="tuning results">`,
    `<line class="axis" x1="${margin.left}" y1="${plotBottom}" x2="${plotRight}" y2="${plotBottom}"/>`,
    `<line class="axis" x1="${margin.left}" y1="${margin.top}" x2="${margin.left}" y2="${plotBottom}"/>`,
    `<text class="label" x="${(margin.left + plotRight) / 2}" y="${height - 6}" text-anchor="middle">config tried (in order)</text>`,
  ];
  const x = (index: number): number =>
    margin.left + (total <= 1 ? 0.5 : (index - 1) / (total - 1)) * (plotRight - margin.left - 8) + 4;
  const xTickStep = Math.max(1, Math.ceil(total / 10));
  for (let i = 1; i <= total; i += xTickStep) {
    parts.push(`<text class="tick" x="${x(i)}" y="${plotBottom + 16}" text-anchor="middle">${i}</text>`);
  }
  if (data.points.length > 0) {
    const values = [...data.points, ...data.compiler].map((p) => p.seconds);
    const y = yScale(Math.min(...values), Math.max(...values), margin.top, plotBottom);
    for (const tick of y.ticks) {
      const py = y.toPixel(tick);
      parts.push(`<line class="grid" x1="${margin.left}" y1="${py}" x2="${plotRight}" y2="${py}"/>`);
      parts.push(`<text class="tick" x="${margin.left - 6}" y="${py + 4}" text-anchor="end">${formatSeconds(tick)}</text>`);
    }
    const steps: string[] = [];
    data.bestSoFar.forEach((b, i) => {
      const px = x(b.index);
      const py = y.toPixel(b.seconds);
      if (i > 0) steps.push(`${px},${y.toPixel(data.bestSoFar[i - 1].seconds)}`);
      steps.push(`${px},${py}`);
    });
    if (data.bestSoFar.length > 0) steps.push(`${x(total)},${y.toPixel(data.bestSoFar[data.bestSoFar.length - 1].seconds)}`);
    parts.push(`<polyline class="best-line" points="${steps.join(" ")}"/>`);
    for (const p of data.points) {
      const isBest = p === data.best;
      parts.push(
        `<circle class="${isBest ? "point best" : "point"}" cx="${x(p.index)}" cy="${y.toPixel(p.seconds)}" r="${isBest ? 5 : 3.5}">` +
          `<title>#${p.index}: ${escapeHtml(formatSeconds(p.seconds))}\n${escapeHtml(p.label)}</title></circle>`,
      );
    }
    for (const c of data.compiler) {
      const cx = x(c.index);
      const cy = y.toPixel(c.seconds);
      parts.push(
        `<path class="compiler" d="M${cx},${cy - 5} l5,5 l-5,5 l-5,-5 z"><title>#${c.index}: TPU compiler estimate ${escapeHtml(formatSeconds(c.seconds))}\n${escapeHtml(c.label)}</title></path>`,
      );
    }
  }
  for (const r of data.rejected) {
    const px = x(r.index);
    parts.push(
      `<path class="rejected" d="M${px - 3},${plotBottom - 9} l6,6 m0,-6 l-6,6"><title>#${r.index}: ${escapeHtml(r.verdict)}\n${escapeHtml(r.label)}</title></path>`,
    );
  }
  parts.push("</svg>");
  return parts.join("\n");
}

const STYLE = `
body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); padding: 0 16px; }
.plot { max-width: 100%; height: auto; }
.axis { stroke: var(--vscode-foreground); stroke-width: 1; }
.grid { stroke: var(--vscode-editorWidget-border, #8884); stroke-width: 0.5; }
.tick, .label { fill: var(--vscode-descriptionForeground); font-size: 11px; }
.point { fill: var(--vscode-charts-blue, #3794ff); opacity: 0.75; }
.point.best { fill: var(--vscode-charts-green, #89d185); opacity: 1; }
.best-line { fill: none; stroke: var(--vscode-charts-green, #89d185); stroke-width: 2; }
.rejected { stroke: var(--vscode-charts-red, #f14c4c); stroke-width: 1.5; }
.compiler { fill: none; stroke: var(--vscode-charts-orange, #d18616); stroke-width: 1.5; }
.check.disagrees { color: var(--vscode-charts-orange, #d18616); font-weight: bold; }
.legend span { margin-right: 16px; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 5px; margin-right: 4px; }
table { border-collapse: collapse; margin-top: 12px; font-family: var(--vscode-editor-font-family); font-size: 12px; }
td, th { text-align: left; padding: 2px 12px 2px 0; }
`;

export interface PlotPageInfo {
  kernel: string;
  shapeSet: number;
  /** The live tuning state line, e.g. "running 12/30", when a run is going on. */
  state?: string;
  error?: string;
}

/** The whole webview page: heading, summary, legend, plot and the fastest configs. */
export function renderPlotHtml(results: TuningResults | null, info: PlotPageInfo): string {
  const title = `Tuning ${info.kernel} — shape set ${info.shapeSet}`;
  const body: string[] = [`<h2>${escapeHtml(title)}</h2>`];
  if (info.state) body.push(`<p class="state">${escapeHtml(info.state)}</p>`);
  if (info.error) {
    body.push(`<p class="error">${escapeHtml(info.error)}</p>`);
  } else if (results === null || results.trials.length === 0) {
    body.push("<p>No configs tried yet: run Helion: Tune Kernel.</p>");
  } else {
    const data = shapeTrials(results.trials);
    const summary = data.best
      ? `${data.points.length + data.rejected.length} configs tried, ${data.rejected.length} rejected; best ${formatSeconds(data.best.seconds)} (#${data.best.index}).`
      : `${data.rejected.length} configs tried, none gave a time.`;
    body.push(`<p class="summary">${escapeHtml(summary)}</p>`);
    const check = results.compilerCheck;
    if (check) {
      body.push(`<p class="check ${check.disagrees ? "disagrees" : escapeHtml(check.verdict.replace(" ", "-"))}">${escapeHtml(check.message)}</p>`);
    }
    body.push(
      '<p class="legend"><span><i class="swatch" style="background: var(--vscode-charts-blue, #3794ff)"></i>estimated time per config (model)</span>' +
        '<span><i class="swatch" style="background: var(--vscode-charts-green, #89d185)"></i>best so far</span>' +
        (data.compiler.length > 0
          ? '<span><i class="swatch" style="border: 1.5px solid var(--vscode-charts-orange, #d18616)"></i>TPU compiler estimate</span>'
          : "") +
        '<span><i class="swatch" style="background: var(--vscode-charts-red, #f14c4c)"></i>rejected</span></p>',
    );
    body.push(renderPlotSvg(data));
    const fastest = [...data.points].sort((a, b) => a.seconds - b.seconds).slice(0, 10);
    if (fastest.length > 0) {
      body.push("<table><tr><th>#</th><th>estimated time</th><th>config</th></tr>");
      for (const p of fastest) {
        body.push(`<tr><td>${p.index}</td><td>${escapeHtml(formatSeconds(p.seconds))}</td><td>${escapeHtml(p.label)}</td></tr>`);
      }
      body.push("</table>");
    }
  }
  return [
    "<!DOCTYPE html>",
    '<html lang="en"><head><meta charset="utf-8">',
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline';">`,
    `<title>${escapeHtml(title)}</title><style>${STYLE}</style></head>`,
    `<body>${body.join("\n")}</body></html>`,
  ].join("\n");
}
