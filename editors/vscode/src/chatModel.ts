// The chat transcript: the context's messages, then a running turn's pi/turn events folded in.
// Pure (no vscode import) so it is tested in plain Node; the panel renders what changed.
import { shorten } from "./plainText";
import { AgentMessage, ContentBlock, EditMark, PreviewMessage, StreamDelta, TurnEvent } from "./protocol";

export type Part =
  | { type: "text"; text: string }
  | { type: "thinking"; text: string }
  | { type: "toolCall"; id: string; name: string; args: string; brief?: string }
  | { type: "image"; mimeType: string }
  /** Code sent with a prompt: the model gets it as `<file …>` markup, the user sees this. */
  | { type: "file"; title: string; language?: string; text: string };

export interface ToolRun {
  running: boolean;
  text: string;
  isError: boolean;
  /** The result's entry, once it is in the session (it can then be edited in the context). */
  entryId?: string;
  edited?: boolean;
}

export type Block =
  | { id: string; kind: "user"; parts: Part[]; edited?: boolean }
  | { id: string; kind: "assistant"; parts: Part[]; streaming: boolean; model?: string; error?: string; edited?: boolean;
      /** A failed or aborted reply as left out of the context (`failurePreview`). */
      failure?: string }
  /** A message a context edit left out: shown where it was, so it can be put back. A running
   *  turn's failed reply, left out to be asked for again, has no entry id or tokens yet. */
  | { id: string; kind: "removed"; entryId?: string; role: string; text: string; tokens?: number }
  /** pi's wait before asking again for a failed reply; `until` (ms since the epoch) counts it down. */
  | { id: string; kind: "retry"; attempt: number; maxAttempts: number; until: number; over: boolean }
  | { id: string; kind: "summary"; title: string; text: string }
  | { id: string; kind: "notice"; text: string; level: "info" | "error" };

// Where the server cuts a failed reply's preview, and the target of each of its calls
// (pi_lsp/context/edits.py FAILURE_CHARS, pi_lsp/session/outline.py _call_preview).
const FAILURE_CHARS = 8000;
const CALL_TARGET_CHARS = 32;

/** The events between a failed reply's message_end and the auto_retry_start that asks for it
 *  again, if one does. */
const BEFORE_RETRY = new Set<TurnEvent["type"]>(["turn_end", "save_point"]);

export class Transcript {
  blocks: Block[] = [];
  /** Tool results by tool-call id; a tool call is shown with its result. */
  readonly tools = new Map<string, ToolRun>();
  busy = false;
  private counter = 0;
  /** A failed reply's blocks, not drawn since its message_end: pi may ask for it again. */
  private failed: string[] = [];
  /** The messages loaded (messageKey): a running turn's events of one of them add nothing. */
  private loaded = new Set<string>();
  /** The events of a message the transcript holds are coming (its message_start came). */
  private skipping = false;
  /** The roles of the loaded messages of no time (pi accepts one), by entry: such a message is
   *  told by its entry, which its message_end names. */
  private untimed = new Map<string, string>();
  /** The message_start of a message of no time: shown unless its message_end names a loaded entry. */
  private undecided: AgentMessage | undefined;

  /** Starts again from the context the server built (after a branch, a reload, a turn end). */
  load(messages: PreviewMessage[], edits: EditMark[] = []): void {
    this.blocks = [];
    this.failed = [];
    this.tools.clear();
    this.loaded = new Set(messages.flatMap((m) => messageKey(m.message) ?? []));
    this.untimed = new Map(messages.flatMap((m) => m.entryId && messageKey(m.message) === undefined ? [[m.entryId, m.message.role]] : []));
    this.skipping = false;
    this.undecided = undefined;
    const removed = edits.filter((e) => e.kind === "omitted");
    const removedAt = (index: number) => {
      for (const e of removed) {
        if (e.position === index || (index === messages.length && e.position > index)) {
          this.push({ id: `removed-${e.targetId}`, kind: "removed", entryId: e.targetId, role: e.role, text: e.failure ?? e.original, tokens: e.tokensBefore });
        }
      }
    };
    messages.forEach((m, index) => {
      removedAt(index);
      this.add(m.message, m.entryId ?? undefined, m.edited);
    });
    removedAt(messages.length);
  }

