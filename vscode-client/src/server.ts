/**
 * The language server's life: choose the interpreter, check it can run helion_ls, start `<python> -m helion_ls`
 * over stdio through vscode-languageclient, restart it, and say clearly why it could not start. Also the one
 * door through which the rest of the extension talks to the server (requests, commands, notifications).
 */
import { execFile } from "node:child_process";
import * as os from "node:os";
import * as readline from "node:readline";
import type { Readable } from "node:stream";
import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  State,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";
import {
  chooseInterpreter,
  judgeProbe,
  PROBE_SCRIPT,
  SAFE_PYTHON_ENV,
  SERVER_ARGS,
  type InterpreterChoice,
  type ProbeOutcome,
} from "./interpreter";
import { pythonExtensionInterpreter } from "./pythonEnv";
import type { MachineInfo } from "./machine";
import { initializationOptions, readSettings, SETTING_KEYS, type HelionSettings } from "./settings";
import type { TuningStateParams } from "./tuningModel";

/** helion/applied: the server applied a config to `uri`'s buffer; `message` says so and asks for a save. */
export interface AppliedParams {
  uri: string;
  message: string;
}

export type ServerStatus =
  | { state: "stopped" }
  | { state: "starting"; interpreter?: string }
  | { state: "running"; interpreter: string; version: string }
  | { state: "failed"; message: string };

const SELECT_INTERPRETER = "Select Interpreter";
const SHOW_OUTPUT = "Show Output";
const RESTART = "Restart Server";
const CRASH_WINDOW_MS = 3 * 60 * 1000;
const MAX_CRASHES = 3;
const STDERR_TAIL = 20;

/** The folder a resource belongs to, else the first folder of the workspace. */
export function folderFor(resource: vscode.Uri | undefined): vscode.WorkspaceFolder | undefined {
  return (resource && vscode.workspace.getWorkspaceFolder(resource)) ?? vscode.workspace.workspaceFolders?.[0];
}

/** The effective "helion" settings for a resource (its folder's, in a multi-root workspace). */
export function settingsFor(resource: vscode.Uri | undefined): HelionSettings {
  const config = vscode.workspace.getConfiguration("helion", resource);
  const raw = Object.fromEntries(SETTING_KEYS.map((key) => [key, config.get(key)]));
  return readSettings(raw, { home: os.homedir(), workspaceFolder: folderFor(resource)?.uri.fsPath });
}

