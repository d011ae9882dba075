/**
 * The "helion" settings as the language server expects them (the team contract's section), read from raw
 * VS Code values. Pure: no `vscode` import, so the mapping is unit-tested without an editor.
 */

export type Evaluator = "auto" | "model" | "compile" | "schedule" | "tpu";
export type CompilerCheck = "auto" | "on" | "off";

/** Everything in the "helion" section; `interpreter` is read by the client only (it starts the server). */
export interface HelionSettings {
  chip: string;
  evaluator: Evaluator;
  /** After tuning, the TPU compiler's estimate of the model's best configs: auto (simulated chips), on, off. */
  compilerCheck: CompilerCheck;
  executor: string;
  storePath: string | null;
  maxConcurrentTunings: number;
  compileOnChange: boolean;
  debounceMs: number;
  libtpu: boolean;
  tuneBudgetSeconds: number;
  tuneMaxEvals: number | null;
  /** Tuning runs kernel code: false never, true unless the workspace is untrusted, null: follow workspace trust. */
  allowCodeExecution: boolean | null;
  interpreter: string | null;
}

export const DEFAULT_SETTINGS: Readonly<HelionSettings> = Object.freeze({
  /** "auto": this machine's TPU generation, else v7x (the server decides: helion/machine, machine.ts). */
  chip: "auto",
  evaluator: "auto",
  compilerCheck: "auto",
  executor: "local",
  storePath: null,
  maxConcurrentTunings: 2,
  compileOnChange: false,
  debounceMs: 500,
  libtpu: true,
  tuneBudgetSeconds: 60,
  tuneMaxEvals: null,
  allowCodeExecution: null,
  interpreter: null,
});

export const SETTING_KEYS = Object.keys(DEFAULT_SETTINGS) as (keyof HelionSettings)[];

/** Where paths in settings are resolved: `~` is the home directory, `${workspaceFolder}` the resource's folder. */
export interface PathContext {
  home?: string;
  workspaceFolder?: string;
}

const EVALUATORS: readonly Evaluator[] = ["auto", "model", "compile", "schedule", "tpu"];
const COMPILER_CHECKS: readonly CompilerCheck[] = ["auto", "on", "off"];

function text(value: unknown): string | null {
  if (typeof value !== "string") return null;
  const trimmed = value.trim();
  return trimmed === "" ? null : trimmed;
}

function integer(value: unknown, min: number, max: number): number | null {
  if (typeof value !== "number" || !Number.isFinite(value)) return null;
  return Math.min(max, Math.max(min, Math.round(value)));
}

/** What `helion-pallas tune --executor` accepts (the server's settings.py checks the same). */
export const EXECUTOR_PATTERN = /^(local(:[1-9][0-9]*)?|inline|ray(:.+)?)$/;

/** Expands `~` and `${workspaceFolder}`; a path needing a folder that is not known is left as written. */
export function expandPath(value: string, context: PathContext): string {
  let out = value;
  if (context.workspaceFolder !== undefined) {
    out = out.split("${workspaceFolder}").join(context.workspaceFolder);
  }
  if (context.home !== undefined && (out === "~" || out.startsWith("~/"))) {
    out = context.home + out.slice(1);
  }
  return out;
}

/**
 * Maps raw values (whatever a user typed in settings.json) to the server's settings: wrong types and empty
 * strings fall back to the defaults, numbers are clamped to their valid range, paths are expanded. The server
 * then never sees a value it has to second-guess.
 */
export function readSettings(raw: Readonly<Record<string, unknown>> | undefined, context: PathContext = {}): HelionSettings {
  const get = (key: keyof HelionSettings): unknown => raw?.[key];
  const path = (key: "storePath" | "interpreter"): string | null => {
    const value = text(get(key));
    return value === null ? null : expandPath(value, context);
  };
  const evaluator = text(get("evaluator"));
  const executor = text(get("executor"));
  const budget = get("tuneBudgetSeconds");
  return {
    chip: text(get("chip"))?.toLowerCase() ?? DEFAULT_SETTINGS.chip,
    evaluator: EVALUATORS.includes(evaluator as Evaluator) ? (evaluator as Evaluator) : DEFAULT_SETTINGS.evaluator,
    compilerCheck: COMPILER_CHECKS.includes(get("compilerCheck") as CompilerCheck)
      ? (get("compilerCheck") as CompilerCheck)
      : DEFAULT_SETTINGS.compilerCheck,
    executor: executor !== null && EXECUTOR_PATTERN.test(executor) ? executor : DEFAULT_SETTINGS.executor,
    storePath: path("storePath"),
    maxConcurrentTunings: integer(get("maxConcurrentTunings"), 1, 64) ?? DEFAULT_SETTINGS.maxConcurrentTunings,
    compileOnChange: typeof get("compileOnChange") === "boolean" ? (get("compileOnChange") as boolean) : DEFAULT_SETTINGS.compileOnChange,
    debounceMs: integer(get("debounceMs"), 0, 60_000) ?? DEFAULT_SETTINGS.debounceMs,
    libtpu: typeof get("libtpu") === "boolean" ? (get("libtpu") as boolean) : DEFAULT_SETTINGS.libtpu,
    tuneBudgetSeconds:
      typeof budget === "number" && Number.isFinite(budget) && budget > 0 && budget <= 86_400 ? budget : DEFAULT_SETTINGS.tuneBudgetSeconds,
    tuneMaxEvals: integer(get("tuneMaxEvals"), 1, 10_000_000),
    allowCodeExecution: typeof get("allowCodeExecution") === "boolean" ? (get("allowCodeExecution") as boolean) : null,
    interpreter: path("interpreter"),
  };
}

/**
 * The server's initializationOptions: the settings, plus what this client tells the server about itself.
 * `clientShowsTuningProgress`: tuning.ts shows a cancellable notification per run from helion/tuningState,
 * so the server should not add a $/progress of its own. `workspaceTrusted`: VS Code's workspace trust (false
 * in Restricted Mode), which decides whether the server may run kernel code (tuning); a later grant is sent
 * as helion/didChangeWorkspaceTrust. `clientShowsApplyNotice`: applyNotice.ts shows the server's "applied,
 * not saved yet" notice (helion/applied) with a Save button.
 */
export function initializationOptions(
  settings: HelionSettings,
  workspaceTrusted: boolean,
): HelionSettings & { clientShowsTuningProgress: true; clientShowsApplyNotice: true; workspaceTrusted: boolean } {
  return { ...settings, clientShowsTuningProgress: true, clientShowsApplyNotice: true, workspaceTrusted };
}

/** The levels a setting can be written at, narrowest first. */
export type SettingTarget = "workspaceFolder" | "workspace" | "global";

/** What `WorkspaceConfiguration.inspect` reports about one key (only the parts the choice needs). */
export interface SettingInspection {
  workspaceFolderValue?: unknown;
  workspaceValue?: unknown;
}

/**
 * Where a changed setting should be written so that it takes effect for the resource: the narrowest level
 * that already sets it (else a folder value would keep overriding the write), otherwise the workspace when
 * one is open, otherwise the user settings.
 */
export function settingTarget(inspection: SettingInspection | undefined, hasWorkspace: boolean): SettingTarget {
  if (inspection?.workspaceFolderValue !== undefined) return "workspaceFolder";
  if (inspection?.workspaceValue !== undefined) return "workspace";
  return hasWorkspace ? "workspace" : "global";
}