  /** Folds one event in; returns the ids of the blocks to redraw. */
  apply(event: TurnEvent): string[] {
    const started = this.decide(event);
    if (this.holds(event)) {
      this.busy = true; // an event of the running turn all the same
      return started;
    }
    return [...started, ...this.settleFailed(event), ...this.fold(event)];
  }

  /** The message of no time whose message_start was held is shown at the next event, unless
   *  that is its message_end naming an entry the transcript loaded. */
  private decide(event: TurnEvent): string[] {
    const message = this.undecided;
    this.undecided = undefined;
    if (message === undefined || (event.type === "message_end" && this.loadedEntry(event))) return [];
    return this.fold({ type: "message_start", message });
  }

  /** Whether `event` ends a message of no time written as an entry the transcript loaded. */
  private loadedEntry(event: Extract<TurnEvent, { type: "message_end" }>): boolean {
    return messageKey(event.message) === undefined && !!event.entryId && this.untimed.has(event.entryId);
  }

  /** Whether a message of no time may be one the transcript loaded: one of its role is. Not a
   *  reply, shown as it streams (the server stamps each one it streams with its time). */
  private mayBeLoaded(message: AgentMessage): boolean {
    return message.role !== "assistant" && [...this.untimed.values()].includes(message.role);
  }

  /** Whether `event` is of a message (or a tool run) the transcript loaded already: a chat read
   *  during a turn holds the messages the turn had written, whose events may come after. */
  private holds(event: TurnEvent): boolean {
    switch (event.type) {
      case "message_start": {
        const key = messageKey(event.message);
        // Of no time and of a role loaded so: whether it is loaded is known at its message_end (decide).
        const unknown = key === undefined && this.mayBeLoaded(event.message);
        if (unknown) this.undecided = event.message;
        this.skipping = key !== undefined && this.loaded.has(key);
        return unknown || this.skipping;
      }
      case "message_update":
        return this.skipping;
      case "message_end": {
        const held = this.loaded.has(messageKey(event.message) ?? "") || this.loadedEntry(event);
        this.skipping = false;
        return held;
      }
      case "tool_execution_start":
      case "tool_execution_update":
      case "tool_execution_end":
        return this.tools.get(event.toolCallId)?.entryId !== undefined; // its result is loaded
      default:
        return false;
    }
  }

  /** The failed reply held back is drawn once it is known what it is: left out of the context
   *  when pi asks for it again (auto_retry_start draws it so), else as it failed. Drawn once,
   *  as pi 1.6 draws it, not first as the turn's error and then as left out. */
  private settleFailed(event: TurnEvent): string[] {
    if (BEFORE_RETRY.has(event.type)) return [];
    const failed = this.failed;
    this.failed = [];
    return event.type === "auto_retry_start" ? [] : failed;
  }

