// The server's tree rows (pi.getTree, laid out by pi_lsp/session/layout.py) as a VS Code tree.
// No layout is decided here, depth and head come from the server; only VS Code's nesting:
// the rows of a chain are siblings, the rest of a branch are the children of its first row
// (its head), and a fork's branches are the children of its last row. Nesting is relative to
// the rows held: a head whose fork is not among them (the fork is before the window, or it is
// the folded row whose rows these are) is at the top, so every row is reachable from roots().
// Pure: no vscode import.
import { TreeDelta, TreeNode, TreeResult } from "./protocol";

export class TreeShape {
  readonly byId = new Map<string, TreeNode>();
  private readonly children = new Map<string | null, TreeNode[]>();

  constructor(readonly tree: TreeResult) {
    const headAt: (string | null)[] = []; // the branch each depth's rows continue
    const lastAt: string[] = []; // the latest row at each depth: before deeper heads, a fork
    for (const node of tree.nodes) {
      this.byId.set(node.id, node);
      const parent = (node.head ? lastAt[node.depth - 1] : headAt[node.depth]) ?? null;
      if (node.head) headAt[node.depth] = node.id;
      lastAt[node.depth] = node.id;
      const list = this.children.get(parent) ?? [];
      list.push(node);
      this.children.set(parent, list);
    }
  }

  /** The items directly under the session. */
  roots(): TreeNode[] {
    return this.childrenOf(null);
  }

  /** The items under an entry item: the rest of its branch, or a fork's branches. */
  childrenOf(id: string | null): TreeNode[] {
    return this.children.get(id) ?? [];
  }

  expandable(id: string): boolean {
    return this.childrenOf(id).length > 0;
  }
}

/** The tree after a pi/sessionChanged change, or undefined when it is for another version. */
export function patchTree(tree: TreeResult, delta: TreeDelta): TreeResult | undefined {
  if (tree.version !== delta.base) return undefined;
  const { base: _base, start, delete: count, rows, ...rest } = delta;
  return { ...rest, nodes: [...tree.nodes.slice(0, start), ...rows, ...tree.nodes.slice(start + count)] };
}
