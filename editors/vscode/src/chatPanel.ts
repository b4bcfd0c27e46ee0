// The chat panel: one webview per session. It shows the session's context (pi.previewContext)
// and folds in the running turn's pi/turn events; input goes out as pi.prompt with a delivery.
import * as vscode from "vscode";
import type { PiClient } from "./client";
import { ChatState, FromWebview, ToWebview } from "./chatMessages";
import { Block, Transcript } from "./chatModel";
import { AsyncRender, RENDER_BUDGET_MS, STREAM_MARKDOWN_MS, budgetedMarkdown, renderBlockAsync, streamingMarkdown } from "./chatRender";
import type { Attachment } from "./codeContext";
import { MarkdownWorker } from "./markdownWorker";
import { Delivery, EditMark, PreviewPage, SessionMove, ThinkingLevel, THINKING_LEVELS, TurnEvent, TurnNotification } from "./protocol";
import { modelChoices, getter } from "./settings";
import { availableModels, pickModel } from "./modelPicker";
import { sameSession, Sessions, sessionKey } from "./sessions";
import { promptWrittenSince, sentText, sessionSize } from "./sessionFile";
import { formatTokens } from "./statusBar";

/** Turns that ended whose chat their queue_dropped may still look for. */
const ENDED_KEPT = 16;
/** Messages of the context the chat shows at first, and adds with each "Show more". */
export const CHAT_PAGE = 200;
/** The least time between two draws of a streaming reply: its deltas in between are drawn together. */
const STREAM_FRAME_MS = 50;
const CONTEXT_EDITS = { remove: "piLsp.removeFromContext", replace: "piLsp.replaceInContext", undo: "piLsp.undoContextEdit" };

/** A question shown as a card in its session's chat until it is settled. */
export interface Question {
  id: string;
  uri: string;
  message: string;
  actions: string[];
  detail?: string;
  /** Shown after the answer they name (what Accept for Session covers). */
  notes?: Record<string, string>;
  answer(choice: string): void;
}

export class ChatPanels implements vscode.Disposable {
  private readonly panels = new Map<string, ChatPanel>();
  private readonly disposables: vscode.Disposable[] = [];
  /** Open questions by id: a chat opened while one is open shows it too. */
  private readonly questions = new Map<string, Question>();
  /** Sessions whose turn runs, as their events say (the server has no call that tells it): a chat
   *  opened meanwhile shows it running, and its retry wait if it waits to ask again for a reply.
   *  Under the file the session is in now: a moved turn's events go on naming the old one. */
  private readonly runs = new Map<string, Run>();
  /** Where the last turns that ended were kept (runKey): their queue_dropped comes after their
   *  end, and names the old file too when their session moved. */
  private readonly ended = new Map<string, string>();
  /** marked, for every chat: one text is parsed at a time. */
  readonly markdown = new MarkdownWorker();

  constructor(
    private readonly pi: PiClient,
    private readonly sessions: Sessions,
    private readonly extensionUri: vscode.Uri,
  ) {
    this.disposables.push(
      pi.onTurn((n) => this.turnArrived(n)),
      pi.onSessionChanged((e) => this.panels.get(sessionKey(e.uri))?.scheduleReload()),
      sessions.onDidMove((move) => this.follow(move)),
      pi.onStarted(() => this.serverEnded()),
      pi.onStopped(() => this.serverEnded()),
    );
  }

  /** The server the turns ran on is gone (restarted, or stopped for good). */
  private serverEnded(): void {
    this.runs.clear(); // their turns ended with the old server, and no agent_end will say so
    this.panels.forEach((p) => p.serverEnded());
  }