  private fold(event: TurnEvent): string[] {
    // Sent after agent_end: it names what an abort dropped, and runs nothing.
    if (event.type === "queue_dropped") return [];
    if (event.type === "agent_end") {
      this.busy = false;
      this.finishStreaming();
      return this.retryOver();
    }
    this.busy = event.type !== "error";
    switch (event.type) {
      case "message_start":
        return this.add(event.message);
      case "message_update":
        return this.stream(event.deltas);
      case "message_end": {
        const ids = this.end(event.message);
        if (event.message.role !== "assistant" || event.message.stopReason !== "error") return ids;
        this.failed = ids; // shown as it streamed until the next event says what it is
        return [];
      }
      case "tool_execution_start":
        this.tools.set(event.toolCallId, { running: true, text: "", isError: false });
        return this.blocksCalling(event.toolCallId);
      case "tool_execution_update": {
        const run = this.tools.get(event.toolCallId) ?? { running: true, text: "", isError: false };
        run.text = event.partialResult;
        this.tools.set(event.toolCallId, run);
        return this.blocksCalling(event.toolCallId);
      }
      case "tool_execution_end":
        this.tools.set(event.toolCallId, { running: false, text: contentText(event.result.content), isError: event.isError });
        return this.blocksCalling(event.toolCallId);
      case "error":
        this.finishStreaming();
        return [...this.retryOver(), this.push({ id: "", kind: "notice", level: "error", text: event.message })];
      case "turn_start":
        return this.retryOver(); // the wait is over: the reply is asked for again
      case "auto_retry_start":
        return [...this.retryOver(), ...this.leftOut(), this.push({
          id: "", kind: "retry", attempt: event.attempt, maxAttempts: event.maxAttempts, until: Date.now() + event.delayMs, over: false,
        })];
      case "auto_retry_end": {
        const over = this.retryOver();
        if (event.success) return over;
        // As pi 1.6's error line once retrying stops without a reply.
        const attempts = `${event.attempt} attempt${event.attempt === 1 ? "" : "s"}`;
        return [...over, this.push({ id: "", kind: "notice", level: "error", text: `Retry failed after ${attempts}: ${event.finalError || "Unknown error"}` })];
      }
      case "compaction_start":
        return [this.push({ id: "", kind: "notice", level: "info", text: `Compacting the context (${event.reason})…` })];
      case "compaction_end":
        // Stopped by the user is a status, as pi 1.6's line; the server words a failure as pi
        // does ("Auto-compaction failed: …"): shown as it is.
        if (event.aborted) return [this.push({ id: "", kind: "notice", level: "info", text: "Auto-compaction cancelled" })];
        return [this.push({
          id: "", kind: "notice", level: event.error ? "error" : "info",
          text: event.error || "Compacted the context.",
        })];
      default:
        return [];
    }
  }

  block(id: string): Block | undefined {
    return this.blocks.find((b) => b.id === id);
  }

  private add(message: AgentMessage, id?: string, edited?: boolean): string[] {
    switch (message.role) {
      case "user":
        return [this.push({ id: id ?? "", kind: "user", parts: parts(message.content).map(attachedFile), edited })];
      case "assistant":
        return [this.push({
          id: id ?? "", kind: "assistant", parts: parts(message.content), streaming: id === undefined,
          model: message.model, error: errorOf(message), failure: failurePreview(message), edited,
        })];
      case "toolResult":
        if (message.toolCallId) {
          this.tools.set(message.toolCallId, { running: false, text: contentText(message.content), isError: !!message.isError, entryId: id, edited });
          return this.blocksCalling(message.toolCallId);
        }
        return [];
      case "branchSummary":
        return [this.push({ id: id ?? "", kind: "summary", title: "Summary of a branch left behind", text: message.summary ?? "" })];
      case "compactionSummary":
        return [this.push({ id: id ?? "", kind: "summary", title: `Compacted earlier context (${message.tokensBefore ?? "?"} tokens)`, text: message.summary ?? "" })];
      case "bashExecution":
        return [this.push({ id: id ?? "", kind: "summary", title: `$ ${message.command ?? ""}`, text: "```\n" + (message.output ?? "") + "\n```" })];
      case "custom":
        return message.display === false ? [] : [this.push({ id: id ?? "", kind: "summary", title: message.customType ?? "custom", text: contentText(message.content) })];
      default:
        return [];
    }
  }

  /** The wait being counted down, if any. */
  retrying(): Extract<Block, { kind: "retry" }> | undefined {
    return this.blocks.find((b): b is Extract<Block, { kind: "retry" }> => b.kind === "retry" && !b.over);
  }

  private retryOver(): string[] {
    const retry = this.retrying();
    if (!retry) return [];
    retry.over = true;
    return [retry.id];
  }

