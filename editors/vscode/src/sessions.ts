// Which session a command acts on. DESIGN.md's order: the session named in the argument,
// the session file in the active editor, the session last used, the newest session of the
// workspace, and only then ask.
import * as vscode from "vscode";
import type { PiClient } from "./client";
import { SessionInfo, SessionMove } from "./protocol";
import { parseContextUri, SCHEME } from "./contextProvider";
import { oneLine, plain } from "./plainText";

const LAST_USED = "piLsp.lastSession";

/** A stable key for a session URI: the server and VS Code may percent-encode differently. */
export function sessionKey(uri: string): string {
  try {
    return vscode.Uri.parse(uri).fsPath;
  } catch {
    return uri;
  }
}

export function sameSession(a: string | undefined, b: string | undefined): boolean {
  return a !== undefined && b !== undefined && sessionKey(a) === sessionKey(b);
}

/** The session a command argument names: a URI string, a vscode.Uri, `{uri}` or a tree item. */
export function sessionOfArgument(arg: unknown): string | undefined {
  if (typeof arg === "string") return arg.startsWith("file:") ? arg : undefined;
  if (arg instanceof vscode.Uri) return sessionOfDocument(arg);
  if (arg && typeof arg === "object") {
    const o = arg as { sessionUri?: unknown; uri?: unknown };
    if (typeof o.sessionUri === "string") return o.sessionUri;
    if (typeof o.uri === "string") return o.uri;
    if (o.uri instanceof vscode.Uri) return sessionOfDocument(o.uri);
  }
  return undefined;
}

/** An entry a command argument names: a tree item, or `{entryId}` / `{targetId}`. */
export function entryOfArgument(arg: unknown): string | undefined {
  if (arg && typeof arg === "object") {
    const o = arg as { entryId?: unknown; targetId?: unknown };
    if (typeof o.entryId === "string") return o.entryId;
    if (typeof o.targetId === "string") return o.targetId;
  }
  return undefined;
}

/** A document that stands for a session: its JSONL file, or a context preview of it. */
export function sessionOfDocument(uri: vscode.Uri): string | undefined {
  if (uri.scheme === SCHEME) return parseContextUri(uri).session;
  if (uri.scheme === "file" && uri.path.endsWith(".jsonl")) return uri.toString();
  return undefined;
}

export class Sessions implements vscode.Disposable {
  private readonly changedEmitter = new vscode.EventEmitter<string | undefined>();
  /** Fires when the session commands default to changes (last used, active editor). */
  readonly onDidChangeCurrent = this.changedEmitter.event;
  private readonly movedEmitter = new vscode.EventEmitter<SessionMove>();
  /** Fires once per move of a session to a new file: the views showing it follow it there. */
  readonly onDidMove = this.movedEmitter.event;
  private readonly moves = new Map<string, string>(); // key of a file cut short -> key of the new one
  private cache: Promise<SessionInfo[]> | undefined;
  private readonly disposables: vscode.Disposable[] = [this.changedEmitter, this.movedEmitter];

  constructor(
    private readonly pi: PiClient,
    private readonly state: vscode.Memento,
    /** The session of the chat panel in front, if one is. */
    private readonly activeChat: () => string | undefined = () => undefined,
  ) {
    this.disposables.push(
      pi.onSessionsChanged(() => (this.cache = undefined)),
      pi.onSessionChanged(() => (this.cache = undefined)), // entry counts and names change
      pi.onSessionChanged((e) => e.relocatedFrom && this.moved({ from: e.relocatedFrom, to: e.uri })),
      pi.onTurn((n) => n.event.type === "session_moved" && this.moved({ from: n.uri, to: vscode.Uri.file(n.event.path).toString() })),
      pi.onStarted(() => (this.cache = undefined)),
      pi.onStopped(() => (this.cache = undefined)),
      vscode.window.onDidChangeActiveTextEditor(() => this.refreshCurrent()),
    );
  }

  /** The workspace's sessions, newest first as the server orders them (pi's order: sorting by
   * the text of `modified` differs), cached until the server says they changed. */
  list(): Promise<SessionInfo[]> {
    const last = this.lastUsed();
    this.cache ??= this.pi.call("pi.listSessions", {}).then(
      (r) => {
        this.forgetUnlisted(last, r.sessions);
        return r.sessions;
      },
      (error: unknown) => {
        this.cache = undefined;
        throw error;
      },
    );
    return this.cache;
  }

