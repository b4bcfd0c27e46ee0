// The Sessions view: sessions, then their entries as the server lays them out (TreeShape). The current path is
// coloured and the leaf marked; everything shown comes from pi.listSessions and pi.getTree.
import * as vscode from "vscode";
import type { PiClient } from "./client";
import { SessionChanged, SessionInfo, TreeNode, TreeResult } from "./protocol";
import { sameSession, Sessions, sessionKey } from "./sessions";
import { patchTree, TreeShape } from "./treeShape";

export class SessionItem extends vscode.TreeItem {
  readonly kind = "session";
  constructor(readonly info: SessionInfo, current: boolean) {
    super(Sessions.title(info, info.uri), vscode.TreeItemCollapsibleState.Collapsed);
    this.id = `session:${sessionKey(info.uri)}`;
    this.contextValue = "session";
    this.description = `${info.entryCount} entries · ${shortDate(info.modified)}`;
    this.tooltip = new vscode.MarkdownString(
      [`**${this.label as string}**`, "", `${info.entryCount} entries`, `created ${info.created}`,
        `modified ${info.modified}`, info.cwd ? `cwd \`${info.cwd}\`` : ""].filter(Boolean).join("  \n"));
    // The session commands default to is coloured like the current path.
    this.iconPath = new vscode.ThemeIcon(current ? "comment-discussion" : "comment", current ? new vscode.ThemeColor("charts.blue") : undefined);
  }
  get sessionUri(): string {
    return this.info.uri;
  }
}

export class EntryItem extends vscode.TreeItem {
  readonly kind = "entry";
  constructor(
    readonly sessionUri: string,
    readonly node: TreeNode,
    leafRow: string | null,
    expandable: boolean,
  ) {
    const leaf = node.id === leafRow;
    // The leaf mark and the label lead: at the side bar's default width the end of a row is cut.
    super([leaf ? "← leaf ·" : "", node.label ? `[${node.label}]` : "", node.preview || node.type].filter(Boolean).join(" "),
      collapsed(expandable, node.onPath));
    // VS Code keeps the expansion state an id had and ignores collapsibleState after that, so
    // a branch that has just come onto the path (or a chain entry that has just become a fork)
    // would stay folded. The id says whether the item opens, so such an item is new to it.
    const fold = !expandable ? "" : node.onPath ? "/open" : "/fold";
    this.id = `entry:${sessionKey(sessionUri)}#${node.id}${fold}`;
    // The role in contextValue lets package.json offer "Edit prompt" on user messages only.
    this.contextValue = `entry.${node.role ?? node.type}${node.onPath ? ".onPath" : ""}`;
    this.description = node.id;
    this.iconPath = new vscode.ThemeIcon(
      leaf ? "debug-stackframe-focused" : iconFor(node),
      node.onPath ? new vscode.ThemeColor("charts.blue") : new vscode.ThemeColor("disabledForeground"),
    );
    const facts = [`\`${node.id}\` · ${node.role ?? node.type}${node.onPath ? " · on the current path" : ""}`,
      node.label ? `label: **${escapeMarkdown(node.label)}**` : "", node.timestamp ?? ""].filter(Boolean);
    this.tooltip = new vscode.MarkdownString(`${facts.join("  \n")}\n\n${escapeMarkdown(node.preview)}`);
    // A click shows what the model would receive at this entry.
    this.command = { command: "piLsp.previewContext", title: "Preview Context", arguments: [{ uri: sessionUri, entryId: node.id }] };
  }
  get entryId(): string {
    return this.node.id;
  }
}

export type Item = SessionItem | EntryItem;

/**
 * The context key the view's welcome texts read: unset until the server first answers (the
 * view says it is starting, never that there are no sessions), then `ready` or `failed`.
 */
export const SESSIONS_STATE = "piLsp.sessionsState";