  /** The failed reply pi asks for again is out of the context from now on: shown as the
   *  transcript read after the turn shows it (the server's edit mark), not as the turn's error. */
  private leftOut(): string[] {
    const at = this.blocks.length - 1;
    const last = this.blocks[at];
    if (last?.kind !== "assistant" || last.failure === undefined) return [];
    this.blocks[at] = { id: last.id, kind: "removed", role: "assistant", text: last.failure };
    return [last.id];
  }

  private stream(deltas: StreamDelta[]): string[] {
    // A chat opened mid-reply missed its message_start: the reply is shown from here on (its
    // message_end brings the whole of it).
    const block = this.streaming() ?? this.startStreaming();
    for (const d of deltas) {
      if (d.delta === undefined) continue; // block_end carries no text
      const kind: Part["type"] = d.type === "thinking_delta" ? "thinking" : d.type === "toolcall_delta" ? "toolCall" : "text";
      let part = block.parts[d.contentIndex];
      if (!part || part.type !== kind) {
        part = kind === "toolCall" ? { type: "toolCall", id: "", name: "", args: "" } : { type: kind, text: "" };
        block.parts[d.contentIndex] = part;
      }
      if (part.type === "toolCall") part.args += d.delta;
      else if (part.type === "text" || part.type === "thinking") part.text += d.delta;
    }
    return [block.id];
  }

  private end(message: AgentMessage): string[] {
    if (message.role !== "assistant") return [];
    const block = this.streaming();
    if (!block) return this.add(message);
    // The final message is authoritative: it has the tool-call names and parsed arguments.
    block.parts = parts(message.content);
    block.streaming = false;
    block.model = message.model;
    block.error = errorOf(message);
    block.failure = failurePreview(message);
    return [block.id];
  }

  private streaming(): Extract<Block, { kind: "assistant" }> | undefined {
    const last = this.blocks[this.blocks.length - 1];
    return last?.kind === "assistant" && last.streaming ? last : undefined;
  }

  private startStreaming(): Extract<Block, { kind: "assistant" }> {
    const block: Extract<Block, { kind: "assistant" }> = { id: "", kind: "assistant", parts: [], streaming: true };
    this.push(block);
    return block;
  }

  private finishStreaming(): void {
    for (const b of this.blocks) if (b.kind === "assistant") b.streaming = false;
  }

  private blocksCalling(toolCallId: string): string[] {
    return this.blocks
      .filter((b) => (b.kind === "assistant") && b.parts.some((p) => p.type === "toolCall" && p.id === toolCallId))
      .map((b) => b.id);
  }

  private push(block: Block): string {
    // Context messages keep their entry id; streamed ones get a local one.
    block.id = block.id || `local-${++this.counter}`;
    if (this.blocks.some((b) => b.id === block.id)) block.id = `${block.id}-${++this.counter}`;
    this.blocks.push(block);
    return block.id;
  }
}

export function parts(content: AgentMessage["content"]): Part[] {
  if (content === undefined) return [];
  if (typeof content === "string") return [{ type: "text", text: content }];
  return content.map(toPart);
}

function toPart(b: ContentBlock): Part {
  switch (b.type) {
    case "thinking":
      return { type: "thinking", text: b.thinking ?? "" };
    case "toolCall":
      return { type: "toolCall", id: b.id ?? "", name: b.name ?? "", args: formatArgs(b.arguments), brief: brief(b.arguments) };
    case "image":
      return { type: "image", mimeType: b.mimeType ?? "image" };
    default:
      return { type: "text", text: b.text ?? "" };
  }
}