  async open(uri: string, opts: { reveal?: boolean } = {}): Promise<ChatPanel> {
    const key = sessionKey(uri);
    let panel = this.panels.get(key);
    if (!panel) {
      // Chats share a column: the first opens beside the editor, the next ones as its tabs.
      const column = this.all().map((p) => p.panel.viewColumn).find((c) => c !== undefined) ?? vscode.ViewColumn.Beside;
      const made: ChatPanel = new ChatPanel(uri, this.pi, this.sessions, this.markdown, this.extensionUri, column,
        () => this.panels.delete(sessionKey(made.uri)), (id, choice) => this.questions.get(id)?.answer(choice));
      panel = made;
      this.panels.set(key, panel);
      for (const q of this.questions.values()) if (sessionKey(q.uri) === key) panel.showQuestion(q);
      // The server loads the model's SDK now, not at the first prompt (a second or more).
      // Only time is at stake: a missing key or provider is reported by the prompt, in the chat.
      this.pi.call("pi.prepareTurn", { uri }).catch(() => undefined);
      const run = this.runs.get(key);
      if (run) panel.joinTurn(run); // shown running before its transcript is read
      await panel.reload();
    } else if (opts.reveal !== false) {
      panel.panel.reveal(panel.panel.viewColumn);
    }
    return panel;
  }

  private turnArrived(n: TurnNotification): void {
    // The file the turn's session is in now: its events go on naming the old one after a move,
    // and the chat open there now is the one that followed it, or one opened there since.
    const key = this.runKey(n);
    this.noteRun(n, key);
    this.panels.get(key)?.onTurn(n);
  }

  /** Keeps each session's running turn until it ends, with the wait its auto_retry_start began
   *  until the reply is asked again. */
  private noteRun(n: TurnNotification, key: string): void {
    const type = n.event.type;
    if (type === "agent_end" || type === "error") {
      // Under the file it moved to too (its events go on naming the old one).
      for (const [k, r] of this.runs) if (r.turnId === n.turnId) this.runs.delete(k);
      this.ended.set(n.turnId, key);
      // A turn that dropped nothing sends no queue_dropped: keep the last few only.
      for (const old of this.ended.keys()) if (this.ended.size > ENDED_KEPT) this.ended.delete(old);
      return;
    }
    if (type === "queue_dropped") return void this.ended.delete(n.turnId); // it runs nothing
    const known = this.runs.get(key);
    const run = known?.turnId === n.turnId ? known : { turnId: n.turnId };
    if (n.event.type === "auto_retry_start") run.wait = { event: n.event, until: Date.now() + n.event.delayMs };
    else if (type === "turn_start" || type === "auto_retry_end") run.wait = undefined;
    this.runs.set(key, run);
  }

  /** Where the run of `n`'s turn is kept: under the file its session moved to, if it moved. */
  private runKey(n: TurnNotification): string {
    for (const [key, run] of this.runs) if (run.turnId === n.turnId) return key;
    return this.ended.get(n.turnId) ?? sessionKey(n.uri);
  }

  /** The chat of a session that moved to a new file goes on there: its next prompt would go
   *  into the file cut short, without the turns the new file holds. */
  private follow(move: SessionMove): void {
    // Its open questions go on being shown, and settled, where the session now lives.
    for (const q of this.questions.values()) if (sameSession(q.uri, move.from)) this.questions.set(q.id, { ...q, uri: move.to });
    const run = this.runs.get(sessionKey(move.from));
    if (run) {
      // A chat opened there shows it running and waiting; one opened on the cut file, neither.
      this.runs.delete(sessionKey(move.from));
      this.runs.set(sessionKey(move.to), run);
    }
    const panel = this.panels.get(sessionKey(move.from));
    if (!panel) return;
    this.panels.delete(sessionKey(move.from));
    this.panels.set(sessionKey(move.to), panel);
    panel.moveTo(move.to);
  }

  get(uri: string): ChatPanel | undefined {
    return this.panels.get(sessionKey(uri));
  }

  all(): ChatPanel[] {
    return [...this.panels.values()];
  }

  /** The session of the chat panel in front, if one is. */
  activeSession(): string | undefined {
    return this.all().find((p) => p.panel.active)?.uri;
  }

  /** Shows a question in its session's chat, now and whenever that chat opens, until settled. */
  ask(question: Question): void {
    this.questions.set(question.id, question);
    this.get(question.uri)?.showQuestion(question);
  }

  /** The question was answered (or no longer needs one): its card goes. */
  settle(id: string): void {
    const question = this.questions.get(id);
    this.questions.delete(id);
    if (question) this.get(question.uri)?.post({ type: "approvalDone", id });
  }

  dispose(): void {
    this.panels.forEach((p) => p.panel.dispose());
    for (const d of this.disposables) d.dispose();
    this.markdown.dispose();
  }
}

