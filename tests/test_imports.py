"""The package's layers, read from its source: the core never imports the LSP side, and no two
modules import each other, through any chain (imports inside functions count; imports for type
checking only do not)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pi_lsp"
CORE = ("session", "context", "summarize", "agent")  # DESIGN.md: they never import pygls
LSP = ("pygls", "lsprotocol", "pi_lsp.server")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported(tree: ast.AST, modules: set[str]) -> set[str]:
    """The modules `tree` imports at run time: `from a import b` is `a.b` when that is a module."""
    found: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names
                         if f"{node.module}.{a.name}" in modules)
        stack.extend(ast.iter_child_nodes(node))
    return found


def import_graph() -> dict[str, set[str]]:
    sources = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(sources)
    return {name: imported(ast.parse(path.read_text("utf-8")), modules)
            for name, path in sources.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle among the package's own modules, as the chain that closes it, or None."""
    state: dict[str, int] = {}  # 1 on the current chain, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        chain = [start]
        branches = [iter(sorted(graph[start] & graph.keys() - {start}))]
        state[start] = 1
        while branches:
            step = next(branches[-1], None)
            if step is None:
                state[chain.pop()] = 2
                branches.pop()
            elif state.get(step) == 1:
                return [*chain[chain.index(step):], step]
            elif not state.get(step):
                state[step] = 1
                chain.append(step)
                branches.append(iter(sorted(graph[step] & graph.keys() - {step})))
    return None


def test_the_core_never_imports_the_lsp_side() -> None:
    graph = import_graph()
    wrong = sorted((name, target) for name, targets in graph.items()
                   if name.partition(".")[2].split(".")[0] in CORE for target in targets
                   if any(target == lsp or target.startswith(f"{lsp}.") for lsp in LSP))
    assert wrong == []


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_a_cycle_is_found() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
