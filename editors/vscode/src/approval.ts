// Tool approval through `pi/approveTool`: a write or edit opens as a diff of the file's current
// text against the proposed one (both read-only virtual documents), bash shows its whole
// command. The question stays open until it is answered, in the notification or in the asking
// session's chat, or its turn ends or the server withdraws it: closing or hiding something is never an answer. VS Code
// cannot take back a message notification, so the question is a progress notification (which
// has no close button and goes when the answer comes from anywhere) with the answers as links.
import * as path from "node:path";
import * as vscode from "vscode";
import type { ChatPanels } from "./chatPanel";
import type { PiClient } from "./client";
import { ApprovalDecision, ApproveToolParams } from "./protocol";
import { Sessions } from "./sessions";
import { oneLine, plain, visible } from "./plainText";

export const APPROVAL_SCHEME = "pi-approval";
export const ACCEPT = "Accept";
export const ACCEPT_SESSION = "Accept for Session";
export const REJECT = "Reject";
export const APPROVAL_CHOICES = [ACCEPT, ACCEPT_SESSION, REJECT];
/** The command the notification's links run: `[id, choice]`. */
export const ANSWER_COMMAND = "piLsp.answerApproval";

/** The answers to `p`: "Accept for Session" only where the server remembers it (not for a
 * change to an editor's settings, asked every time); a server that does not say remembers it. */
export function approvalChoices(p: ApproveToolParams): string[] {
  return p.allowForSession === false ? [ACCEPT, REJECT] : APPROVAL_CHOICES;
}

/** What each answer covers where the server says (`sessionScope`): Accept for Session on a call
 * outside the workspace covers a folder and below, or the file alone. The path is the model's:
 * made visible, on one line. */
export function approvalNotes(p: ApproveToolParams): Record<string, string> | undefined {
  if (p.sessionScope == null || p.allowForSession === false) return undefined;
  const scope = p.sessionScope === p.path ? "this file only" : `files in ${oneLine(visible(p.sessionScope))} and below only`;
  return { [ACCEPT_SESSION]: scope };
}

export function decisionOf(choice: string | undefined): ApprovalDecision {
  return choice === ACCEPT ? "allow" : choice === ACCEPT_SESSION ? "allowSession" : "deny";
}

/** What the question says: the tool and what it touches, then the session's title (a repository
 * may have chosen it, so it never comes first). */
export function approvalMessage(p: ApproveToolParams, title: string, root?: string): string {
  const where = p.outsideWorkspace ? " (outside the workspace)" : "";
  const session = ` (session: ${visible(title)})`;
  if (p.tool === "bash") return `pi wants to run bash${where}: ${visible(p.command ?? "")}${session}`;
  const file = p.path ? (root && !path.relative(root, p.path).startsWith("..") ? path.relative(root, p.path) : p.path) : "a file";
  const verb = p.tool !== "write" ? p.tool : p.oldText == null ? "create" : "overwrite";
  return `pi wants to ${verb} ${visible(file)}${where}${session}`;
}

/** What the chat card shows under the question: the command or the diff, made visible. */
export function approvalDetail(p: ApproveToolParams): string | undefined {
  const detail = p.tool === "bash" ? p.command : p.diff;
  return detail == null ? undefined : visible(detail);
}

/**
 * The notification's text: the answers as command links, each with its note (`approvalNotes`),
 * first so that a toast cut to one line still shows them, then the question. The question and
 * the notes quote what the model wrote (a command, a path): a zero-width space breaks up every
 * `](` (it must not become a link that runs a command) and `$(` (VS Code would take `$(name)`
 * for an icon and drop it from the text).
 */
export function notificationText(id: string, message: string, choices: string[], notes: Record<string, string> = {}): string {
  const links = choices.map((choice) =>
    `[${choice}](command:${ANSWER_COMMAND}?${encodeURIComponent(JSON.stringify([id, choice]))})` +
    (notes[choice] ? ` (${plain(notes[choice])})` : ""));
  return `${links.join(" · ")} — ${plain(message)}`;
}

/** The two sides of proposed changes, served read-only under `pi-approval:`. */
export class ProposedTexts implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();

  set(uri: vscode.Uri, text: string): void {
    this.texts.set(uri.toString(), text);
  }

  delete(uri: vscode.Uri): void {
    this.texts.delete(uri.toString());
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "";
  }
}