export class ChatPanel {
  readonly panel: vscode.WebviewPanel;
  readonly transcript = new Transcript();
  /** Everything posted to the webview, newest last (tests read it; capped). */
  readonly posted: ToWebview[] = [];
  private ready = false;
  private readonly queue: ToWebview[] = [];
  private state: ChatState;
  private reloadTimer: ReturnType<typeof setTimeout> | undefined;
  /** Code that goes with the next prompt. */
  readonly attachments: Attachment[] = [];
  /** A prompt whose turn failed before it started: it is in no entry, so it is kept here. */
  private failed: { text: string; error: string } | undefined;
  /** A prompt sent whose turn has not started (its agent_start): an error before that gives it
   *  back. `file` and `since`: its session file and that file's size when it was sent. */
  private pending: Pending | undefined;
  /** Steers and follow-ups the server queued: the webview cleared them from its input, so an
   *  abort or error before they reach the model would lose them. */
  private readonly queued: Queued[] = [];
  /** Steers and follow-ups this chat gave back since the turn's start (at its end, or as the
   *  server answered `dropped`; before its start when the turn they were sent behind had not
   *  begun), and those sent it has not answered: queue_dropped names them too. */
  private givenBack: GivenBack[] = [];
  private readonly unanswered: string[] = [];
  /** The last messages of the context the chat shows (a long session's are many). */
  private shown = CHAT_PAGE;
  private earlier = 0; // messages before the ones shown
  /** Blocks a delta changed, drawn at the end of the frame (`frame`) or by the next other event. */
  private readonly stale = new Set<string>();
  private frame: ReturnType<typeof setTimeout> | undefined;
  /** Draws pi's retry wait each second while it is counted down (its seconds left). */
  private countdown: ReturnType<typeof setInterval> | undefined;
  /** How the streaming reply's text is drawn, while it streams. */
  private stream: { id: string; md: AsyncRender } | undefined;
  /** Draws and resets, in the order asked: each waits for marked (in a worker), and none may
   *  overtake an earlier one (a block drawn after a reset that dropped it would come back). */
  private rendering: Promise<void> = Promise.resolve();
  /** A draw is waiting its turn in `rendering`: it will draw every stale block. */
  private drawQueued = false;
  private readonly reloadedEmitter = new vscode.EventEmitter<void>();
  /** Fires after each reload from the server (tests wait on it). */
  readonly onDidReload = this.reloadedEmitter.event;

  /** The running turn's id, from its agent_start. */
  turnId: string | undefined;
  /** Turns this chat saw end: a context asked for before the last one ended may lack its entries. */
  private turnsEnded = 0;
  /** Turn events that came before the chat's first transcript was read: shown on it once it is. */
  private early: TurnNotification[] | undefined = [];
  /** The first read of the transcript: a reload asked meanwhile comes after it. */
  private firstRead: Promise<void> | undefined;

  constructor(
    public uri: string,
    private readonly pi: PiClient,
    private readonly sessions: Sessions,
    private readonly markdown: MarkdownWorker,
    extensionUri: vscode.Uri,
    column: vscode.ViewColumn,
    onDispose: () => void,
    private readonly onAnswer: (id: string, choice: string) => void,
  ) {
    this.state = {
      title: "pi chat", busy: false, model: null, models: modelChoices(getter()).map((id) => ({ id })), thinkingLevel: "off",
      thinkingLevels: THINKING_LEVELS, tokens: "", attachments: [],
    };
    this.panel = vscode.window.createWebviewPanel("piLsp.chat", "pi chat", column, {
      enableScripts: true,
      retainContextWhenHidden: true, // a streamed turn must not be lost when the tab is hidden
      localResourceRoots: [vscode.Uri.joinPath(extensionUri, "out"), vscode.Uri.joinPath(extensionUri, "media")],
    });
    this.panel.iconPath = vscode.Uri.joinPath(extensionUri, "media", "pi.svg");
    this.panel.webview.html = html(this.panel.webview, extensionUri);
    this.panel.webview.onDidReceiveMessage((m: FromWebview) => void this.receive(m));
    this.panel.onDidChangeViewState(() => {
      if (this.panel.active) this.sessions.remember(this.uri);
      this.sessions.refreshCurrent(); // the chat in front is the current session, remembered or not
    });
    this.panel.onDidDispose(() => {
      clearTimeout(this.reloadTimer);
      clearTimeout(this.frame);
      clearInterval(this.countdown);
      this.reloadedEmitter.dispose();
      onDispose();
      this.sessions.refreshCurrent();
    });
  }