export class SessionsView implements vscode.TreeDataProvider<Item>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<Item | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly shapes = new Map<string, Promise<TreeShape>>();
  private readonly trees = new Map<string, TreeResult>(); // the last tree fetched or patched
  private readonly disposables: vscode.Disposable[] = [this.changed];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private state: "ready" | "failed" | undefined;

  constructor(private readonly pi: PiClient, private readonly sessions: Sessions) {
    this.disposables.push(
      // The list changed (a file came or went): the trees held still hold, each patched by its
      // own pi/sessionChanged; those of sessions no longer listed go at the next listing.
      pi.onSessionsChanged(() => this.refresh(undefined, false)),
      pi.onSessionChanged((e) => this.sessionChanged(e)),
      pi.onStarted(() => this.refresh()),
      sessions.onDidChangeCurrent(() => this.refresh(undefined, false)),
    );
  }

  /**
   * Forget cached trees (one session's, or all) and redraw. Redraws are coalesced: a turn
   * appends many entries in a burst. Items have stable ids, so expansion state survives.
   */
  refresh(uri?: string, dropTrees = true): void {
    if (dropTrees) {
      if (uri === undefined) this.shapes.clear();
      else this.shapes.delete(sessionKey(uri));
      if (uri === undefined) this.trees.clear();
      else this.trees.delete(sessionKey(uri));
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.changed.fire(undefined), 100);
  }

  /** A session changed: patch its tree when the change applies to the one held, else fetch. */
  private sessionChanged(e: SessionChanged): void {
    const key = sessionKey(e.uri);
    const held = this.trees.get(key);
    const patched = held && e.tree ? patchTree(held, e.tree) : undefined;
    if (!patched) return this.refresh(e.uri);
    this.trees.set(key, patched);
    this.shapes.set(key, Promise.resolve(new TreeShape(patched)));
    this.refresh(undefined, false);
  }

  getTreeItem(item: Item): vscode.TreeItem {
    return item;
  }

  async getChildren(item?: Item): Promise<Item[]> {
    if (item === undefined) {
      const current = this.sessions.current();
      let listed: SessionInfo[];
      try {
        listed = await this.sessions.list();
      } catch {
        this.setState("failed"); // the welcome text offers the output and a restart
        return [];
      }
      this.setState("ready");
      this.keepOnly(new Set(listed.map((s) => sessionKey(s.uri))));
      return listed.map((s) => new SessionItem(s, sameSession(s.uri, current)));
    }
    const uri = item.sessionUri;
    const shape = await this.shape(uri);
    const rows = item.kind === "session" ? shape.roots() : shape.childrenOf(item.node.id);
    return rows.map((node) => new EntryItem(uri, node, shape.tree.leafRow, shape.expandable(node.id)));
  }

  private keepOnly(keys: Set<string>): void {
    for (const key of [...this.shapes.keys()]) if (!keys.has(key)) this.shapes.delete(key);
    for (const key of [...this.trees.keys()]) if (!keys.has(key)) this.trees.delete(key);
  }

  /** The session's tree, fetched once per change. */
  shape(uri: string): Promise<TreeShape> {
    const key = sessionKey(uri);
    let shape = this.shapes.get(key);
    if (!shape) {
      shape = this.pi.call("pi.getTree", { uri }).then((t: TreeResult) => {
        this.trees.set(key, t);
        return new TreeShape(t);
      });
      shape.catch(() => this.shapes.delete(key));
      this.shapes.set(key, shape);
    }
    return shape;
  }

  private setState(state: "ready" | "failed"): void {
    if (state !== this.state) void vscode.commands.executeCommand("setContext", SESSIONS_STATE, (this.state = state));
  }

  dispose(): void {
    clearTimeout(this.timer);
    for (const d of this.disposables) d.dispose();
  }
}

function collapsed(expandable: boolean, onPath: boolean): vscode.TreeItemCollapsibleState {
  if (!expandable) return vscode.TreeItemCollapsibleState.None;
  // The branch the leaf is on opens by itself; abandoned branches stay folded.
  return onPath ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed;
}

function iconFor(node: TreeNode): string {
  switch (node.role ?? node.type) {
    case "user": return "account";
    case "assistant": return "hubot";
    case "toolResult": return "tools";
    case "bashExecution": return "terminal";
    case "branchSummary": case "branch_summary": return "git-merge";
    case "compactionSummary": case "compaction": return "fold";
    case "model_change": return "symbol-class";
    case "thinking_level_change": return "lightbulb";
    case "label": return "tag";
    case "session_info": return "info";
    case "leaf": return "arrow-right";
    default: return "circle-small";
  }
}

function shortDate(iso: string): string {
  return iso.replace("T", " ").slice(0, 16);
}

function escapeMarkdown(s: string): string {
  return s.replace(/[\\`*_{}[\]()#+\-.!<>|]/g, "\\$&");
}
