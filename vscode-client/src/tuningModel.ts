/**
 * Client-side picture of tuning runs, built from the server's helion/tuningState notifications. A run is one
 * kernel of one document; it covers the shape sets the server reports for it and ends when all of them reach
 * a final state. Pure, so the progress arithmetic is unit-tested; tuning.ts shows it.
 */

export type TuningPhase = "queued" | "running" | "done" | "failed" | "cancelled" | "stale";

export interface TuningBest {
  config?: Record<string, unknown>;
  seconds?: number | null;
  [key: string]: unknown;
}

/** The helion/tuningState notification's payload. */
export interface TuningStateParams {
  uri: string;
  kernel: string;
  shapeSet: number;
  state: TuningPhase;
  evaluated: number;
  total: number;
  best: TuningBest | null;
  message?: string | null;
  /** The server's words for this state, the same its code lens shows ("Tuning… 3/30"). */
  title?: string;
  /** Its place in the line for this machine's TPU (2 = next), 0 when not waiting for the chip. */
  place?: number;
  /** Why the tuner used the model on a machine with a TPU. */
  fallback?: string | null;
}

const FINAL: ReadonlySet<TuningPhase> = new Set(["done", "failed", "cancelled", "stale"]);

function isFinal(phase: TuningPhase): boolean {
  return FINAL.has(phase);
}

export function runKey(uri: string, kernel: string): string {
  return `${uri}#${kernel}`;
}

export interface TuningRun {
  key: string;
  uri: string;
  kernel: string;
  shapeSets: Map<number, TuningStateParams>;
  /** Percentage already handed to the progress UI (whose `increment`s add up). */
  reported: number;
}

/** What one notification changed. */
export interface TuningUpdate {
  run: TuningRun;
  /** A new run began with this notification: the UI should open a progress notification. */
  started: boolean;
  /** Every shape set of the run is final: the UI should close it. */
  finished: boolean;
  /** Percentage points to add to the progress bar (never negative). */
  increment: number;
  message: string;
}

/** Percentage of the run's evaluations done, over the shape sets that know their total. */
function runPercent(run: TuningRun): number {
  let evaluated = 0;
  let total = 0;
  for (const s of run.shapeSets.values()) {
    if (s.total > 0) {
      total += s.total;
      evaluated += isFinal(s.state) ? s.total : Math.min(s.evaluated, s.total);
    }
  }
  return total === 0 ? 0 : (100 * evaluated) / total;
}

/** The best time over the run's shape sets, or null when none has one yet. */
function bestSeconds(run: TuningRun): number | null {
  let best: number | null = null;
  for (const s of run.shapeSets.values()) {
    const seconds = s.best?.seconds;
    if (typeof seconds === "number" && Number.isFinite(seconds) && (best === null || seconds < best)) best = seconds;
  }
  return best;
}

/** "2nd in line for the TPU" when every unfinished shape set of the run waits for the chip, else null. */
export function waitingForChip(run: TuningRun): string | null {
  const open = [...run.shapeSets.values()].filter((s) => !isFinal(s.state));
  if (open.length === 0 || !open.every((s) => s.state === "queued" && (s.place ?? 0) > 0)) return null;
  const place = Math.min(...open.map((s) => s.place ?? 0));
  const suffix = place % 100 >= 10 && place % 100 <= 20 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" } as Record<number, string>)[place % 10] ?? "th";
  return `${place}${suffix} in line for the TPU`;
}

/** One line for the progress notification and the status bar tooltip. */
export function describeRun(run: TuningRun, format: (seconds: number) => string): string {
  const sets = [...run.shapeSets.values()].sort((a, b) => a.shapeSet - b.shapeSet);
  const parts = sets.map((s) => {
    const count = s.total > 0 ? ` ${s.evaluated}/${s.total}` : s.evaluated > 0 ? ` ${s.evaluated}` : "";
    const text = s.title ?? `${s.state}${count}`; // the lens's words when the server sends them
    return sets.length > 1 ? `set ${s.shapeSet}: ${text}` : text;
  });
  const best = bestSeconds(run);
  if (best !== null) parts.push(`best ${format(best)}`);
  const failures = sets.filter((s) => s.state === "failed" && s.message).map((s) => s.message);
  return [parts.join(", "), ...failures].join(" — ");
}

export class TuningTracker {
  private readonly runs = new Map<string, TuningRun>();

  constructor(private readonly format: (seconds: number) => string) {}

  /** Folds one notification in. A notification for a finished run's kernel starts a new run. */
  update(params: TuningStateParams): TuningUpdate {
    const key = runKey(params.uri, params.kernel);
    let run = this.runs.get(key);
    let started = false;
    if (run === undefined) {
      run = { key, uri: params.uri, kernel: params.kernel, shapeSets: new Map(), reported: 0 };
      started = !isFinal(params.state);
      this.runs.set(key, run);
    }
    run.shapeSets.set(params.shapeSet, params);
    const finished = [...run.shapeSets.values()].every((s) => isFinal(s.state));
    const percent = finished ? 100 : runPercent(run);
    const increment = Math.max(0, percent - run.reported);
    run.reported += increment;
    if (finished) this.runs.delete(key);
    return { run, started, finished, increment, message: describeRun(run, this.format) };
  }

  /** Runs still going on, oldest first. */
  active(): TuningRun[] {
    return [...this.runs.values()];
  }

  /** Forgets every run (the server went away, so no more notifications will end them). */
  clear(): TuningRun[] {
    const runs = this.active();
    this.runs.clear();
    return runs;
  }
}