  post(message: ToWebview): void {
    this.posted.push(message);
    if (this.posted.length > 500) this.posted.splice(0, this.posted.length - 500);
    // Until the webview's script says it is ready, messages would be dropped: queue them.
    if (!this.ready) this.queue.push(message);
    else void this.panel.webview.postMessage(message);
  }

  /** The context the server builds is the transcript; a running turn is streamed on top. */
  async reload(): Promise<void> {
    if (this.firstRead === undefined) return (this.firstRead = this.read());
    await this.firstRead;
    return this.read();
  }

  private async read(): Promise<void> {
    clearTimeout(this.reloadTimer);
    // The first read is the transcript even while a turn runs: the events that come meanwhile
    // wait for it, and are then shown on it (those of messages it holds add nothing).
    const early = this.early;
    // A context asked for before a turn ended (during it, or before its prompt was written) may
    // lack the turn's entries: it must not become the transcript (the reload after the end brings them).
    const asked = this.turnsEnded;
    try {
      const [preview, info, models] = await Promise.all([
        this.pi.call("pi.previewContext", { uri: this.uri, page: this.shown }),
        this.sessions.info(this.uri).catch(() => undefined),
        availableModels(this.pi),
      ]);
      this.state = {
        ...this.state,
        title: Sessions.title(info, this.uri),
        model: preview.model,
        models,
        thinkingLevel: preview.thinkingLevel,
        thinkingLevels: preview.thinkingLevels ?? THINKING_LEVELS,
        tokens: `${formatTokens(preview.totalTokens)} / ${formatTokens(preview.contextWindow)} tokens`,
        busy: this.transcript.busy,
      };
      this.panel.title = `pi: ${this.state.title}`;
      if (early || (asked === this.turnsEnded && !this.transcript.busy)) {
        const last = preview.pages?.at(-1) ?? { start: 0, messages: [] };
        this.earlier = last.start;
        this.transcript.load(last.messages, editsIn(preview.edits ?? [], last));
        await this.inOrder(async () => {
          const blocks = await this.rendered();
          if (this.failed) blocks.push({ id: "failed", html: noticeHtml("failed", `Not sent: ${this.failed.error}`, "error") });
          this.post({ type: "reset", blocks, state: this.state });
        });
      } else {
        this.post({ type: "state", state: this.state });
      }
    } catch (error) {
      this.post({ type: "reset", blocks: [{ id: "error", html: `<div class="notice error">${escape(String(error))}</div>` }], state: this.state });
    }
    if (early) {
      this.early = undefined;
      for (const n of early) this.onTurn(n);
    }
    this.reloadedEmitter.fire();
  }

  /** Coalesced: a turn end and its session changes arrive together. */
  scheduleReload(delay = 150): void {
    clearTimeout(this.reloadTimer);
    this.reloadTimer = setTimeout(() => void this.reload(), delay);
  }

  /** The server is gone (a crash, a restart, or stopped for good): a turn this chat was showing
   *  ended with it, and no agent_end will come for it. */
  serverEnded(): void {
    this.turnsEnded++;
    if (this.transcript.busy) {
      this.transcript.apply({ type: "agent_end" });
      this.setBusy(false);
    }
    this.restorePending();
    this.restoreQueued();
    this.scheduleReload();
  }

  /** A prompt whose turn had not started when its server stopped goes back into the input, its
   *  code attached again, as Neovim's chat gives it back: unless the session file holds it (the
   *  server wrote it, and stopped before its agent_start reached the chat). */
  private restorePending(): void {
    const pending = this.pending;
    this.pending = undefined;
    if (!pending || promptWrittenSince(pending.file, pending.since, pending.text, pending.id)) return;
    this.post({ type: "setInput", text: pending.text, keepDraft: true });
    this.attachAgain(pending.attachments);
    void vscode.window.showInformationMessage("pi: the server stopped before your prompt reached pi; it is back in the chat's input.");
  }

