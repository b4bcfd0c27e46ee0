// The Sessions view: sessions, then their entries as the server lays them out (TreeShape). The current path is
// coloured and the leaf marked; everything shown comes from pi.listSessions and pi.getTree. The tree comes
// folded (the path's last rows, each branch off it one row): a folded row's rows are fetched when it opens,
// a page at a time, "earlier" rows by asking for a longer path, and the branches a fork with very many left
// out a page at a click.
import * as vscode from "vscode";
import type { PiClient } from "./client";
import { oneLine, shorten } from "./plainText";
import { BranchesAfter, RowsUnder, SessionChanged, SessionInfo, TreeNode, TreeResult } from "./protocol";
import { sameSession, Sessions, sessionKey } from "./sessions";
import { patchTree, TreeShape } from "./treeShape";

export class SessionItem extends vscode.TreeItem {
  readonly kind = "session";
  constructor(readonly info: SessionInfo, current: boolean) {
    super(Sessions.title(info, info.uri), vscode.TreeItemCollapsibleState.Collapsed);
    this.id = `session:${sessionKey(info.uri)}`;
    this.contextValue = "session";
    this.description = `${info.entryCount} entries · ${shortDate(oneLine(info.modified))}`;
    this.tooltip = new vscode.MarkdownString(
      [`**${plainMarkdown(this.label as string)}**`, "", `${info.entryCount} entries`,
        `created ${plainMarkdown(info.created)}`, `modified ${plainMarkdown(info.modified)}`,
        info.cwd ? `cwd ${plainMarkdown(info.cwd)}` : ""].filter(Boolean).join("  \n"));
    // The session commands default to is coloured like the current path.
    this.iconPath = new vscode.ThemeIcon(current ? "comment-discussion" : "comment", current ? new vscode.ThemeColor("charts.blue") : undefined);
  }
  get sessionUri(): string {
    return this.info.uri;
  }
}

/** What a "more" item stands for: the rest of a folded row's rows, or of the branches a fork left out
 * after a row (`start` of them shown); neither, the rows of the path before the window. */
export interface MoreOf {
  under?: string;
  after?: string;
  start?: number;
}

/** "… 2 more rows", "… 1 more branch", "… 3 earlier rows". */
function moreLabel(count: number, of: MoreOf): string {
  const one = count === 1;
  if (of.after !== undefined) return `… ${count} more ${one ? "branch" : "branches"}`;
  return `… ${count} ${of.under !== undefined ? "more" : "earlier"} ${one ? "row" : "rows"}`;
}

/** Rows not shown yet: a click shows more. */
export class MoreItem extends vscode.TreeItem {
  readonly kind = "more";
  constructor(readonly sessionUri: string, count: number, of: MoreOf = {}) {
    super(moreLabel(count, of), vscode.TreeItemCollapsibleState.None);
    this.id = JSON.stringify(["more", sessionKey(sessionUri), of.under ?? null, of.after ?? null]);
    this.contextValue = "more";
    this.iconPath = new vscode.ThemeIcon("ellipsis");
    this.command = { command: MORE_ROWS, title: "Show More", arguments: [{ uri: sessionUri, ...of }] };
  }
}

