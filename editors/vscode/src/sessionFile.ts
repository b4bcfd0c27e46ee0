// What a session file holds past a point: whether a prompt sent to a server that stopped before
// its turn was seen to start was written (the file is the truth; the server's events may be lost).
import * as fs from "node:fs";
import * as vscode from "vscode";
import type { AgentMessage } from "./protocol";

/** The size in bytes of the session file `uri` now; 0 when it is not there (yet). */
export function sessionSize(uri: string): number {
  try {
    return fs.statSync(vscode.Uri.parse(uri).fsPath).size;
  } catch {
    return 0;
  }
}

// What a turn writes from the size noted to its prompt: a new file's header, the thinking level
// recorded on resuming and at the prompt's start, a compaction, then the user message (the
// prompt and its attached code, 100 000 characters a file). What follows is the turn's own, or
// another file's (one that replaced the session, of any size): not read.
const PROMPT_LINES = 8;
const PROMPT_BYTES = 16 << 20;
const CHUNK = 64 << 10;
/** What of a line tells its entry's id (`{"type":"message","id":"…"`), and a little more. */
const HEAD_BYTES = 256;

/** Whether the session file `uri`, in its first lines past byte `since`, holds a user message
 *  sent as `text`: the entry `id` where the server named it (pi.prompt's promptId). */
export function promptWrittenSince(uri: string, since: number, text: string, id?: string): boolean {
  let fd: number;
  try {
    fd = fs.openSync(vscode.Uri.parse(uri).fsPath, "r");
  } catch {
    return false; // gone or unreadable: nothing says it was written
  }
  try {
    if (id !== undefined) return entryStartsSince(fd, since, id);
    for (const line of linesFrom(fd, since)) {
      const entry = parsed(line);
      if (entry?.type === "message" && entry.message?.role === "user" && sentText(entry.message.content) === text) return true;
    }
    return false;
  } catch {
    return false; // unreadable (a folder now, say): nothing says it was written
  } finally {
    fs.closeSync(fd);
  }
}

/** The text a user message was sent with: its first text block (attached code follows in blocks of its own). */
export function sentText(content: AgentMessage["content"] | undefined): string | undefined {
  if (typeof content === "string") return content;
  return Array.isArray(content) ? content.find((b) => b?.type === "text")?.text : undefined;
}

/** Whether one of the first PROMPT_LINES lines of `fd` past byte `since` starting within
 *  PROMPT_BYTES of it is the entry `id`: by the line's head, so the prompt's own line, 16 MiB of
 *  code and images or more, is not read. */
function entryStartsSince(fd: number, since: number, id: string): boolean {
  // The server writes an entry's id second, after its type; text inside a line has its quotes escaped.
  const mark = `"id":${JSON.stringify(id)}`;
  for (const at of lineStarts(fd, since)) {
    const head = Buffer.alloc(HEAD_BYTES);
    const line = head.subarray(0, fs.readSync(fd, head, 0, HEAD_BYTES, at));
    const end = line.indexOf(0x0a);
    if ((end === -1 ? line : line.subarray(0, end)).includes(mark)) return true;
  }
  return false;
}

/** Where the first PROMPT_LINES lines of `fd` past byte `since` start, those within PROMPT_BYTES of it. */
function* lineStarts(fd: number, since: number): Generator<number> {
  yield since;
  const data = Buffer.allocUnsafe(CHUNK);
  let lines = 1;
  for (let at = since; at - since < PROMPT_BYTES;) {
    const got = fs.readSync(fd, data, 0, Math.min(CHUNK, since + PROMPT_BYTES - at), at);
    if (got === 0) return;
    for (let end = data.indexOf(0x0a); end !== -1 && end < got; end = data.indexOf(0x0a, end + 1)) {
      if (at + end + 1 - since >= PROMPT_BYTES || lines++ === PROMPT_LINES) return;
      yield at + end + 1;
    }
    at += got;
  }
}

/** The first PROMPT_LINES lines of the file `fd` past byte `since`, read while within
 *  PROMPT_BYTES of it: none when the file is shorter (another file now, which says nothing). */
function* linesFrom(fd: number, since: number): Generator<string> {
  const parts: Buffer[] = []; // the line read so far
  let lines = 0;
  for (let at = since; at - since < PROMPT_BYTES;) {
    const data = Buffer.allocUnsafe(Math.min(CHUNK, since + PROMPT_BYTES - at));
    const got = fs.readSync(fd, data, 0, data.length, at);
    if (got === 0) {
      const last = Buffer.concat(parts);
      if (last.length) yield last.toString("utf8"); // the last line, unended
      return;
    }
    at += got;
    const read = data.subarray(0, got);
    let start = 0;
    for (let end = read.indexOf(0x0a); end !== -1; end = read.indexOf(0x0a, start)) {
      parts.push(read.subarray(start, end));
      yield Buffer.concat(parts).toString("utf8");
      if (++lines === PROMPT_LINES) return;
      parts.length = 0;
      start = end + 1;
    }
    parts.push(read.subarray(start));
  }
}

function parsed(line: string): { type?: unknown; message?: AgentMessage } | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return value && typeof value === "object" ? (value as { type?: unknown; message?: AgentMessage }) : undefined;
  } catch {
    return undefined; // a blank or damaged line, as the server skips it
  }
}