  /** The session goes on in the file `uri` (another program cut its own short). */
  moveTo(uri: string): void {
    this.uri = uri;
    if (!this.transcript.busy) this.scheduleReload(); // its turn's end reloads it otherwise
  }

  onTurn(n: TurnNotification): void {
    if (this.early) return void this.early.push(n); // the first transcript is being read
    if (n.event.type === "agent_start") {
      this.pending = undefined;
      // Its queue_dropped names what was withdrawn before it began (its prompt was being asked
      // about): given back then, it is not given back again. What earlier turns gave back goes.
      this.givenBack = this.givenBack.filter((g) => g.early).map((g) => ({ text: g.text, early: false }));
    }
    if (n.event.type === "queue_dropped") return this.restoreDropped(n.event);
    // Any event of the running turn names it: a chat opened mid-turn never saw its agent_start.
    this.turnId = n.event.type === "agent_end" || n.event.type === "error" ? undefined : n.turnId;
    if (n.event.type === "error" && this.pending !== undefined) {
      // Nothing was written: keep the prompt in the input, its code attached, and the error in view.
      this.failed = { text: this.pending.text, error: n.event.message };
      this.attachAgain(this.pending.attachments);
      this.pending = undefined;
      this.post({ type: "setInput", text: this.failed.text });
    }
    if (n.event.type === "message_end" && n.event.message.role === "user") {
      // A queued message reached the model: it is no longer ours to keep.
      // Its first text block is the text as sent; attached code follows in blocks of its own.
      const sent = sentText(n.event.message.content);
      const at = sent === undefined ? -1 : deliveredIndex(this.queued, sent);
      // Shown in the transcript now: its notice would show it as still queued.
      if (at >= 0) this.hide(this.queued.splice(at, 1)[0].notice);
    }
    const wasBusy = this.transcript.busy;
    for (const id of this.transcript.apply(n.event)) this.stale.add(id);
    // Each draw parses the whole reply: drawn per delta, a 20,000-character one took seconds.
    if (n.event.type === "message_update") this.frame ??= setTimeout(() => this.draw(), STREAM_FRAME_MS);
    else this.draw();
    if (wasBusy !== this.transcript.busy) this.setBusy(this.transcript.busy);
    this.countDown();
    if (n.event.type === "agent_end" || n.event.type === "error") {
      this.turnsEnded++;
      this.restoreQueued();
      this.scheduleReload(300);
    }
  }

  /** A turn that began before this chat opened: shown running from now on (a reply or a long
   *  tool may send no event for minutes), and its retry wait as if its auto_retry_start had come
   *  now, for the time left. */
  joinTurn(run: Run): void {
    this.turnId = run.turnId;
    if (!this.transcript.busy) this.setBusy(true);
    const wait = run.wait;
    if (!wait || this.transcript.retrying()) return; // an event of the turn came while the chat opened
    this.onTurn({ uri: this.uri, turnId: run.turnId, event: { ...wait.event, delayMs: Math.max(0, wait.until - Date.now()) } });
  }

  /** Draws the retry wait each second while there is one, as pi 1.6 counts it down. */
  private countDown(): void {
    const retry = this.transcript.retrying();
    if (!retry) {
      clearInterval(this.countdown);
      this.countdown = undefined;
    } else if (this.countdown === undefined) {
      this.countdown = setInterval(() => {
        const waiting = this.transcript.retrying();
        if (!waiting) return this.countDown(); // reloaded meanwhile
        this.stale.add(waiting.id);
        this.draw();
      }, 1000);
    }
  }

  /** Posts the blocks changed since the last draw, once renders asked for before it are posted. */
  private draw(): void {
    clearTimeout(this.frame);
    this.frame = undefined;
    if (this.drawQueued) return;
    this.drawQueued = true;
    void this.inOrder(async () => {
      this.drawQueued = false;
      const ids = [...this.stale];
      this.stale.clear();
      const md = budgetedMarkdown(RENDER_BUDGET_MS, this.markdown);
      for (const id of ids) {
        const block = this.transcript.block(id);
        if (block) this.post({ type: "upsert", id, html: await renderBlockAsync(block, this.transcript.tools, this.markdownFor(block, md)) });
      }
    });
  }