export class EntryItem extends vscode.TreeItem {
  readonly kind = "entry";
  constructor(
    readonly sessionUri: string,
    readonly node: TreeNode,
    leafRow: string | null,
    expandable: boolean,
    readonly shape: TreeShape, // the rows it was drawn from: the session's, or a folded row's
  ) {
    const leaf = node.id === leafRow;
    // The leaf mark and the label lead: at the side bar's default width the end of a row is cut.
    super([leaf ? "← leaf ·" : "", node.label ? `[${shorten(node.label)}]` : "", oneLine(node.preview || node.type)].filter(Boolean).join(" "),
      collapsed(expandable, node.onPath));
    // VS Code keeps the expansion state an id had and ignores collapsibleState after that, so
    // a branch that has just come onto the path (or a chain entry that has just become a fork)
    // would stay folded. The id says whether the item opens, so such an item is new to it.
    const fold = !expandable ? "" : node.onPath ? "open" : "fold";
    // As a JSON list: joined as text, entry `a` shown open (`a/open`) met an entry named `a/open`.
    this.id = JSON.stringify(["entry", sessionKey(sessionUri), node.id, fold]);
    // The role in contextValue lets package.json offer "Edit prompt" on user messages only.
    this.contextValue = `entry.${node.role ?? node.type}${node.onPath ? ".onPath" : ""}`;
    this.description = shorten(node.id);
    this.iconPath = new vscode.ThemeIcon(
      leaf ? "debug-stackframe-focused" : iconFor(node),
      node.onPath ? new vscode.ThemeColor("charts.blue") : new vscode.ThemeColor("disabledForeground"),
    );
    const facts = [`${plainMarkdown(node.id)} · ${plainMarkdown(node.role ?? node.type)}${node.onPath ? " · on the current path" : ""}`,
      node.label ? `label: **${plainMarkdown(shorten(node.label))}**` : "", plainMarkdown(node.timestamp ?? "")].filter(Boolean);
    this.tooltip = new vscode.MarkdownString(`${facts.join("  \n")}\n\n${plainMarkdown(node.preview)}`);
    // A click shows what the model would receive at this entry.
    this.command = { command: "piLsp.previewContext", title: "Preview Context", arguments: [{ uri: sessionUri, entryId: node.id }] };
  }
  get entryId(): string {
    return this.node.id;
  }
}

export type Item = SessionItem | EntryItem | MoreItem;

export const MORE_ROWS = "piLsp.showMoreRows";
/** Rows of the current path asked for at first (and added by each "earlier"), rows of a folded row per page. */
export const PATH_ROWS = 300;
export const PAGE_ROWS = 500;

interface Unfolded {
  total: number; // the folded row's `hidden` when fetched: another count means other rows
  rows: TreeNode[];
  shape: TreeShape;
}