  async info(uri: string): Promise<SessionInfo | undefined> {
    return (await this.list()).find((s) => sameSession(s.uri, uri));
  }

  lastUsed(): string | undefined {
    return this.state.get<string>(LAST_USED);
  }

  remember(uri: string): void {
    if (sameSession(uri, this.lastUsed())) return;
    void this.state.update(LAST_USED, uri);
    this.refreshCurrent();
  }

  /**
   * Another program cut a session's file short and the server went on in a new file: the last
   * used session follows, the user is told, and so are the views (`onDidMove`). Once per move,
   * from whichever report (relocatedFrom, session_moved) comes first.
   */
  private moved(move: SessionMove): void {
    const from = sessionKey(move.from), to = sessionKey(move.to);
    if (from === to || this.moves.get(from) === to) return;
    this.moves.set(from, to);
    this.cache = undefined;
    if (sameSession(this.lastUsed(), move.from)) void this.state.update(LAST_USED, move.to);
    void vscode.window.showInformationMessage(`pi: session moved to ${plain(vscode.Uri.parse(move.to).path.split("/").pop() ?? to)}`);
    this.movedEmitter.fire(move);
    this.refreshCurrent();
  }

  /** Forgets the last used session `last` once the server no longer lists it (deleted, moved):
   * unless another was used while the list was asked for. */
  private forgetUnlisted(last: string | undefined, listed: SessionInfo[]): void {
    if (last === undefined || last !== this.lastUsed() || listed.some((s) => sameSession(s.uri, last))) return;
    void this.state.update(LAST_USED, undefined);
    this.refreshCurrent();
  }

  private shownCurrent: string | undefined;

  /**
   * Tells the view and status bar, but only when the default session really changed. Called
   * when the editor or chat in front changes too.
   */
  refreshCurrent(): void {
    const now = this.current();
    if (now === this.shownCurrent || sameSession(now, this.shownCurrent)) return;
    this.shownCurrent = now;
    this.changedEmitter.fire(now);
  }

  /** The session of the active editor or chat panel, else the last used (no server call). */
  current(): string | undefined {
    return this.inFront() ?? this.lastUsed();
  }

  private inFront(): string | undefined {
    const editor = vscode.window.activeTextEditor;
    return this.activeChat() ?? (editor && sessionOfDocument(editor.document.uri));
  }

  /**
   * The session a command acts on. With `ask: false` (the status bar) nothing is asked and
   * nothing is remembered; a command remembers what it used, so the next one defaults to it.
   */
  async resolve(arg?: unknown, opts: { ask?: boolean } = {}): Promise<string | undefined> {
    const ask = opts.ask ?? true;
    let uri = sessionOfArgument(arg) ?? this.inFront();
    if (uri === undefined) {
      // Listing forgets a last used session that is gone, so it is read after the list.
      const listed = await this.list().catch(() => []);
      uri = this.lastUsed() ?? listed[0]?.uri;
    }
    if (uri === undefined && ask) uri = await this.pick("No session yet: create one?");
    if (uri !== undefined && ask) this.remember(uri);
    return uri;
  }

  /** Asks for a session (offering a new one); used when nothing else names one. */
  async pick(placeHolder = "Select a pi session"): Promise<string | undefined> {
    type Item = vscode.QuickPickItem & { uri?: string };
    const sessions = await this.list();
    const items: Item[] = sessions.map((s) => ({
      label: plain(s.title),
      description: `${s.entryCount} entries`,
      detail: plain(oneLine(`${s.modified}${s.cwd ? ` · ${s.cwd}` : ""}`)),
      uri: s.uri,
    }));
    items.push({ label: "$(add) New session…" });
    const picked = await vscode.window.showQuickPick(items, { placeHolder, matchOnDetail: true });
    if (!picked) return undefined;
    return picked.uri ?? (await this.create());
  }

  async create(name?: string): Promise<string | undefined> {
    const chosen = name ?? (await vscode.window.showInputBox({ prompt: "Name of the new session (optional)" }));
    if (chosen === undefined) return undefined;
    const { uri } = await this.pi.call("pi.newSession", chosen.trim() ? { name: chosen.trim() } : {});
    this.cache = undefined;
    this.remember(uri);
    return uri;
  }

  /** The label to show for a session: the server's title; its file name until it is listed. */
  static title(info: SessionInfo | undefined, uri: string): string {
    return info?.title ?? vscode.Uri.parse(uri).path.split("/").pop()?.replace(/\.jsonl$/, "") ?? uri;
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