function probe(command: string, cwd: string | undefined): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    const env = { ...process.env, ...SAFE_PYTHON_ENV };
    execFile(command, ["-c", PROBE_SCRIPT], { cwd, env, timeout: 30_000, windowsHide: true }, (error, stdout, stderr) => {
      const code = (error as NodeJS.ErrnoException | null)?.code;
      if (typeof code === "string" && !/^\d+$/.test(code)) {
        resolve({ spawnError: code, stdout, stderr });
        return;
      }
      resolve({ exitCode: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

export class HelionServer implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private status: ServerStatus = { state: "stopped" };
  private pending: Promise<void> = Promise.resolve();
  private crashes: number[] = [];
  /** The server's last stderr lines, quoted when it dies during start-up. */
  private stderrTail: string[] = [];
  /** Tells the running server when the user trusts the workspace (tuning may then run kernel code). */
  private trustGrant: vscode.Disposable | undefined;
  /** The current client reached Running once: only then is a closed connection a crash worth restarting. */
  private everRunning = false;
  private readonly statusEmitter = new vscode.EventEmitter<ServerStatus>();
  private readonly tuningEmitter = new vscode.EventEmitter<TuningStateParams>();
  private readonly appliedEmitter = new vscode.EventEmitter<AppliedParams>();
  private readonly startedEmitter = new vscode.EventEmitter<void>();
  private readonly machineEmitter = new vscode.EventEmitter<MachineInfo>();
  /** The server machine's TPU (helion/machine), once the server said. */
  machine: MachineInfo | undefined;

  /** Fires on every change of `currentStatus`. */
  readonly onDidChangeStatus = this.statusEmitter.event;
  /** The server's helion/tuningState notifications. */
  readonly onTuningState = this.tuningEmitter.event;
  /** The server's helion/applied notifications: a config was applied to a file's buffer, not saved yet. */
  readonly onApplied = this.appliedEmitter.event;
  /** The server said what TPU its machine has (what `helion.chip: auto` means). */
  readonly onDidChangeMachine = this.machineEmitter.event;
  /** A (re)started server is ready: views showing server data should refresh. */
  readonly onDidStart = this.startedEmitter.event;

  constructor(readonly output: vscode.LogOutputChannel) {}

  get currentStatus(): ServerStatus {
    return this.status;
  }

  /** Starts the server unless it runs; calls queue behind any start or stop in progress. */
  start(): Promise<void> {
    this.pending = this.pending.then(() => this.doStart());
    return this.pending;
  }

  restart(): Promise<void> {
    this.pending = this.pending.then(async () => {
      this.crashes = [];
      await this.doStop();
      await this.doStart();
    });
    return this.pending;
  }

  stop(): Promise<void> {
    this.pending = this.pending.then(() => this.doStop());
    return this.pending;
  }

  /** Sends a request; waits for a start in progress, and fails with a readable error when no server runs. */
  async request<R>(method: string, params: unknown, token?: vscode.CancellationToken): Promise<R> {
    await this.pending;
    const client = this.client;
    if (client === undefined || this.status.state !== "running") {
      throw new Error(this.status.state === "failed" ? this.status.message : "The Helion language server is not running.");
    }
    // An undefined token would go out as a second positional parameter: pass it only when there is one.
    return token === undefined ? client.sendRequest<R>(method, params) : client.sendRequest<R>(method, params, token);
  }

  /** Runs one of the server's workspace commands with the contract's single argument object. */
  executeCommand<R = unknown>(command: string, argument: object): Promise<R> {
    return this.request<R>(ExecuteCommandRequest.method, { command, arguments: [argument] });
  }

  /** Shows why the server is not running, with the actions that fix it. */
  async showFailure(message: string): Promise<void> {
    const choice = await vscode.window.showErrorMessage(message, SELECT_INTERPRETER, SHOW_OUTPUT, RESTART);
    if (choice === SELECT_INTERPRETER) await vscode.commands.executeCommand("helion-ls.selectInterpreter");
    else if (choice === SHOW_OUTPUT) this.output.show(true);
    else if (choice === RESTART) await this.restart();
  }

  dispose(): void {
    void this.stop();
    this.trustGrant?.dispose();
    this.statusEmitter.dispose();
    this.tuningEmitter.dispose();
    this.appliedEmitter.dispose();
    this.startedEmitter.dispose();
  }

  private setStatus(status: ServerStatus): void {
    this.status = status;
    this.statusEmitter.fire(status);
  }

  private fail(message: string): void {
    this.output.error(message);
    this.setStatus({ state: "failed", message });
    void this.showFailure(message);
  }

  private async chooseInterpreter(): Promise<InterpreterChoice> {
    const folder = folderFor(vscode.window.activeTextEditor?.document.uri);
    const setting = settingsFor(folder?.uri).interpreter;
    const fromExtension = setting === null ? await pythonExtensionInterpreter(folder?.uri) : undefined;
    const untrustedFolders = vscode.workspace.isTrusted ? [] : (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    return chooseInterpreter({ setting, pythonExtension: fromExtension, platform: process.platform, untrustedFolders });
  }

  private async doStart(): Promise<void> {
    if (this.client !== undefined) return;
    this.setStatus({ state: "starting" });
    const choice = await this.chooseInterpreter();
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    this.output.info(`Checking the interpreter ${choice.command} (${choice.source})`);
    const verdict = judgeProbe(choice, await probe(choice.command, cwd));
    if (!verdict.ok) {
      this.fail(verdict.message);
      return;
    }
    this.setStatus({ state: "starting", interpreter: verdict.executable });
    this.output.info(`Starting ${choice.command} ${SERVER_ARGS.join(" ")} (Python ${verdict.version} at ${verdict.executable})`);
    const client = new LanguageClient("helion", "Helion", this.serverOptions(choice, cwd), this.clientOptions());
    client.onNotification("helion/tuningState", (params: TuningStateParams) => this.tuningEmitter.fire(params));
    client.onNotification("helion/applied", (params: AppliedParams) => this.appliedEmitter.fire(params));
    client.onNotification("helion/machine", (params: MachineInfo) => {
      this.machine = params;
      this.machineEmitter.fire(params);
    });
    client.onDidChangeState((event) => {
      if (event.newState === State.Stopped && this.client === client && this.status.state === "running") {
        this.setStatus({ state: "stopped" });
      } else if (event.newState === State.Running && this.client === client && this.everRunning && this.status.state !== "running") {
        this.setStatus({ state: "running", interpreter: verdict.executable, version: verdict.version });
        this.startedEmitter.fire();
      }
    });
    this.client = client;
    this.trustGrant?.dispose();
    this.trustGrant = vscode.workspace.onDidGrantWorkspaceTrust(() => {
      if (this.client === client && client.isRunning()) void client.sendNotification("helion/didChangeWorkspaceTrust", { trusted: true });
    });
    this.everRunning = false;
    this.stderrTail = [];
    try {
      await client.start();
    } catch (error) {
      this.client = undefined;
      await client.dispose().catch(() => undefined);
      const said = this.stderrTail.filter((line) => line.trim()).pop();
      const why = said ? `it said: ${said}` : `${error instanceof Error ? error.message : String(error)}`;
      this.fail(`The Helion language server (${choice.command} ${SERVER_ARGS.join(" ")}) did not start; ${why}. See the output for its log.`);
      return;
    }
    this.everRunning = true;
    this.setStatus({ state: "running", interpreter: verdict.executable, version: verdict.version });
    this.startedEmitter.fire();
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client !== undefined) {
      try {
        if (client.isRunning()) await client.stop(5_000);
      } catch (error) {
        this.output.warn(`Stopping the server: ${String(error)}`);
      }
      await client.dispose().catch(() => undefined);
    }
    this.setStatus({ state: "stopped" });
  }

  private serverOptions(choice: InterpreterChoice, cwd: string | undefined): ServerOptions {
    return { command: choice.command, args: [...SERVER_ARGS], options: { cwd, env: { ...process.env, ...SAFE_PYTHON_ENV } } };
  }

  private forwardLines(input: Readable, write: (line: string) => void): void {
    readline.createInterface({ input, crlfDelay: Infinity, terminal: false }).on("line", write);
  }

  private clientOptions(): LanguageClientOptions {
    const initial = vscode.workspace.workspaceFolders?.[0]?.uri;
    return {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "untitled", language: "python" },
        // A Jupyter notebook's Python cells: the server gets the notebook (notebookDocument/* sync, which its
        // capabilities ask for) and answers hovers, lenses and code actions on each cell's own URI.
        { notebook: "jupyter-notebook", language: "python" },
      ],
      outputChannel: this.output,
      // The server's hovers link to "Open the full generated module" and "Measure on TPU …"; only those
      // commands may run from markdown.
      markdown: { isTrusted: { enabledCommands: ["helion-ls.showGeneratedCode", "helion-ls.measureOnChip"] } },
      stdioOptions: {
        stdout: (input, channel) => this.forwardLines(input, (line) => channel.info(line)),
        stderr: (input, channel) =>
          this.forwardLines(input, (line) => {
            channel.info(line);
            this.stderrTail = [...this.stderrTail.slice(1 - STDERR_TAIL), line];
          }),
      },
      initializationOptions: initializationOptions(settingsFor(initial), vscode.workspace.isTrusted),
      synchronize: { configurationSection: "helion" },
      middleware: {
        workspace: {
          // The server pulls "helion" per folder; hand it validated, path-expanded values.
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            if (!Array.isArray(result)) return result;
            return result.map((value, i) => {
              const item = params.items[i];
              if (item?.section !== "helion") return value;
              return settingsFor(item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined);
            });
          },
        },
      },
      errorHandler: {
        error: (_error, _message, count) => ({ action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown }),
        closed: () => {
          // A server that never got going is reported by start(); restarting it would only repeat the failure.
          if (!this.everRunning) return { action: CloseAction.DoNotRestart, handled: true };
          const now = Date.now();
          this.crashes = [...this.crashes.filter((t) => now - t < CRASH_WINDOW_MS), now];
          if (this.crashes.length <= MAX_CRASHES) {
            this.output.warn(`The server exited; restarting (${this.crashes.length} of ${MAX_CRASHES}).`);
            return { action: CloseAction.Restart, handled: true };
          }
          const message = `The Helion language server exited ${this.crashes.length} times in 3 minutes and was not restarted. See the output for its log.`;
          this.fail(message);
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
    };
  }
}