/** The branches fetched after a row: kept while its `moreBranches` and `moreRows` are these. */
interface Branches extends Unfolded {
  made: number;
}

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
  private readonly limits = new Map<string, number>(); // path rows asked for, per session
  private readonly unfolded = new Map<string, Map<string, Promise<Unfolded>>>(); // per session, per folded row
  private readonly branches = new Map<string, Map<string, Branches>>(); // per session, the branches fetched after a row
  private readonly paging = new Set<string>(); // "more branches" pages on their way, per session and row
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
      pi.onStopped(() => this.refresh()), // nothing answers: the welcome text offers a restart
      sessions.onDidChangeCurrent(() => this.refresh(undefined, false)),
      vscode.commands.registerCommand(MORE_ROWS, (arg: { uri: string } & MoreOf) => this.more(arg.uri, arg)),
    );
  }

  /** Show more: earlier rows of the path (a longer path is fetched), the next page of a folded row, or of
   * the branches left out after a row. */
  async more(uri: string, { under, after, start = 0 }: MoreOf = {}): Promise<void> {
    const key = sessionKey(uri);
    if (after !== undefined) return this.moreBranches(uri, after, start);
    if (under === undefined) {
      this.limits.set(key, (this.limits.get(key) ?? PATH_ROWS) + PATH_ROWS);
      return this.refresh(uri);
    }
    const held = this.unfolded.get(key)?.get(under);
    if (!held) return;
    const unfolded = await held;
    const page = await this.page(uri, under, unfolded.rows.length);
    const now = this.unfolded.get(key);
    // Fetched again meanwhile (that answer stands), or counted otherwise (the rows changed while the
    // page came: fetched again from the top when shown): the page does not follow those rows.
    if (now?.get(under) === held) {
      if (page.total !== unfolded.total) now.delete(under);
      else {
        const rows = [...unfolded.rows, ...page.nodes];
        now.set(under, Promise.resolve({ total: page.total, rows, shape: rowsShape(rows) }));
      }
    }
    this.refresh(undefined, false);
  }

  private async moreBranches(uri: string, after: string, start: number): Promise<void> {
    const key = sessionKey(uri);
    const asking = JSON.stringify([key, after]);
    if (this.paging.has(asking)) return; // a second click while the page comes
    this.paging.add(asking);
    try {
      const held = start > 0 ? this.branches.get(key)?.get(after) : undefined;
      const args = { uri, after, start: held?.rows.length ?? 0, limit: PAGE_ROWS };
      const page = await (this.pi.call("pi.getTree", args) as unknown as Promise<BranchesAfter>);
      // The session's tree may have been fetched again meanwhile: the page goes with it, and is
      // shown while the counts of the row it follows agree.
      const fetched = this.branches.get(key) ?? new Map<string, Branches>();
      this.branches.set(key, fetched);
      if (held && (fetched.get(after) !== held || page.total !== held.total || page.rows !== held.made)) {
        fetched.delete(after); // they changed while this page came: the next click starts from the top
      } else {
        const rows = [...(held?.rows ?? []), ...page.nodes];
        fetched.set(after, { total: page.total, made: page.rows, rows, shape: rowsShape(rows) });
      }
    } finally {
      this.paging.delete(asking);
    }
    this.refresh(undefined, false);
  }

  private page(uri: string, under: string, start: number): Promise<RowsUnder> {
    return this.pi.call("pi.getTree", { uri, under, start, limit: PAGE_ROWS }) as unknown as Promise<RowsUnder>;
  }

  /** The rows folded under `node`, fetched when it first opens and kept while its count holds. */
  private rowsUnder(uri: string, node: TreeNode): Promise<Unfolded> {
    const key = sessionKey(uri);
    const held = this.unfolded.get(key) ?? new Map<string, Promise<Unfolded>>();
    this.unfolded.set(key, held);
    let rows = held.get(node.id);
    if (!rows) {
      rows = this.page(uri, node.id, 0).then((page) => ({ total: page.total, rows: page.nodes, shape: rowsShape(page.nodes) }));
      rows.catch(() => held.delete(node.id));
      held.set(node.id, rows);
    }
    return rows;
  }

  /**
   * Forget the branches fetched after a row whose counts changed (other branches now), and the rows
   * fetched under folded rows whose count changed (or that are gone).
   */
  private keepUnfolded(key: string, tree: TreeResult): void {
    const branches = this.branches.get(key);
    const hosts = new Map(tree.nodes.map((n) => [n.id, n]));
    for (const [id, fetched] of [...(branches ?? [])]) {
      const host = hosts.get(id);
      if (host?.moreBranches !== fetched.total || host.moreRows !== fetched.made) branches?.delete(id);
    }
    const held = this.unfolded.get(key);
    if (!held) return;
    const rows = [...tree.nodes, ...[...(branches?.values() ?? [])].flatMap((b) => b.rows)];
    const counts = new Map(rows.map((n) => [n.id, n.hidden]));
    for (const [id, rows] of [...held]) {
      void rows.then((r) => { if (counts.get(id) !== r.total) held.delete(id); }, () => held.delete(id));
    }
  }

  /**
   * Forget cached trees (one session's, or all) and redraw. Redraws are coalesced: a turn
   * appends many entries in a burst. Items have stable ids, so expansion state survives.
   */
  refresh(uri?: string, dropTrees = true): void {
    if (dropTrees) {
      for (const map of [this.shapes, this.trees, this.unfolded, this.branches]) {
        if (uri === undefined) map.clear();
        else map.delete(sessionKey(uri));
      }
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.changed.fire(undefined), 100);
  }

  /** A session changed: patch its tree when the change applies to the one held, else fetch. */
  private sessionChanged(e: SessionChanged): void {
    // Its file was cut short by another program and the session went on in e.uri: the tree held
    // for the old file is not that file's any more.
    if (e.relocatedFrom) this.refresh(e.relocatedFrom);
    const key = sessionKey(e.uri);
    const held = this.trees.get(key);
    const patched = held && e.tree ? patchTree(held, e.tree) : undefined;
    if (!patched) return this.refresh(e.uri);
    this.trees.set(key, patched);
    // A label entry labels a row that may be under a folded row, whose count stays: their rows
    // are fetched again. Other changes (a turn's entries under the leaf) keep them by count.
    if (e.tree?.rows.some((n) => n.type === "label")) {
      this.unfolded.delete(key);
      this.branches.delete(key);
    } else this.keepUnfolded(key, patched);
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
    if (item.kind === "more") return [];
    const uri = item.sessionUri;
    const shape = await this.shape(uri);
    const leafRow = shape.tree.leafRow;
    const fetched = this.branches.get(sessionKey(uri));
    // Each row, and after the last branch sent of a fork with more, those fetched and an item for the rest.
    const entries = (from: TreeShape, rows: TreeNode[]): Item[] => rows.flatMap((node) => {
      const entry = new EntryItem(uri, node, leafRow, from.expandable(node.id) || node.hidden > 0, from);
      if (!node.moreBranches) return [entry];
      const held = fetched?.get(node.id);
      const same = held?.total === node.moreBranches && held.made === node.moreRows; // counted alike: still those
      const shown = same ? held : undefined;
      const rest = node.moreBranches - (shown?.rows.length ?? 0);
      return [entry, ...(shown ? entries(shown.shape, shown.rows) : []),
        ...(rest > 0 ? [new MoreItem(uri, rest, { after: node.id, start: shown?.rows.length ?? 0 })] : [])];
    });
    if (item.kind === "session") {
      const earlier = shape.tree.earlier ? [new MoreItem(uri, shape.tree.earlier)] : [];
      return [...earlier, ...entries(shape, shape.roots())];
    }
    if (item.node.hidden > 0) {
      const unfolded = await this.rowsUnder(uri, item.node);
      const rest = unfolded.total - unfolded.rows.length;
      return [...entries(unfolded.shape, unfolded.shape.roots()), ...(rest > 0 ? [new MoreItem(uri, rest, { under: item.node.id })] : [])];
    }
    return entries(item.shape, item.shape.childrenOf(item.node.id));
  }

  private keepOnly(keys: Set<string>): void {
    for (const key of [...this.shapes.keys()]) if (!keys.has(key)) this.shapes.delete(key);
    for (const key of [...this.trees.keys()]) if (!keys.has(key)) this.trees.delete(key);
    for (const key of [...this.unfolded.keys()]) if (!keys.has(key)) this.unfolded.delete(key);
    for (const key of [...this.branches.keys()]) if (!keys.has(key)) this.branches.delete(key);
  }

  /** A row the view holds: in the tree, among the branches fetched after a row, or the rows fetched under a
   * folded row. */
  async node(uri: string, id: string): Promise<TreeNode | undefined> {
    const found = (await this.shape(uri)).byId.get(id);
    if (found) return found;
    for (const held of this.branches.get(sessionKey(uri))?.values() ?? []) {
      const node = held.shape.byId.get(id);
      if (node) return node;
    }
    for (const rows of this.unfolded.get(sessionKey(uri))?.values() ?? []) {
      const node = (await rows.catch(() => undefined))?.shape.byId.get(id);
      if (node) return node;
    }
    return undefined;
  }

  /** The session's tree, fetched once per change. */
  shape(uri: string): Promise<TreeShape> {
    const key = sessionKey(uri);
    let shape = this.shapes.get(key);
    if (!shape) {
      shape = this.pi.call("pi.getTree", { uri, limit: this.limits.get(key) ?? PATH_ROWS }).then((t: TreeResult) => {
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

/** The shape of rows fetched under a folded row: its own top level is theirs. */
function rowsShape(rows: TreeNode[]): TreeShape {
  return new TreeShape({ version: 0, leafId: null, leafRow: null, title: "", entries: 0, earlier: 0, nodes: rows });
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

/** Session text in a Markdown tooltip: on one line (`oneLine`), as plain text (no links, no emphasis). */
function plainMarkdown(s: string): string {
  return oneLine(s).replace(/[\\`*_{}[\]()#+\-.!<>|]/g, "\\$&");
}