  /** Runs `job` after every render asked for before it. */
  private inOrder(job: () => Promise<void>): Promise<void> {
    const run = this.rendering.then(job);
    this.rendering = run.catch(() => undefined);
    return run;
  }

  /** How `block`'s texts are drawn: a streaming reply's by a renderer of its own (streamingMarkdown), others by `md`. */
  private markdownFor(block: Block, md: AsyncRender): AsyncRender {
    if (block.kind !== "assistant" || !block.streaming) return md;
    if (this.stream?.id !== block.id) this.stream = { id: block.id, md: streamingMarkdown(STREAM_MARKDOWN_MS, this.markdown) };
    return this.stream.md;
  }

  /** Queued messages the turn ended without (an abort, an error) go back into the input, their
   *  code attached again (before code attached since, as Neovim's chat does), so a resend carries it.
   *  Every steer comes before every follow-up, as pi 1.6's restoreQueuedMessagesToEditor has them. */
  private restoreQueued(): void {
    if (!this.queued.length) return;
    const queued = steersFirst(this.queued.splice(0));
    this.givenBack.push(...queued.map((q) => ({ text: q.text, early: false })));
    for (const q of queued) this.hide(q.notice);
    this.post({ type: "setInput", text: queued.map((q) => q.text).join("\n\n"), keepDraft: true });
    this.attachAgain(queued.flatMap((q) => q.attachments));
    // Not a notice in the transcript: the reload after the turn's end would drop it at once.
    void vscode.window.showInformationMessage("pi: the turn ended before your queued message reached pi; it is back in the chat's input.");
  }

  /** What an abort left unsent that this chat did not give back at the turn's end (it opened
   *  after they were queued, in another chat) goes back into the input too. */
  private restoreDropped(event: Extract<TurnEvent, { type: "queue_dropped" }>): void {
    const mine = [...this.givenBack.splice(0).map((g) => g.text), ...this.unanswered];
    const back = [...event.steering, ...event.followUp].filter((text) => {
      const at = mine.indexOf(text);
      if (at >= 0) mine.splice(at, 1);
      return at < 0;
    });
    if (!back.length) return;
    this.post({ type: "setInput", text: back.join("\n\n"), keepDraft: true });
    void vscode.window.showInformationMessage("pi: the turn ended before your queued message reached pi; it is back in the chat's input.");
  }

  /** Code of messages pi did not get, attached again before code attached since. */
  private attachAgain(back: Attachment[]): void {
    if (!back.length) return;
    // The same code attached again meanwhile, or sent with two of them, is attached once.
    const attached = this.attachments.splice(0);
    for (const a of [...back, ...attached]) if (!this.attachments.some((b) => sameAttachment(a, b))) this.attachments.push(a);
    this.postAttachments();
  }

  setInput(text: string): void {
    this.post({ type: "setInput", text });
    this.panel.reveal();
  }

  /** Code for the next prompt; shown above the input until it is sent. */
  attach(attachment: Attachment): void {
    this.attachments.push(attachment);
    this.postAttachments();
    this.panel.reveal(this.panel.viewColumn);
  }

  private postAttachments(): void {
    this.state = { ...this.state, attachments: this.attachments.map((a) => a.label) };
    this.post({ type: "state", state: this.state });
  }

  showQuestion(q: Question): void {
    this.post({ type: "approval", id: q.id, message: q.message, actions: q.actions, ...(q.detail ? { detail: q.detail } : {}),
      ...(q.notes ? { notes: q.notes } : {}) });
  }

  /** What the webview asked for; also the entry point the tests drive. */
  async receive(m: FromWebview): Promise<void> {
    try {
      switch (m.type) {
        case "ready":
          this.ready = true;
          this.queue.splice(0).forEach((q) => void this.panel.webview.postMessage(q));
          return;
        case "send":
          return await this.send(m.text, m.delivery);
        case "abort":
          await this.pi.call("pi.abort", { uri: this.uri });
          return;
        case "setModel":
          return await this.setModel(m.model);
        case "pickModel": {
          const model = await pickModel(this.pi, this.state.model);
          if (model) await this.setModel(model);
          return;
        }
        case "setThinking":
          await this.pi.call("pi.setThinkingLevel", { uri: this.uri, level: m.level as ThinkingLevel });
          return;
        case "approve":
          this.onAnswer(m.id, m.choice);
          return;
        case "earlier":
          this.shown += CHAT_PAGE;
          return await this.reload();
        case "previewContext":
          await vscode.commands.executeCommand("piLsp.previewContext", { uri: this.uri });
          return;
        case "detach":
          this.attachments.splice(m.index, 1);
          this.postAttachments();
          return;
        case "contextEdit":
          await vscode.commands.executeCommand(CONTEXT_EDITS[m.action], { uri: this.uri, entryId: m.entryId });
          return;
      }
    } catch (error) {
      this.notice(error instanceof Error ? error.message : String(error));
    }
  }

