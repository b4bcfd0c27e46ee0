// Rewinding files: how the workspace differs from the state recorded at an entry, shown as a
// read-only `pi-files:` diff document, then a question that leaves it in view, the restore, and
// an Undo button.
// The server keeps the snapshots (pi.fileChanges / pi.restoreFiles); this only asks and shows.
import * as vscode from "vscode";
import type { PiClient } from "./client";
import type { FileChange, LeftAlone, RestoreResult } from "./protocol";
import { oneLine, plain, shorten } from "./plainText";

export const FILES_SCHEME = "pi-files";

/** The path is the tab's title: the session wrote the id, so it is shown on one line and cut
 * there (`shorten`); the query keeps the whole id for the request. */
export function filesUri(session: string, entryId: string): vscode.Uri {
  const query = new URLSearchParams({ session, entry: entryId });
  return vscode.Uri.from({ scheme: FILES_SCHEME, path: `/files @ ${shorten(entryId).replace(/[/\\]/g, "-")}.diff`, query: query.toString() });
}

/** One unified diff: `-` lines are the files now, `+` lines what a restore brings back. A file
 * without one is named on one line: a workspace's path may hold a line break. A carriage return
 * in a file's line is spelled: VS Code breaks a line at one, which would let the file write a
 * line of its own (a "left alone" line, another file's header). */
export function diffText(files: FileChange[]): string {
  return files.map((f) => f.diff.replace(/\r(?!\n)/g, "\\r") || `${oneLine(`${f.status}: ${f.path}`)}\n`).join("");
}

// Why a path is left alone when the server says no more (the CLI's words, pi_lsp/cli_changes.py).
const SKIPPED = "ignored, unreadable, or too large to snapshot";
const REFUSED = "under .git/ or .pi/, or behind a symlink";
const UNRECORDED = "a git repository of its own, whose changes are not recorded or restored";

/** The paths a restore (or its diff) leaves alone, each once with why, one line each: the
 * session's workspace named them. */
export function leftAlone(result: LeftAlone): string[] {
  const why = result.why ?? {};
  const reasons = new Map<string, string>();
  const add = (path: string, reason: string) => { if (!reasons.has(path)) reasons.set(path, reason); };
  // Own keys only: a path may be named `constructor`.
  for (const path of result.skipped ?? []) add(path, Object.hasOwn(why, path) ? why[path] : SKIPPED);
  for (const path of result.refused ?? []) add(path, REFUSED);
  for (const path of result.unrecorded ?? []) add(path, UNRECORDED);
  return [...reasons].map(([path, reason]) => oneLine(`left alone (${reason}): ${path}`));
}

/** What a restore (of an entry's files, or undone: `entryId` null) says; files open in the
 * editor were changed there (undoable) and wait to be saved. The session wrote the id: it is
 * shown on one line and cut (`shorten`), so that it cannot make a message say something else. */
export function restoredMessage(result: RestoreResult, entryId: string | null): string {
  const open = result.inEditor?.length ? `; ${result.inEditor.length} open in the editor, not saved` : "";
  const alone = leftAlone(result).length;
  const left = alone ? `; ${alone} left alone${entryId === null ? "" : ", see the diff"}` : "";
  return entryId === null
    ? `pi: undid the restore (${result.files.length} file(s) back as they were${open}${left}).`
    : `pi: restored ${result.files.length} file(s) to entry ${shorten(entryId)}${open}${left}.`;
}

export class FilesDiffProvider implements vscode.TextDocumentContentProvider {
  constructor(private readonly pi: PiClient) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const query = new URLSearchParams(uri.query);
    const entryId = query.get("entry") ?? "";
    const shown = oneLine(entryId); // the session wrote it: it must not fake a line
    try {
      const changes = await this.pi.call("pi.fileChanges", { uri: query.get("session") ?? "", entryId });
      if (!changes.available) return `# No recorded files at ${shown}\n\n${changes.reason ?? ""}\n`;
      const files = changes.files ?? [];
      const alone = leftAlone(changes);
      if (!files.length && !alone.length) return `# The files already match entry ${shown}\n`;
      return diffText(files) + alone.map((line) => `${line}\n`).join("");
    } catch (error) {
      return `# No diff\n\n${error instanceof Error ? error.message : String(error)}\n`;
    }
  }
}

export class Rewinder {
  /** Session uri -> the undo id of the last restore made from this window. */
  private readonly undoIds = new Map<string, string>();

  constructor(private readonly pi: PiClient) {}

  /** Show the diff to `entryId`'s files, ask, restore; the message after it offers Undo. */
  async offer(uri: string, entryId: string, lead = ""): Promise<RestoreResult | undefined> {
    const changes = await this.pi.call("pi.fileChanges", { uri, entryId });
    if (!changes.available) {
      void vscode.window.showInformationMessage(plain(`pi: no files recorded at entry ${shorten(entryId)} (${changes.reason ?? "unavailable"}).`));
      return;
    }
    const files = changes.files ?? [];
    const alone = leftAlone(changes).length;
    if (files.length === 0 && alone === 0) {
      void vscode.window.showInformationMessage(plain(`pi: the files already match entry ${shorten(entryId)}.`));
      return;
    }
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(filesUri(uri, entryId)), { preview: true });
    if (files.length === 0) {
      void vscode.window.showInformationMessage(
        plain(`pi: nothing to restore to entry ${shorten(entryId)}; ${alone} file(s) left alone, listed in the diff.`));
      return;
    }
    // Not modal: a dialog would cover the diff it asks about. Closing the question restores nothing.
    const go = await vscode.window.showWarningMessage(
      plain(`${lead}Restore ${files.length} file(s) to entry ${shorten(entryId)}? The diff shows what changes (- now, + then).`), "Restore", "Cancel");
    if (go !== "Restore") return;
    const result = await this.pi.call("pi.restoreFiles", { uri, entryId }).catch((error: unknown) => {
      this.keepUndoId(uri, error);
      throw error;
    });
    this.undoIds.set(uri, result.undoId);
    void vscode.window.showInformationMessage(plain(restoredMessage(result, entryId)), "Undo")
      .then((choice) => (choice === "Undo" ? this.undo(uri) : undefined))
      .then(undefined, (error) => vscode.window.showErrorMessage(plain(`pi: ${error instanceof Error ? error.message : String(error)}`)));
    return result;
  }

  /** A restore stopped part-way answers its undo id as the error's data (the message, the
   * server's words, says so too): Undo then undoes the part it did. */
  private keepUndoId(uri: string, error: unknown): void {
    const data: unknown = (error as { data?: unknown } | null)?.data;
    const undoId = (data as { undoId?: unknown } | null)?.undoId;
    if (typeof undoId === "string") this.undoIds.set(uri, undoId);
  }

  /** Put back the files as they were before the last restore of this session. */
  async undo(uri: string): Promise<RestoreResult | undefined> {
    const undoId = this.undoIds.get(uri);
    if (!undoId) {
      void vscode.window.showInformationMessage("pi: no restore of files to undo in this session.");
      return;
    }
    const result = await this.pi.call("pi.restoreFiles", { uri, undoId });
    this.undoIds.delete(uri);
    void vscode.window.showInformationMessage(plain(restoredMessage(result, null)));
    return result;
  }
}
