// Tool approval through `pi/approveTool`: a write or edit opens as a diff of the file's current
// text against the proposed one (both read-only virtual documents), bash shows its whole
// command. The answer comes from the notification or the asking session's chat panel,
// whichever is first; no answer is a denial.
import * as path from "node:path";
import * as vscode from "vscode";
import type { ChatPanels } from "./chatPanel";
import { ApprovalDecision, ApproveToolParams } from "./protocol";
import { Sessions } from "./sessions";

export const APPROVAL_SCHEME = "pi-approval";
export const ACCEPT = "Accept";
export const ACCEPT_SESSION = "Accept for Session";
export const REJECT = "Reject";
export const APPROVAL_CHOICES = [ACCEPT, ACCEPT_SESSION, REJECT];

export function decisionOf(choice: string | undefined): ApprovalDecision {
  return choice === ACCEPT ? "allow" : choice === ACCEPT_SESSION ? "allowSession" : "deny";
}

/** What the question says: the session's title, the tool and what it touches. */
export function approvalMessage(p: ApproveToolParams, title: string, root?: string): string {
  const where = p.outsideWorkspace ? " (outside the workspace)" : "";
  if (p.tool === "bash") return `pi (${title}) wants to run bash${where}: ${p.command ?? ""}`;
  const file = p.path ? (root && !path.relative(root, p.path).startsWith("..") ? path.relative(root, p.path) : p.path) : "a file";
  const verb = p.tool !== "write" ? p.tool : p.oldText == null ? "create" : "overwrite";
  return `pi (${title}) wants to ${verb} ${file}${where}`;
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

  constructor(private readonly sessions: Sessions, private readonly chats: () => ChatPanels | undefined) {}

  async approve(p: ApproveToolParams): Promise<{ decision: ApprovalDecision }> {
    const title = Sessions.title(await this.sessions.info(p.uri).catch(() => undefined), p.uri);
    const message = approvalMessage(p, title, vscode.workspace.workspaceFolders?.[0]?.uri.fsPath);
    const diff = p.path && p.newText !== undefined ? await this.showDiff(p, title) : undefined;
    const id = `approve-${++this.count}`;
    const panel = this.chats()?.get(p.uri);
    try {
      const answers: Thenable<string | undefined>[] = [
        vscode.window.showWarningMessage(message, ...APPROVAL_CHOICES),
      ];
      if (panel) answers.push(panel.askApproval(id, message, APPROVAL_CHOICES, p.tool === "bash" ? p.command : p.diff));
      return { decision: decisionOf(await Promise.race(answers)) };
    } finally {
      panel?.post({ type: "approvalDone", id });
      if (diff) await this.closeDiff(diff);
    }
  }

  /** Opens the diff beside the editor; returns the proposed side's URI. */
  private async showDiff(p: ApproveToolParams, title: string): Promise<vscode.Uri> {
    const name = path.basename(p.path ?? "file");
    const base = `/${encodeURIComponent(p.toolCallId)}`;
    const before = vscode.Uri.from({ scheme: APPROVAL_SCHEME, path: `${base}/current/${name}` });
    const after = vscode.Uri.from({ scheme: APPROVAL_SCHEME, path: `${base}/proposed/${name}` });
    this.texts.set(before, p.oldText ?? "");
    this.texts.set(after, p.newText ?? "");
    const label = `${name}: ${p.oldText == null ? "new file" : "current ↔ proposed"} (pi: ${title})`;
    await vscode.commands.executeCommand("vscode.diff", before, after, label, { preview: true, preserveFocus: true });
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