  async send(text: string, delivery: "prompt" | "steer" | "followUp"): Promise<void> {
    if (!text.trim()) return;
    this.sessions.remember(this.uri);
    if (this.failed) {
      this.failed = undefined;
      this.hide("failed");
    }
    const attached = [...this.attachments];
    const pending: Pending = { text, attachments: attached, file: this.uri, since: sessionSize(this.uri) };
    if (delivery === "prompt") {
      this.setBusy(true); // until agent_start confirms it
      this.pending = pending;
    }
    const context = attached.map((a) => a.context);
    if (delivery !== "prompt") this.unanswered.push(text);
    try {
      const result = await this.pi.call("pi.prompt", { uri: this.uri, text, delivery, ...(context.length ? { context } : {}) });
      if (result.dropped) {
        // Aborted while its attached file was asked about: the text and code stay to send again.
        this.givenBack.push({ text, early: this.turnId === undefined });
        this.post({ type: "setInput", text, keepDraft: true });
        void vscode.window.showInformationMessage("pi: the turn was aborted before your queued message reached pi; it is back in the chat's input.");
        return;
      }
      pending.id = result.promptId; // the entry it is to be written as
      // The code sent is the message's now; code attached while the server answered is the next one's.
      const left = this.attachments.filter((a) => !attached.includes(a));
      this.attachments.splice(0, this.attachments.length, ...left);
      if (context.length) this.postAttachments();
      if (result.queued) {
        const notice = this.notice(result.queued === "steer" ? "Steering message queued for after the current tool." : "Follow-up queued for when the turn ends.", "info");
        this.queued.push({ text, delivery: result.queued, notice, attachments: attached });
      }
    } catch (error) {
      if (delivery === "prompt") this.setBusy(false);
      // Refused: the text is not lost. Unless a restarted server gave the prompt back already.
      if (delivery !== "prompt" || this.pending === pending) this.post({ type: "setInput", text });
      if (this.pending === pending) this.pending = undefined;
      throw error;
    } finally {
      if (delivery !== "prompt") this.unanswered.splice(this.unanswered.indexOf(text), 1);
    }
  }

  private async setModel(model: string): Promise<void> {
    const slash = model.indexOf("/");
    if (slash <= 0) throw new Error(`a model is provider/id, not ${model}`);
    await this.pi.call("pi.setModel", { uri: this.uri, provider: model.slice(0, slash), modelId: model.slice(slash + 1) });
  }

  private setBusy(busy: boolean): void {
    this.transcript.busy = busy;
    this.state = { ...this.state, busy };
    this.post({ type: "state", state: this.state });
  }

  /** Shows a notice under the transcript; its id. */
  private notice(text: string, level: "info" | "error" = "error"): string {
    const id = `notice-${Date.now()}-${Math.random().toString(36).slice(2, 6)}`;
    this.post({ type: "upsert", id, html: noticeHtml(id, text, level) });
    return id;
  }

  /** Takes the block `id` (a notice) out of view. */
  private hide(id: string): void {
    this.post({ type: "upsert", id, html: '<div class="hidden"></div>' });
  }

  private async rendered(): Promise<{ id: string; html: string }[]> {
    // Newest first: the budget goes to the end of the chat, which is what the user sees.
    const md = budgetedMarkdown(RENDER_BUDGET_MS, this.markdown);
    const blocks: { id: string; html: string }[] = [];
    for (const b of [...this.transcript.blocks].reverse()) blocks.push({ id: b.id, html: await renderBlockAsync(b, this.transcript.tools, md) });
    blocks.reverse();
    if (this.earlier > 0) blocks.unshift({ id: "earlier", html: earlierHtml(this.earlier) });
    return blocks;
  }
}

