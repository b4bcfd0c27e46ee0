// No import cycle among the extension's modules (type-only imports count: a cycle of types is
// still two files that cannot be understood one without the other).
"use strict";
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");

const SRC = path.join(__dirname, "..", "src");

/** Every .ts module under `dir` → the modules it imports (relative imports only). */
function importGraph(dir) {
  const graph = new Map();
  for (const file of fs.readdirSync(dir, { recursive: true })) {
    if (!file.endsWith(".ts")) continue;
    const from = path.join(dir, file);
    const text = fs.readFileSync(from, "utf8");
    const targets = new Set();
    for (const match of text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+["'](\.{1,2}\/[^"']+)["']/gm)) {
      targets.add(path.resolve(path.dirname(from), match[1]) + ".ts");
    }
    graph.set(from, targets);
  }
  return graph;
}

/** One cycle as a list of modules, or null. */
function findCycle(graph) {
  const state = new Map(); // module → "open" while on the stack, "done" after
  const stack = [];
  function visit(node) {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") return [...stack.slice(stack.indexOf(next)), next];
      if (!state.has(next)) {
        const found = visit(next);
        if (found) return found;
      }
    }
    stack.pop();
    state.set(node, "done");
    return null;
  }
  for (const node of graph.keys()) {
    if (!state.has(node)) {
      const found = visit(node);
      if (found) return found;
    }
  }
  return null;
}

test("the check finds a cycle when there is one", () => {
  const graph = new Map([["a", new Set(["b"])], ["b", new Set(["c"])], ["c", new Set(["a"])], ["d", new Set(["a"])]]);
  assert.deepEqual(findCycle(graph), ["a", "b", "c", "a"]);
  assert.equal(findCycle(new Map([["a", new Set(["b"])], ["b", new Set()]])), null);
});

test("no import cycle in the extension's sources", () => {
  const graph = importGraph(SRC);
  assert.ok(graph.size > 10, "the sources were read");
  assert.ok([...graph.values()].some((targets) => targets.size > 0), "imports were found");
  const cycle = findCycle(graph);
  assert.equal(cycle && cycle.map((f) => path.relative(SRC, f)).join(" → "), null);
});
