/**
 * Which Python runs the language server, and how to tell a user why it could not start. Pure: the VS Code
 * and Python-extension calls live in pythonEnv.ts and server.ts; this module only decides.
 */

export type InterpreterSource = "setting" | "python-extension" | "default";

export interface InterpreterChoice {
  command: string;
  source: InterpreterSource;
}

export interface InterpreterInputs {
  /** `helion.interpreter`, already path-expanded (null or empty: not set). */
  setting: string | null | undefined;
  /** The Python extension's active interpreter for the workspace, when that extension is installed. */
  pythonExtension: string | null | undefined;
  platform: string;
  /** In an untrusted workspace, its folders: an interpreter inside one of them (a .venv) is never started. */
  untrustedFolders?: readonly string[];
}

function inside(path: string, folder: string): boolean {
  const base = folder.replace(/[\\/]+$/, "");
  return path === base || path.startsWith(`${base}/`) || path.startsWith(`${base}\\`);
}

/**
 * The setting wins, then the Python extension's interpreter, then the platform's usual command on PATH. In
 * an untrusted workspace the setting can only come from the user's own settings (helion.interpreter is a
 * restricted configuration), and the Python extension's choice is skipped when it lives in the workspace.
 */
export function chooseInterpreter(inputs: InterpreterInputs): InterpreterChoice {
  const setting = inputs.setting?.trim();
  if (setting) return { command: setting, source: "setting" };
  const fromExtension = inputs.pythonExtension?.trim();
  const untrusted = inputs.untrustedFolders ?? [];
  if (fromExtension && !untrusted.some((folder) => inside(fromExtension, folder))) {
    return { command: fromExtension, source: "python-extension" };
  }
  return { command: inputs.platform === "win32" ? "python" : "python3", source: "default" };
}

/** Arguments that start the server over stdio. */
export const SERVER_ARGS: readonly string[] = ["-m", "helion_ls"];

/**
 * Environment for every Python this extension starts: PYTHONSAFEPATH keeps the working directory (the
 * workspace) off sys.path, so a file in the workspace can never stand in for a module the server imports.
 */
export const SAFE_PYTHON_ENV: Readonly<Record<string, string>> = { PYTHONSAFEPATH: "1", PYTHONUNBUFFERED: "1" };

/** The smallest Python the server supports (the project's requires-python). */
export const MIN_PYTHON: readonly [number, number] = [3, 11];

/**
 * A one-line Python program run before the server: it reports the version and whether `helion_ls` can be
 * found without importing it (importing pulls in jax and takes seconds).
 */
export const PROBE_SCRIPT =
  "import importlib.util, json, sys; print(json.dumps({'version': list(sys.version_info[:3]), " +
  "'executable': sys.executable, 'helion_ls': importlib.util.find_spec('helion_ls') is not None}))";

/** What running PROBE_SCRIPT produced. */
export interface ProbeOutcome {
  /** Node's spawn error code (ENOENT: no such program, EACCES: not executable), when it did not run. */
  spawnError?: string;
  exitCode?: number | null;
  stdout?: string;
  stderr?: string;
}

export type ProbeVerdict =
  | { ok: true; executable: string; version: string }
  | { ok: false; reason: "not-found" | "not-python" | "too-old" | "missing-server"; message: string };

function sourceText(choice: InterpreterChoice): string {
  switch (choice.source) {
    case "setting":
      return "set by helion.interpreter";
    case "python-extension":
      return "the Python extension's interpreter";
    case "default":
      return "found on PATH, as no interpreter is set";
  }
}

/** Turns the probe's outcome into either a go-ahead or a message that says what to change. */
export function judgeProbe(choice: InterpreterChoice, outcome: ProbeOutcome): ProbeVerdict {
  const where = `"${choice.command}" (${sourceText(choice)})`;
  if (outcome.spawnError !== undefined) {
    const why = outcome.spawnError === "ENOENT" ? "was not found" : `could not be run (${outcome.spawnError})`;
    return { ok: false, reason: "not-found", message: `The Python interpreter ${where} ${why}.` };
  }
  let report: { version?: unknown; executable?: unknown; helion_ls?: unknown } | undefined;
  try {
    const lastLine = (outcome.stdout ?? "").trim().split(/\r?\n/).pop() ?? "";
    report = JSON.parse(lastLine);
  } catch {
    report = undefined;
  }
  if (outcome.exitCode !== 0 || report === undefined || !Array.isArray(report.version)) {
    const detail = (outcome.stderr ?? "").trim().split(/\r?\n/).pop();
    return {
      ok: false,
      reason: "not-python",
      message: `${where} did not run as a Python interpreter${detail ? `: ${detail}` : ""}.`,
    };
  }
  const version = report.version.map(Number);
  const versionText = version.join(".");
  const executable = typeof report.executable === "string" && report.executable ? report.executable : choice.command;
  const [major, minor] = version;
  if (major < MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor < MIN_PYTHON[1])) {
    return {
      ok: false,
      reason: "too-old",
      message: `${where} is Python ${versionText}; the Helion language server needs Python ${MIN_PYTHON.join(".")} or newer.`,
    };
  }
  if (report.helion_ls !== true) {
    return {
      ok: false,
      reason: "missing-server",
      message: `The helion_ls package is not installed for ${where}, Python ${versionText} at ${executable}. Install it there (pip install -e <helion-ls checkout>) or select another interpreter.`,
    };
  }
  return { ok: true, executable, version: versionText };
}