/** A prompt sent whose turn was not seen to start; `since`: the size of its session `file` then. */
interface Pending {
  text: string;
  attachments: Attachment[];
  file: string;
  /** The id of the entry the server writes it as (pi.prompt's answer), once it answered. */
  id?: string;
  since: number;
}

/** A session's running turn, and its wait before asking again for a failed reply if it waits. */
interface Run {
  turnId: string;
  wait?: Wait;
}

/** A turn's wait before asking again for a failed reply; `until`: its end (ms since the epoch). */
interface Wait {
  event: Extract<TurnEvent, { type: "auto_retry_start" }>;
  until: number;
}

/** A steer or follow-up a chat gave back; `early`: before the turn it was sent behind began. */
interface GivenBack {
  text: string;
  early: boolean;
}

/** A steer or follow-up the server queued, with the code sent with it; `notice`: the id of the
 *  notice saying so. */
interface Queued {
  text: string;
  delivery: Delivery;
  notice: string;
  attachments: Attachment[];
}

/** `queued` with every steer before every follow-up, each in the order sent. */
function steersFirst(queued: Queued[]): Queued[] {
  return [...queued.filter((q) => q.delivery === "steer"), ...queued.filter((q) => q.delivery !== "steer")];
}

/** Whether two attachments are the same code of the same file. */
function sameAttachment(a: Attachment, b: Attachment): boolean {
  return a.label === b.label && JSON.stringify(a.context) === JSON.stringify(b.context);
}

/** Where in `queued` the delivered message of `text` is: pi delivers every queued steer before
 *  any follow-up, so a text both a steer and a follow-up have is the steer's. */
function deliveredIndex(queued: Queued[], text: string): number {
  const steer = queued.findIndex((q) => q.delivery === "steer" && q.text === text);
  return steer >= 0 ? steer : queued.findIndex((q) => q.text === text);
}

/** The context edits of a page, placed among its messages. */
function editsIn(edits: EditMark[], page: PreviewPage): EditMark[] {
  return edits.filter((e) => e.position >= page.start).map((e) => ({ ...e, position: e.position - page.start }));
}

function earlierHtml(count: number): string {
  return `<div class="notice info earlier" data-id="earlier">${count.toLocaleString("en")} earlier message${count === 1 ? "" : "s"} of the context not shown ` +
    `<button data-earlier="1">Show ${Math.min(count, CHAT_PAGE)} more</button></div>`;
}

function noticeHtml(id: string, text: string, level: "info" | "error"): string {
  return `<div class="notice ${level}" data-id="${id}">${escape(text)}</div>`;
}

function escape(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] as string);
}

function html(webview: vscode.Webview, extensionUri: vscode.Uri): string {
  const nonce = Array.from({ length: 24 }, () => Math.floor(Math.random() * 36).toString(36)).join("");
  const script = webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, "out", "webview.js"));
  const style = webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, "media", "chat.css"));
  // No inline script and no remote content: model output is rendered into this page.
  const csp = `default-src 'none'; style-src ${webview.cspSource}; img-src ${webview.cspSource} data:; script-src 'nonce-${nonce}';`;
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${String(style)}"><title>pi chat</title></head>
<body>
<header>
  <span id="title"></span>
  <select id="model" title="Model"></select>
  <select id="thinking" title="Thinking level"></select>
  <span id="tokens" title="Preview the context"></span>
  <button id="abort" title="Abort the running turn">Abort</button>
</header>
<main id="transcript"></main>
<div id="approvals"></div>
<div id="attachments"></div>
<footer>
  <textarea id="input" rows="3" placeholder="Ask pi… (Enter sends; while it runs, Enter steers and Alt+Enter queues a follow-up)"></textarea>
  <div class="buttons">
    <button id="send">Send</button>
    <button id="steer" title="Deliver after the current tool, before the next model call">Steer</button>
    <button id="followUp" title="Deliver when the turn would otherwise end">Follow up</button>
  </div>
</footer>
<script nonce="${nonce}" src="${String(script)}"></script>
</body></html>`;
}
