// The language client: starts `pi-lsp serve`, sends settings, turns the server's
// notifications into vscode events and wraps workspace/executeCommand in a typed call.
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
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
import { isTrusted, launchesFromWorkspace, restrictedReason } from "./trust";
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
  readonly onSessionsChanged = this.sessionsChangedEmitter.event;
  readonly onSessionChanged = this.sessionChangedEmitter.event;
  readonly onTurn = this.turnEmitter.event;
  readonly onJobDone = this.jobDoneEmitter.event;
  /** Fired after every (re)start, ours or the client's own after a crash, so views can reload:
   *  the new server knows no turn, question or job of the old one. */
  readonly onStarted = this.startedEmitter.event;

  /** Answers `pi/approveTool` (no handler: every call is denied). */
  approveToolHandler: ((params: ApproveToolParams) => Promise<{ decision: ApprovalDecision }>) | undefined;
  /** Answers `pi/diagnostics`. */
  diagnosticsHandler: ((params: DiagnosticsParams) => Promise<DiagnosticsResult>) | undefined;

  private client: LanguageClient | undefined;
  private starting: Promise<void> | undefined;
  private closed = false;
  private readonly disposables: vscode.Disposable[] = [];
  readonly outputChannel: vscode.OutputChannel;

  constructor(private readonly options: PiClientOptions) {
    this.outputChannel = options.outputChannel ?? vscode.window.createOutputChannel("pi-lsp");
    this.disposables.push(
      vscode.workspace.onDidChangeConfiguration((e) => this.configurationChanged(e)),
      this.sessionsChangedEmitter, this.sessionChangedEmitter, this.turnEmitter, this.jobDoneEmitter,
      this.startedEmitter,
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
    return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [args] })) as ResultOf<K>;
  }

  /** Sends the server settings again (after a setting or the API key changed). */
  async sendSettings(): Promise<void> {
    const client = this.client;
    if (!client?.isRunning()) return;
    const settings = serverSettings(getter(), await this.options.apiKey(), isTrusted());
    await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: settings } });
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
      outputChannel: this.outputChannel,
      initializationOptions: serverSettings(get, await this.options.apiKey(), isTrusted()),
    };
    const client = new LanguageClient("piLsp", "pi-lsp", serverOptions, clientOptions);
    client.registerFeature(piCapabilities);
    client.onRequest(APPROVE_TOOL, (params: ApproveToolParams) =>
      this.approveToolHandler?.(params) ?? { decision: "deny" as ApprovalDecision });
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
    let started = false;
    client.onDidChangeState((e) => {
      if (started && e.newState === State.Running && this.client === client) this.startedEmitter.fire();
    });
    await client.start();
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
      void this.sendSettings();
    }
  }
}
