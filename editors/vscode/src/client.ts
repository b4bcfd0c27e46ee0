// The language client: starts `pi-lsp serve`, sends settings, turns the server's
// notifications into vscode events and wraps workspace/executeCommand in a typed call.
import type { ChildProcess } from "node:child_process";
import * as vscode from "vscode";
import {
  CloseAction,
  DidChangeConfigurationNotification,
  ErrorHandler,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  MessageTransports,
  MessageType,
  ServerOptions,
  ShowMessageNotification,
  State,
  StaticFeature,
} from "vscode-languageclient/node";
import {
  APPROVE_TOOL,
  ApprovalDecision,
  ApproveToolParams,
  ArgsOf,
  CommandName,
  DIAGNOSTICS,
  DiagnosticsParams,
  DiagnosticsResult,
  JOB_DONE,
  JobDone,
  ResultOf,
  SESSION_CHANGED,
  SESSIONS_CHANGED,
  SessionChanged,
  TURN,
  TurnNotification,
} from "./protocol";
import { LAUNCH_KEYS, SECTION, SERVER_KEYS, getter, serverLaunch, serverSettings } from "./settings";
import { isTrusted, launchesFromWorkspace, restrictedReason, trustDecision } from "./trust";
import { plain } from "./plainText";

/** Session files are the server's own business: it reads them from disk, never from here. */
export function syncsDocument(uri: vscode.Uri): boolean {
  return uri.scheme === "file" && !uri.path.endsWith(".jsonl");
}

/** Tells the server this client answers `pi/approveTool` and `pi/diagnostics`. */
export const piCapabilities: StaticFeature = {
  fillClientCapabilities(capabilities) {
    capabilities.experimental = { ...(capabilities.experimental as object | undefined), piLsp: { approveTool: true, diagnostics: true } };
  },
  initialize() {},
  getState: () => ({ kind: "static" }),
  clear() {},
};

/** A server that stops before it is ready is not started again (it would only stop again), and
 *  its start fails with what went wrong instead of the library's generic messages. */
class PiLanguageClient extends LanguageClient {
  /** Set when the server's connection closed before it was ready. */
  closedEarly = false;
  /** Set when the library will not start this server again (it crashed too often, or its own
   *  restart stopped before it was ready): only Restart Server starts one. */
  givenUp = false;
  /** How the last server process ended ("exited with code 1"), once it and its pipes closed. */
  exited: Promise<string> = Promise.resolve("stopped");

  protected override async createMessageTransports(encoding: string): Promise<MessageTransports> {
    const transports = await super.createMessageTransports(encoding);
    // The library keeps the process private; its exit cannot have come yet (this is the tick it
    // was spawned in), and `close` comes once its stderr was read to the end.
    const server = (this as unknown as { _serverProcess?: ChildProcess })._serverProcess;
    if (server) {
      this.exited = new Promise((resolve) => server.once("close", (code, signal) =>
        resolve(signal ? `was killed by ${signal}` : `exited with code ${code}`)));
    }
    return transports;
  }

  /** The library's own "couldn't create connection" is left to the output: the start's
   *  caller says why. */
  override error(message: string, data?: unknown, showNotification: boolean | "force" = true): void {
    super.error(message, data, this.closedEarly ? false : showNotification);
  }

  /** The library stops a client whose start failed without awaiting it, and that stop rejects
   *  (the client is not running): an unhandled rejection at every failed start. */
  override async stop(timeout?: number): Promise<void> {
    try {
      await super.stop(timeout);
    } catch (error) {
      if (this.isRunning()) throw error;
    }
  }
}

/** The output channel the client writes to, keeping the end of the server's stderr: the
 *  client passes that on with `append`, its own lines come through `appendLine`. */
function keepingStderr(channel: vscode.OutputChannel):
  { channel: vscode.OutputChannel; lastLine: () => string | undefined; forget: () => void } {
  let tail = "";
  const wrapped: vscode.OutputChannel = Object.create(channel);
  wrapped.append = (value: string) => {
    tail = (tail + value).slice(-4096);
    channel.append(value);
  };
  return {
    channel: wrapped,
    lastLine: () => tail.split("\n").map((line) => line.trim()).filter(Boolean).at(-1),
    forget: () => (tail = ""),
  };
}

export interface PiClientOptions {
  /** The Anthropic key kept in SecretStorage (never in settings.json). */
  apiKey: () => Thenable<string | undefined>;
  outputChannel?: vscode.OutputChannel;
}

export class PiClient implements vscode.Disposable {
  private readonly sessionsChangedEmitter = new vscode.EventEmitter<void>();
  private readonly sessionChangedEmitter = new vscode.EventEmitter<SessionChanged>();
  private readonly turnEmitter = new vscode.EventEmitter<TurnNotification>();
  private readonly jobDoneEmitter = new vscode.EventEmitter<JobDone>();
  private readonly startedEmitter = new vscode.EventEmitter<void>();
  private readonly stoppedEmitter = new vscode.EventEmitter<void>();
  readonly onSessionsChanged = this.sessionsChangedEmitter.event;
  readonly onSessionChanged = this.sessionChangedEmitter.event;
  readonly onTurn = this.turnEmitter.event;
  readonly onJobDone = this.jobDoneEmitter.event;
  /** Fired after every (re)start, ours or the client's own after a crash, so views can reload:
   *  the new server knows no turn, question or job of the old one. */
  readonly onStarted = this.startedEmitter.event;
  /** Fired when the client gives up on a server that stopped: as at a restart, what it had under
   *  way is over, and views show that nothing answers until Restart Server. */
  readonly onStopped = this.stoppedEmitter.event;

