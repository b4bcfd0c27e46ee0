// How a session tree is laid out in a tree view, as the CLI's `pi-lsp tree` does: a chain
// of single children stays at one depth, and only a fork indents (one child item per branch).
// Without this a 500-entry session would be 500 levels deep. Pure: no vscode import.
import { TreeNode, TreeResult } from "./protocol";

export interface Placed {
  node: TreeNode;
  /** The first entry of a branch, under a fork: its children continue the branch. */
  head: boolean;
}

export class TreeShape {
  readonly byId = new Map<string, TreeNode>();
  private readonly children = new Map<string | null, TreeNode[]>();
  private readonly shown = new Set<string>();

  constructor(readonly tree: TreeResult) {
    for (const node of tree.nodes) this.byId.set(node.id, node);
    // A durable branch appends a childless `leaf` entry under its target: bookkeeping, not
    // conversation, and shown it would make every branch look like a fork. One that has
    // children (an older pi wrote under it) stays visible.
    const parents = new Set(tree.nodes.map((n) => n.parentId));
    for (const node of tree.nodes) {
      if (node.type === "leaf" && !parents.has(node.id)) continue;
      this.shown.add(node.id);
      // A parent that is not in the file makes the node a root (the server reports it too).
      const parent = node.parentId !== null && this.byId.has(node.parentId) ? node.parentId : null;
      const list = this.children.get(parent) ?? [];
      list.push(node);
      this.children.set(parent, list);
    }
  }

  /** False for entries the view leaves out (childless `leaf` markers). */
  visible(id: string): boolean {
    return this.shown.has(id);
  }

  childrenOf(id: string | null): TreeNode[] {
    return this.children.get(id) ?? [];
  }

  /** `start` and its single-child descendants, ending at a fork or a leaf. */
  chain(start: TreeNode): TreeNode[] {
    const out = [start];
    const seen = new Set([start.id]);
    for (let kids = this.childrenOf(start.id); kids.length === 1 && !seen.has(kids[0].id); kids = this.childrenOf(kids[0].id)) {
      out.push(kids[0]);
      seen.add(kids[0].id);
    }
    return out;
  }

  /** The items directly under the session. */
  roots(): Placed[] {
    return this.continuation(this.childrenOf(null));
  }

  /** The items under an entry item: a fork's branches, or the rest of a branch. */
  childrenOfItem(id: string, head: boolean): Placed[] {
    const kids = this.childrenOf(id);
    if (kids.length === 1 && !head) return []; // shown as its next sibling
    return this.continuation(kids);
  }

  /** True when the item has something to expand. */
  expandable(id: string, head: boolean): boolean {
    const n = this.childrenOf(id).length;
    return head ? n > 0 : n > 1;
  }

  private continuation(kids: TreeNode[]): Placed[] {
    if (kids.length === 1) return this.chain(kids[0]).map((node) => ({ node, head: false }));
    return kids.map((node) => ({ node, head: true }));
  }
}