const FILE_MARKUP = /^<file path="([^"]*)"(?: lines="(\d+)-(\d+)")?(?: language="([^"]*)")?>\n([\s\S]*)<\/file>$/;

/** A text block holding the server's `<file path=… lines=…>` markup, as a titled file part. */
export function attachedFile(part: Part): Part {
  const match = part.type === "text" ? FILE_MARKUP.exec(part.text) : null;
  if (!match) return part;
  const [, path, start, end, language, text] = match;
  const lines = start === undefined ? "" : start === end ? `:${start}` : `:${start}-${end}`;
  return { type: "file", title: `${path}${lines}`, ...(language ? { language } : {}), text: text.replace(/\n$/, "") };
}

/**
 * Tool arguments for reading: `key: value` lines, with multi-line strings (a file written,
 * an edit) shown as they are rather than as one JSON line full of `\n`; a list of objects (an
 * edit's `edits`) as `edits[0].oldText: …` lines.
 */
export function formatArgs(args: unknown): string {
  if (!args || typeof args !== "object" || Array.isArray(args)) return JSON.stringify(args ?? {}, null, 2);
  return argLines(args as Record<string, unknown>, "").join("\n");
}

function argLines(args: Record<string, unknown>, prefix: string): string[] {
  return Object.entries(args).flatMap(([key, value]) => {
    const name = prefix + key;
    if (Array.isArray(value) && value.length > 0 && value.every(isRecord)) {
      return value.flatMap((item, i) => argLines(item, `${name}[${i}].`));
    }
    if (typeof value !== "string") return [`${name}: ${JSON.stringify(value)}`];
    return [value.includes("\n") ? `${name}:\n${value.replace(/\n$/, "")}` : `${name}: ${value}`];
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return !!value && typeof value === "object" && !Array.isArray(value);
}

/** The argument that says what a call does (bash's command, a file tool's path), one line. */
function brief(args: unknown): string | undefined {
  if (!args || typeof args !== "object") return undefined;
  const o = args as { command?: unknown; path?: unknown };
  const value = typeof o.command === "string" ? o.command : typeof o.path === "string" ? o.path : undefined;
  if (value === undefined) return undefined;
  const line = value.split("\n")[0];
  return line.length > 60 ? `${line.slice(0, 60)}…` : line;
}

export function contentText(content: AgentMessage["content"]): string {
  if (content === undefined) return "";
  if (typeof content === "string") return content;
  return content.map((b) => (b.type === "text" ? b.text ?? "" : `[${b.type}]`)).join("\n");
}

/** A failed or aborted reply in the words of the server's edit mark for it (pi_lsp/context/edits.py
 *  failure_preview): `[error] <its error>`, then its calls, on one line, cut at FAILURE_CHARS. */
function failurePreview(message: AgentMessage): string | undefined {
  if (message.stopReason !== "error" && message.stopReason !== "aborted") return undefined;
  const blocks = Array.isArray(message.content) ? message.content : [];
  const text = blocks.flatMap((b) => (b.type === "text" ? [b.text ?? ""] : [])).join(" ");
  const calls = blocks.flatMap((b) => (b.type === "toolCall" ? [`${b.name ?? ""}(${shorten(callTarget(b.arguments), CALL_TARGET_CHARS)})`] : []));
  const preview = `[${message.stopReason}] ${message.errorMessage || text}`;
  return shorten(calls.length ? `${preview} → ${calls.join(", ")}` : preview, FAILURE_CHARS);
}

/** What a call's preview names, as the server's (pi_lsp/session/outline.py _call_preview). */
function callTarget(args: unknown): string {
  if (!args || typeof args !== "object" || Array.isArray(args)) return "";
  const o = args as { command?: unknown; path?: unknown };
  return String(o.path || o.command || "");
}

/** What tells one message of a session from another: its role and time (ms), and a tool
 *  result's call; none for a message of no time (pi's NaN, written as null). */
function messageKey(message: AgentMessage): string | undefined {
  if (typeof message.timestamp !== "number") return undefined;
  return `${message.role} ${message.timestamp} ${message.toolCallId ?? ""}`;
}

function errorOf(message: AgentMessage): string | undefined {
  if (message.stopReason === "aborted") return message.errorMessage || "aborted";
  if (message.stopReason === "error") return message.errorMessage || "the model call failed";
  return undefined;
}