export class Approvals {
  readonly texts = new ProposedTexts();
  private count = 0;
  /** Questions still open, by id: each resolves with its answer (undefined: none will come). */
  private readonly open = new Map<string, (choice: string | undefined) => void>();

  constructor(private readonly pi: PiClient, private readonly sessions: Sessions, private readonly chats: ChatPanels) {
    // A restarted server asks again if it needs to: the old one's questions (no turn end will
    // come for them) go, card and notification; so do those of a server stopped for good.
    const settleAll = () => [...this.open.values()].forEach((settle) => settle(undefined));
    pi.onStarted(settleAll);
    pi.onStopped(settleAll);
  }

  /** An answer from the notification or the chat card; only the first one counts. */
  answer(id: string, choice: string): void {
    this.open.get(id)?.(choice);
  }

  async approve(p: ApproveToolParams, token?: vscode.CancellationToken): Promise<{ decision: ApprovalDecision }> {
    const id = `approve-${++this.count}`;
    let settled = false;
    const answered = new Promise<string | undefined>((resolve) => this.open.set(id, (choice) => {
      settled = true;
      resolve(choice);
    }));
    // An aborted or failed turn waits for no answer any more: its question goes with it. Heard
    // from the start: the turn may end while the title is fetched or the diff opens. A
    // prompt's attachment goes only when the turn its message was queued behind was aborted
    // (queue_dropped): otherwise that message still waits, and runs as a turn of its own.
    const ended = this.pi.onTurn((n) => {
      const over = p.attachment ? n.event.type === "queue_dropped" : n.event.type === "agent_end" || n.event.type === "error";
      if (over && n.turnId === p.turnId) this.open.get(id)?.(undefined);
    });
    // The server cancels the request when it stops waiting (an abort): the question goes, even
    // where no turn event names it.
    const withdrawn = token?.onCancellationRequested(() => this.open.get(id)?.(undefined));
    let diff: vscode.Uri | undefined;
    try {
      const title = Sessions.title(await this.sessions.info(p.uri).catch(() => undefined), p.uri);
      const message = approvalMessage(p, title, vscode.workspace.workspaceFolders?.[0]?.uri.fsPath);
      if (!settled && p.path && p.newText !== undefined) diff = await this.showDiff(p, title);
      if (!settled) {
        const choices = approvalChoices(p);
        const notes = approvalNotes(p);
        this.chats.ask({ id, uri: p.uri, message, actions: choices, detail: approvalDetail(p), notes,
          answer: (choice) => this.answer(id, choice) });
        void vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: notificationText(id, message, choices, notes) }, () => answered);
      }
      return { decision: decisionOf(await answered) };
    } finally {
      this.open.delete(id);
      ended.dispose();
      withdrawn?.dispose();
      this.chats.settle(id);
      if (diff) await this.closeDiff(diff);
    }
  }

  /** Opens the diff, not over a chat (its card asks too); returns the proposed side's URI. The
   * model chose the file's name: it shows on one line and visible in the tab and the document's
   * path (a U+202E would turn the rest around, a line break fake another line). */
  private async showDiff(p: ApproveToolParams, title: string): Promise<vscode.Uri> {
    const name = oneLine(visible(path.basename(p.path ?? "file")));
    const base = `/${encodeURIComponent(p.toolCallId)}`;
    const before = vscode.Uri.from({ scheme: APPROVAL_SCHEME, path: `${base}/current/${name}` });
    const after = vscode.Uri.from({ scheme: APPROVAL_SCHEME, path: `${base}/proposed/${name}` });
    this.texts.set(before, p.oldText ?? "");
    this.texts.set(after, p.newText ?? "");
    const label = `${name}: ${p.oldText == null ? "new file" : "current ↔ proposed"} (pi: ${title})`;
    const chatColumns = new Set(this.chats.all().map((c) => c.panel.viewColumn));
    const column = vscode.window.tabGroups.all.map((g) => g.viewColumn).find((c) => !chatColumns.has(c)) ?? vscode.ViewColumn.Beside;
    await vscode.commands.executeCommand("vscode.diff", before, after, label, { preview: true, preserveFocus: true, viewColumn: column });
    return after;
  }

  private async closeDiff(after: vscode.Uri): Promise<void> {
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs)
      .filter((t) => (t.input as { modified?: vscode.Uri } | undefined)?.modified?.toString() === after.toString());
    if (tabs.length) await vscode.window.tabGroups.close(tabs);
    this.texts.delete(after);
    this.texts.delete(after.with({ path: after.path.replace("/proposed/", "/current/") }));
  }
}