  /** Answers `pi/approveTool` (no handler: every call is denied); `token` is cancelled when the
   *  server withdraws the question. */
  approveToolHandler: ((params: ApproveToolParams, token: vscode.CancellationToken) => Promise<{ decision: ApprovalDecision }>) | undefined;
  /** Answers `pi/diagnostics`. */
  diagnosticsHandler: ((params: DiagnosticsParams) => Promise<DiagnosticsResult>) | undefined;

  private client: PiLanguageClient | undefined;
  private starting: Promise<void> | undefined;
  private closed = false;
  private readonly disposables: vscode.Disposable[] = [];
  readonly outputChannel: vscode.OutputChannel;

  constructor(private readonly options: PiClientOptions) {
    this.outputChannel = options.outputChannel ?? vscode.window.createOutputChannel("pi-lsp");
    this.disposables.push(
      vscode.workspace.onDidChangeConfiguration((e) => this.configurationChanged(e)),
      this.sessionsChangedEmitter, this.sessionChangedEmitter, this.turnEmitter, this.jobDoneEmitter,
      this.startedEmitter, this.stoppedEmitter,
    );
  }

  get languageClient(): LanguageClient | undefined {
    return this.client;
  }

  /** Starts the server once; later callers wait for the same start. */
  start(): Promise<void> {
    if (this.closed) return Promise.reject(new Error("the pi-lsp server was stopped with the extension"));
    this.starting ??= this.launch().catch((error: unknown) => {
      this.starting = undefined; // a later call may try again (e.g. after fixing the setting)
      throw error;
    });
    return this.starting;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async stop(): Promise<void> {
    const starting = this.starting;
    this.starting = undefined;
    await starting?.catch(() => undefined); // a start under way ends first, so its server is stopped too
    const client = this.client;
    this.client = undefined;
    if (client?.isRunning()) await client.stop();
  }

  /** Stops the server for good (deactivation): a later call, from a timer or a view, fails
   *  instead of starting a server that nobody would stop. */
  async close(): Promise<void> {
    this.closed = true;
    await this.stop();
  }

  /** One `workspace/executeCommand` with its one object argument (DESIGN.md). */
  async call<K extends CommandName>(command: K, args: ArgsOf<K>): Promise<ResultOf<K>> {
    const refused = restrictedReason(command, args);
    if (refused) throw new Error(refused);
    await this.start();
    const client = this.client;
    if (!client) throw new Error("the pi-lsp server is not running");
    // The library's own words would be "Client is not running", naming neither what nor what to do.
    if (client.givenUp) throw new Error("the pi-lsp server stopped and was not started again (see its output); run pi: Restart Server");
    return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [args] })) as ResultOf<K>;
  }

  /** Sends the server settings again (after a setting or the API key changed); a server that
   *  went away meanwhile is given them when it starts again. */
  async sendSettings(): Promise<void> {
    const client = this.client;
    if (!client?.isRunning()) return;
    const settings = serverSettings(getter(), await this.options.apiKey(), trustDecision());
    try {
      await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: settings } });
    } catch (error) {
      if (client.isRunning()) throw error;
    }
  }

  /** Sends the settings again for a change (a setting, the API key): nobody waits on it, so a
   *  running server that could not be sent them is said here, not left an unhandled rejection. */
  settingsChanged(): void {
    void this.sendSettings().catch((error: unknown) => {
      void vscode.window.showErrorMessage(plain(`pi-lsp: the changed settings did not reach the server: ${error instanceof Error ? error.message : String(error)}`));
    });
  }

  dispose(): void {
    void this.close();
    for (const d of this.disposables) d.dispose();
  }

  private async launch(): Promise<void> {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    // Without a folder the server would take its working directory (below: ours) as the workspace.
    if (!folder) throw new Error("no folder is open; pi-lsp works on a workspace folder's sessions");
    const get = getter();
    if (!isTrusted() && launchesFromWorkspace(LAUNCH_KEYS.map((key) => get(key)))) {
      throw new Error("the server command points into the workspace (${workspaceFolder}), whose " +
        "programs are not run in Restricted Mode; trust the workspace or change piLsp.command / piLsp.pythonPath");
    }
    const launch = serverLaunch(get, folder);
    const stderr = keepingStderr(this.outputChannel);
    let ready = false;
    let started = false; // the first start is over: any later one is the library's restart
    const stoppedEarly = async () => {
      const said = stderr.lastLine();
      return `\`${[launch.command, ...launch.args].join(" ")}\` ${await client.exited} before it was ready` +
        (said ? `: ${said}` : " and wrote nothing on stderr");
    };
    // A server that stops before it is ready would only stop again: the library restarted it
    // four times, each with three error messages naming neither the command nor the cause.
    const errorHandler: ErrorHandler = {
      error: (error, message, count) => defaults.error(error, message, count),
      closed: async () => {
        if (ready) {
          const result = await defaults.closed(); // restarted unless it crashed too often
          client.givenUp = result.action === CloseAction.DoNotRestart;
          return result;
        }
        client.closedEarly = true;
        client.givenUp = started;
        // The library's own restart after a crash: no caller of ours waits to say it.
        if (started) {
          void stoppedEarly().then((why) =>
            vscode.window.showErrorMessage(plain(`pi-lsp: the server stopped and did not start again: ${why}`)));
        }
        // After the failed initialize has failed the start (all of it microtasks): answered
        // first, the library would resolve that start and leave its promise rejected unhandled.
        await new Promise((resolve) => setImmediate(resolve));
        return { action: CloseAction.DoNotRestart, handled: true };
      },
    };
    const serverOptions: ServerOptions = {
      command: launch.command,
      args: launch.args,
      // No `transport`: TransportKind.stdio would append `--stdio`, which `pi-lsp serve`
      // rejects. Without one the client still talks over the process's stdin/stdout.
      // Our own folder (always there), never the workspace: `python -m` and a relative PATH
      // entry would otherwise run the repository's files. The server gets the folder by LSP.
      options: { cwd: __dirname, env: process.env },
    };
    const clientOptions: LanguageClientOptions = {
      // Open files are synced so the agent reads unsaved text and edits through applyEdit;
      // session files are not: the server watches them itself, and they may be huge.
      documentSelector: [{ scheme: "file" }],
      middleware: {
        didOpen: (doc, next) => (syncsDocument(doc.uri) ? next(doc) : Promise.resolve()),
        didChange: (e, next) => (syncsDocument(e.document.uri) ? next(e) : Promise.resolve()),
        didClose: (doc, next) => (syncsDocument(doc.uri) ? next(doc) : Promise.resolve()),
      },
      outputChannel: stderr.channel,
      errorHandler,
      // Said once, by the start's caller (below), not as two more raw errors.
      initializationFailedHandler: () => false,
      initializationOptions: serverSettings(get, await this.options.apiKey(), trustDecision()),
    };
    const client = new PiLanguageClient("piLsp", "pi-lsp", serverOptions, clientOptions);
    const defaults = client.createDefaultErrorHandler();
    client.registerFeature(piCapabilities);
    client.onRequest(APPROVE_TOOL, (params: ApproveToolParams, token) =>
      this.approveToolHandler?.(params, token) ?? { decision: "deny" as ApprovalDecision });
    client.onRequest(DIAGNOSTICS, (params: DiagnosticsParams) =>
      this.diagnosticsHandler?.(params) ?? { diagnostics: [] });
    // In place of the client's own handler: the server quotes paths (session files, folders),
    // which a notification would render as markdown links that run commands.
    client.onNotification(ShowMessageNotification.type, ({ type, message }) => {
      if (type === MessageType.Error) void vscode.window.showErrorMessage(plain(message));
      else if (type === MessageType.Warning) void vscode.window.showWarningMessage(plain(message));
      else void vscode.window.showInformationMessage(plain(message));
    });
    client.onNotification(SESSIONS_CHANGED, () => this.sessionsChangedEmitter.fire());
    client.onNotification(SESSION_CHANGED, (p: SessionChanged) => this.sessionChangedEmitter.fire(p));
    client.onNotification(TURN, (p: TurnNotification) => this.turnEmitter.fire(p));
    client.onNotification(JOB_DONE, (p: JobDone) => this.jobDoneEmitter.fire(p));
    this.client = client;
    // The client restarts a crashed server by itself: that start is announced here too.
    client.onDidChangeState((e) => {
      if (e.newState === State.Starting) stderr.forget();
      ready = e.newState === State.Running || (ready && e.newState !== State.Starting);
      if (started && e.newState === State.Running && this.client === client) this.startedEmitter.fire();
      if (client.givenUp && e.newState === State.Stopped && this.client === client) this.stoppedEmitter.fire();
    });
    try {
      await client.start();
    } catch (error) {
      if (!client.closedEarly) throw error;
      throw new Error(await stoppedEarly());
    }
    started = true;
    this.startedEmitter.fire();
  }

  private configurationChanged(e: vscode.ConfigurationChangeEvent): void {
    if (!this.client) return;
    if (LAUNCH_KEYS.some((k) => e.affectsConfiguration(`${SECTION}.${k}`))) {
      void this.restart().catch((error: unknown) => {
        void vscode.window.showErrorMessage(plain(`pi-lsp: the server did not restart: ${String(error)}`));
      });
    } else if (SERVER_KEYS.some((k) => e.affectsConfiguration(`${SECTION}.${k}`))) {
      this.settingsChanged();
    }
  }
}
