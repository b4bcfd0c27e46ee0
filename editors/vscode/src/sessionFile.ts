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

/** Whether the session file `uri`, past byte `since`, holds a user message sent as `text`. */
export function promptWrittenSince(uri: string, since: number, text: string): boolean {
  let appended: string;
  try {
    appended = readFrom(vscode.Uri.parse(uri).fsPath, since);
  } catch {
    return false; // gone or unreadable: nothing says it was written
  }
  return appended.split("\n").some((line) => {
    const entry = parsed(line);
    return entry?.type === "message" && entry.message?.role === "user" && sentText(entry.message.content) === text;
  });
}

/** The text a user message was sent with: its first text block (attached code follows in blocks of its own). */
export function sentText(content: AgentMessage["content"] | undefined): string | undefined {
  if (typeof content === "string") return content;
  return Array.isArray(content) ? content.find((b) => b?.type === "text")?.text : undefined;
}

function readFrom(file: string, since: number): string {
  const fd = fs.openSync(file, "r");
  try {
    // Shorter than it was: another file now, which says nothing of the prompt (nothing read).
    const buffer = Buffer.alloc(Math.max(0, fs.fstatSync(fd).size - since));
    let read = 0;
    while (read < buffer.length) {
      const got = fs.readSync(fd, buffer, read, buffer.length - read, since + read);
      if (got === 0) break;
      read += got;
    }
    return buffer.subarray(0, read).toString("utf8");
  } finally {
    fs.closeSync(fd);
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
