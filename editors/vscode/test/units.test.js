// The pure pieces, without a server: tree layout, the transcript reducer, settings, URIs.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vm = require("node:vm");
const vscode = require("vscode");
const ext = require("../out/extension.js");

const row = (id, depth, head, extra = {}) => ({ id, parentId: null, depth, head, type: "message", role: "user", preview: id, label: null, timestamp: null, onPath: false, ...extra });

test("TreeShape nests the server's rows: a chain as siblings, a branch under its head, branches under the fork", () => {
  //  a - b - c < d - e      (c forks; the server sends the rows in this order)
  //            < f - g
  const shape = new ext.TreeShape({ leafId: "e", leafRow: "e", title: "t", entries: 7, nodes: [
    row("a", 0, false), row("b", 0, false), row("c", 0, false),
    row("d", 1, true), row("e", 1, false), row("f", 1, true), row("g", 1, false),
  ] });
  assert.deepEqual(shape.roots().map((n) => n.id), ["a", "b", "c"]);
  assert.equal(shape.expandable("b"), false);
  assert.deepEqual(shape.childrenOf("c").map((n) => [n.id, n.head]), [["d", true], ["f", true]]);
  assert.deepEqual(shape.childrenOf("d").map((n) => n.id), ["e"]);
  assert.deepEqual(shape.childrenOf("a"), []);
  // A head that forks at once: its branches are its own children. Several roots are heads.
  const nested = new ext.TreeShape({ leafId: null, leafRow: null, title: "t", entries: 6, nodes: [
    row("x", 0, true), row("x1", 1, true), row("x2", 1, true), row("x3", 1, false), row("y", 0, true), row("y1", 0, false),
  ] });
  assert.deepEqual(nested.roots().map((n) => n.id), ["x", "y"]);
  assert.deepEqual(nested.childrenOf("x").map((n) => n.id), ["x1", "x2"]);
  assert.deepEqual(nested.childrenOf("x2").map((n) => n.id), ["x3"]);
  assert.deepEqual(nested.childrenOf("y").map((n) => n.id), ["y1"]);
});

test("TreeShape: a head whose fork is not among the rows held is at the top, not lost", () => {
  // The window starts at a branch's head (its fork is among the earlier rows): the path was gone.
  const path = ["c1", "c2", "c3"].map((id) => row(id, 1, false));
  const window = new ext.TreeShape({ leafId: "c3", leafRow: "c3", title: "t", entries: 17, earlier: 13, nodes: [row("c0", 1, true), ...path] });
  assert.deepEqual(window.roots().map((n) => n.id), ["c0"]);
  assert.deepEqual(window.childrenOf("c0").map((n) => n.id), ["c1", "c2", "c3"]);
  // A folded row that forks at once (a2 < a3 / x0 - x1): its page starts with the branches' heads.
  const page = new ext.TreeShape({ leafId: null, leafRow: null, title: "", entries: 0, earlier: 0, nodes: [
    row("a3", 1, true), row("x0", 1, true), row("x1", 1, false),
  ] });
  assert.deepEqual(page.roots().map((n) => n.id), ["a3", "x0"]);
  assert.deepEqual(page.childrenOf("x0").map((n) => n.id), ["x1"]);
});

test("TreeShape: every row of any list of rows is reachable from roots(), once", () => {
  let seed = 7;
  const random = (n) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  for (let round = 0; round < 2000; round++) {
    const nodes = Array.from({ length: 1 + random(12) }, (_, i) => row(`r${i}`, random(4), random(2) === 0));
    const shape = new ext.TreeShape({ leafId: null, leafRow: null, title: "", entries: 0, earlier: 0, nodes });
    const reached = [];
    const walk = (rows) => { for (const n of rows) { reached.push(n.id); walk(shape.childrenOf(n.id)); } };
    walk(shape.roots());
    assert.deepEqual(reached.sort(), nodes.map((n) => n.id).sort(), JSON.stringify(nodes.map((n) => [n.depth, n.head])));
  }
});

test("a \"more\" item counts one row or branch in the singular (it said \"… 1 more rows\")", () => {
  const label = (count, of) => new ext.MoreItem("file:///s.jsonl", count, of).label;
  assert.deepEqual([label(1, { under: "b" }), label(1, { after: "b" }), label(1), label(2, { after: "b" }), label(3)],
    ["… 1 more row", "… 1 more branch", "… 1 earlier row", "… 2 more branches", "… 3 earlier rows"]);
});

test("patchTree applies a pi/sessionChanged change to the version it is for, and only to it", () => {
  const tree = { version: 3, leafId: "b", leafRow: "b", title: "t", entries: 2, nodes: [row("a", 0, false), row("b", 0, false)] };
  const delta = { base: 3, version: 4, leafId: "c", leafRow: "c", title: "t", entries: 3, start: 2, delete: 0, rows: [row("c", 0, false)] };
  assert.deepEqual(ext.patchTree(tree, delta), { version: 4, leafId: "c", leafRow: "c", title: "t", entries: 3, nodes: [row("a", 0, false), row("b", 0, false), row("c", 0, false)] });
  const replace = { ...delta, start: 1, delete: 1, rows: [row("x", 1, true), row("y", 1, true)] };
  assert.deepEqual(ext.patchTree(tree, replace).nodes.map((n) => n.id), ["a", "x", "y"]);
  assert.equal(ext.patchTree(tree, { ...delta, base: 2 }), undefined, "a version was missed: fetch again");
});

test("Transcript folds streamed deltas by content index, and the final message wins", () => {
  const t = new ext.Transcript();
  t.load([{ entryId: "u1", role: "user", tokens: 3, message: { role: "user", content: "hello" } }]);
  t.apply({ type: "agent_start" });
  assert.equal(t.busy, true);
  const [id] = t.apply({ type: "message_start", message: { role: "assistant", content: [] } });
  t.apply({ type: "message_update", deltas: [
    { type: "thinking_delta", contentIndex: 0, delta: "hmm " },
    { type: "thinking_delta", contentIndex: 0, delta: "ok" },
    { type: "block_end", contentIndex: 0 },
    { type: "text_delta", contentIndex: 1, delta: "Hi " },
    { type: "toolcall_delta", contentIndex: 2, delta: '{"path":' },
  ] });
  t.apply({ type: "message_update", deltas: [{ type: "text_delta", contentIndex: 1, delta: "there" }, { type: "toolcall_delta", contentIndex: 2, delta: '"a.py"}' }] });
  let block = t.block(id);
  assert.equal(block.streaming, true);
  assert.deepEqual(block.parts.map((p) => p.type), ["thinking", "text", "toolCall"]);
  assert.equal(block.parts[0].text, "hmm ok");
  assert.equal(block.parts[1].text, "Hi there");
  assert.equal(block.parts[2].args, '{"path":"a.py"}');
  t.apply({ type: "message_end", message: { role: "assistant", model: "m", stopReason: "toolUse", content: [
    { type: "thinking", thinking: "hmm ok" }, { type: "text", text: "Hi there" }, { type: "toolCall", id: "t1", name: "read", arguments: { path: "a.py" } },
  ] } });
  block = t.block(id);
  assert.equal(block.streaming, false);
  assert.equal(block.parts[2].name, "read");
  assert.deepEqual(t.apply({ type: "tool_execution_start", toolCallId: "t1", toolName: "read", args: {} }), [id]);
  assert.equal(t.tools.get("t1").running, true);
  t.apply({ type: "tool_execution_end", toolCallId: "t1", toolName: "read", isError: false, result: { role: "toolResult", content: [{ type: "text", text: "print(1)" }] } });
  assert.deepEqual(t.tools.get("t1"), { running: false, text: "print(1)", isError: false });
  const html = ext.renderBlock(block, t.tools);
  assert.match(html, /<summary>read <code>a.py<\/code> · done<\/summary>/);
  assert.match(html, /path: a.py/);
  assert.match(html, /print\(1\)/);
  t.apply({ type: "agent_end", messages: [] });
  assert.equal(t.busy, false);
});

test("Transcript: an edit's replacements (pi 1.6's `edits`) read as text, a field a line, as oldText/newText did", () => {
  const t = new ext.Transcript();
  t.apply({ type: "agent_start" });
  const [id] = t.apply({ type: "message_start", message: { role: "assistant", content: [] } });
  t.apply({ type: "message_end", message: { role: "assistant", model: "m", stopReason: "toolUse", content: [
    { type: "toolCall", id: "t1", name: "edit", arguments: { path: "a.py", edits: [{ oldText: "x = 1\ny = 2\n", newText: "x = 3" }, { oldText: "z", newText: "" }] } },
  ] } });
  assert.equal(t.block(id).parts[0].args,
    "path: a.py\nedits[0].oldText:\nx = 1\ny = 2\nedits[0].newText: x = 3\nedits[1].oldText: z\nedits[1].newText: ");
});

test("Transcript: a reply joined mid-stream (a chat opened during it) is shown from there, then whole", () => {
  const t = new ext.Transcript();
  t.load([{ entryId: "u1", role: "user", tokens: 3, message: { role: "user", content: "hello" } }]);
  const [id] = t.apply({ type: "message_update", deltas: [{ type: "text_delta", contentIndex: 0, delta: "there" }] });
  assert.ok(id, "the delta started a block");
  let block = t.block(id);
  assert.equal(block.kind, "assistant");
  assert.equal(block.streaming, true);
  assert.equal(block.parts[0].text, "there");
  assert.equal(t.busy, true);
  assert.deepEqual(t.apply({ type: "message_end", message: { role: "assistant", model: "m", content: [{ type: "text", text: "Hi there" }] } }), [id]);
  block = t.block(id);
  assert.equal(block.streaming, false);
  assert.equal(block.parts[0].text, "Hi there");
  assert.equal(t.blocks.length, 2);
});

test("Transcript: the events of messages it loaded (a chat read during their turn) add nothing; later ones do", () => {
  const t = new ext.Transcript();
  const call = { role: "assistant", model: "m", timestamp: 2, content: [{ type: "toolCall", id: "t1", name: "bash", arguments: { command: "ls" } }] };
  const result = { role: "toolResult", toolCallId: "t1", timestamp: 3, content: [{ type: "text", text: "a.py" }] };
  t.load([{ entryId: "u1", role: "user", tokens: 1, message: { role: "user", content: "list", timestamp: 1 } },
    { entryId: "a1", role: "assistant", tokens: 1, message: call }, { entryId: "r1", role: "toolResult", tokens: 1, message: result }]);
  const replayed = [
    { type: "message_start", message: { role: "user", content: "list", timestamp: 1 } },
    { type: "message_end", message: { role: "user", content: "list", timestamp: 1 } },
    { type: "message_start", message: { ...call, content: [] } },
    { type: "message_update", deltas: [{ type: "toolcall_delta", contentIndex: 0, delta: "{" }] },
    { type: "message_end", message: call },
    { type: "tool_execution_start", toolCallId: "t1", toolName: "bash", args: {} },
    { type: "tool_execution_end", toolCallId: "t1", toolName: "bash", result, isError: false },
    { type: "message_start", message: result },
    { type: "message_end", message: result },
  ];
  for (const event of replayed) assert.deepEqual(t.apply(event), [], event.type);
  assert.equal(t.blocks.length, 2);
  assert.equal(t.tools.get("t1").entryId, "r1", "the loaded result, still editable");
  assert.equal(t.busy, true, "the turn runs");
  const [id] = t.apply({ type: "message_start", message: { role: "assistant", timestamp: 4, content: [] } });
  assert.ok(id, "a message it did not load is shown");
  assert.equal(t.blocks.length, 3);
});

test("Transcript: messages of no time (pi accepts them) are matched by their entry: none twice, none lost", () => {
  // They were told apart by time alone: a loaded one came again from its replayed events.
  const t = new ext.Transcript();
  const prompt = { role: "user", content: "no time" };
  const result = { role: "toolResult", toolCallId: "t1", content: [{ type: "text", text: "a.py" }] };
  const call = { role: "assistant", model: "m", timestamp: 2, content: [{ type: "toolCall", id: "t1", name: "bash", arguments: {} }] };
  t.load([{ entryId: "u1", role: "user", tokens: 1, message: prompt }, { entryId: "a1", role: "assistant", tokens: 1, message: call },
    { entryId: "r1", role: "toolResult", tokens: 1, message: result }]);
  const replayed = [
    { type: "message_start", message: prompt },
    { type: "message_end", message: prompt, entryId: "u1" },
    { type: "message_start", message: call },
    { type: "message_end", message: call, entryId: "a1" },
    { type: "message_start", message: result },
    { type: "message_end", message: result, entryId: "r1" },
  ];
  for (const event of replayed) assert.deepEqual(t.apply(event), [], event.type);
  assert.deepEqual(t.blocks.map((b) => b.id), ["u1", "a1"], "each loaded message once");
  const steer = { role: "user", content: "no time" }; // the same text again, a message of its own
  const [id] = [...t.apply({ type: "message_start", message: steer }), ...t.apply({ type: "message_end", message: steer, entryId: "u2" })];
  assert.ok(id, "a message it did not load is shown");
  assert.deepEqual(t.blocks.map((b) => b.kind), ["user", "assistant", "user"]);
  const reply = { role: "assistant", model: "m", content: [] };
  t.apply({ type: "message_start", message: reply });
  t.apply({ type: "message_update", deltas: [{ type: "text_delta", contentIndex: 0, delta: "streamed" }] });
  t.apply({ type: "message_end", message: { ...reply, content: [{ type: "text", text: "streamed" }] }, entryId: "a2" });
  assert.deepEqual(t.blocks.at(-1).parts, [{ type: "text", text: "streamed" }], "a reply of no time streams as any other");
  assert.equal(t.blocks.length, 4);
});

test("Transcript: an aborted reply and an error notice", () => {
  const t = new ext.Transcript();
  const [id] = t.apply({ type: "message_start", message: { role: "assistant", content: [] } });
  t.apply({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "par" }], stopReason: "aborted" } });
  assert.equal(t.block(id).error, "aborted");
  const [notice] = t.apply({ type: "error", message: "no API key" });
  assert.equal(t.block(notice).kind, "notice");
  assert.equal(t.busy, false);
});

test("Transcript: a reply that is retried shows as left out of the context under a retry note, not as the turn's error", () => {
  // The failed attempt read "Anthropic 529 …" as the turn's error while pi waited to ask again,
  // and "removed from the context" once the turn was over.
  const t = new ext.Transcript();
  const failure = "Anthropic 529 overloaded_error: Overloaded";
  const [attempt] = t.apply({ type: "message_start", message: { role: "assistant", content: [] } });
  t.apply({ type: "message_end", message: { role: "assistant", content: [], stopReason: "error", errorMessage: failure } });
  const changed = t.apply({ type: "auto_retry_start", attempt: 1, maxAttempts: 3, delayMs: 20000, errorMessage: failure });
  assert.ok(changed.includes(attempt), "the failed attempt is drawn again");
  const live = ext.renderBlock(t.block(attempt), t.tools);
  assert.match(live, /assistant removed from the context</);
  assert.match(live, /\[error\] Anthropic 529 overloaded_error: Overloaded/);
  assert.doesNotMatch(live, /class="error"/);
  const retry = changed.find((id) => id !== attempt);
  assert.match(ext.renderBlock(t.block(retry), t.tools), /↻ Retrying \(1\/3\) in 20s… \(Abort to cancel\)/);
  assert.equal(t.busy, true);
  // The wait is over: pi asks again, and the note goes.
  assert.ok(t.apply({ type: "turn_start" }).includes(retry));
  assert.match(ext.renderBlock(t.block(retry), t.tools), /class="hidden"/);
  t.apply({ type: "message_start", message: { role: "assistant", content: [] } });
  t.apply({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "fine now" }], stopReason: "stop" } });
  assert.deepEqual(t.apply({ type: "auto_retry_end", success: true, attempt: 1 }), []);
  t.apply({ type: "agent_end" });
  // What the transcript read after the turn shows: the same attempt, left out, in its place.
  const after = new ext.Transcript();
  after.load([{ entryId: "u1", role: "user", tokens: 1, message: { role: "user", content: "Try it" } },
    { entryId: "a2", role: "assistant", tokens: 2, message: { role: "assistant", content: [{ type: "text", text: "fine now" }], stopReason: "stop" } }],
  [{ targetId: "a1", editId: "e1", kind: "omitted", role: "assistant", tokensBefore: 0, tokensAfter: 0, original: `[error] ${failure}`, position: 1 }]);
  const shown = (tr) => tr.blocks.filter((b) => b.kind !== "user").map((b) => ext.renderBlock(b, tr.tools))
    .filter((html) => !/class="hidden"/.test(html)).map((html) => html.replace(/ · \d+ tokens|<button.*?<\/button>|data-id="[^"]*"/g, "").replace('<span class="ctx-actions"></span>', ""));
  assert.deepEqual(shown(t), shown(after));
});

test("Transcript: a retried attempt reads as the server's edit mark for it, during the wait as after the turn", () => {
  // During the wait the attempt was drawn from the turn's event whole, on several lines, a bidi
  // control kept, its calls as the tool rows brief them (a command before a path, 60 characters);
  // after the turn, from the server's mark (pi_lsp/context/edits.py failure_preview): one line,
  // cut at 8,000 characters, each call's path or command at 32. The expected texts are the
  // server's for these replies.
  const lead = "Anthropic 529 overloaded_error: first line\nsecond \u202eline ";
  const flat = "[error] Anthropic 529 overloaded_error: first line second line ";
  const replies = [
    [{ content: [], errorMessage: lead + "x".repeat(9000) }, flat + "x".repeat(8000 - 1 - flat.length) + "…"],
    [{ content: [{ type: "text", text: "partial" },
      { type: "toolCall", id: "c1", name: "read", arguments: { path: "/home/me/project/src/components/deep/file.tsx" } },
      { type: "toolCall", id: "c2", name: "bash", arguments: { command: "ls -la", path: "" } }], errorMessage: "Anthropic 529 overloaded_error: Overloaded" },
    "[error] Anthropic 529 overloaded_error: Overloaded → read(/home/me/project/src/components…), bash(ls -la)"],
    [{ content: [{ type: "text", text: "partial" }], errorMessage: "" }, "[error] partial"],
  ];
  for (const [reply, server] of replies) {
    const t = new ext.Transcript();
    const [attempt] = t.apply({ type: "message_start", message: { role: "assistant", content: [] } });
    t.apply({ type: "message_end", message: { role: "assistant", stopReason: "error", ...reply } });
    t.apply({ type: "auto_retry_start", attempt: 1, maxAttempts: 3, delayMs: 20000, errorMessage: reply.errorMessage });
    assert.equal(t.block(attempt).text, server, "the attempt during the wait");
    const after = new ext.Transcript();
    after.load([], [{ targetId: "a1", editId: "e1", kind: "omitted", role: "assistant", tokensBefore: 0, tokensAfter: 0, original: "", position: 0, failure: server }]);
    assert.equal(after.blocks[0].text, server, "the attempt after the turn");
  }
});

test("Transcript: a failed reply is drawn once it is known whether pi asks for it again", () => {
  // It was drawn as the turn's error at its message_end, then again as left out at
  // auto_retry_start (a flash); pi 1.6 draws a failed reply once.
  const failure = "Anthropic 529 overloaded_error: Overloaded";
  const start = { type: "message_start", message: { role: "assistant", content: [] } };
  const failed = { type: "message_end", message: { role: "assistant", content: [], stopReason: "error", errorMessage: failure } };
  const retried = new ext.Transcript();
  const [attempt] = retried.apply(start);
  for (const event of [failed, { type: "turn_end" }, { type: "save_point" }]) assert.deepEqual(retried.apply(event), [], `not drawn at ${event.type}`);
  const changed = retried.apply({ type: "auto_retry_start", attempt: 1, maxAttempts: 3, delayMs: 20000, errorMessage: failure });
  assert.equal(changed.filter((id) => id === attempt).length, 1, "drawn once, at auto_retry_start");
  assert.match(ext.renderBlock(retried.block(attempt), retried.tools), /assistant removed from the context</);
  const final = new ext.Transcript();
  const [last] = final.apply(start);
  for (const event of [failed, { type: "turn_end" }, { type: "save_point" }]) assert.deepEqual(final.apply(event), [], `not drawn at ${event.type}`);
  assert.deepEqual(final.apply({ type: "agent_end" }), [last], "no retry: drawn at the turn's end");
  assert.match(ext.renderBlock(final.block(last), final.tools), /class="error">Anthropic 529 overloaded_error: Overloaded/);
});

test("Transcript: a retry that did not work says so, as pi 1.6 does", () => {
  const t = new ext.Transcript();
  const failure = "Anthropic 529 overloaded_error: Overloaded";
  t.apply({ type: "message_end", message: { role: "assistant", content: [], stopReason: "error", errorMessage: failure } });
  const [, retry] = t.apply({ type: "auto_retry_start", attempt: 1, maxAttempts: 3, delayMs: 60000, errorMessage: failure });
  const [over, note] = t.apply({ type: "auto_retry_end", success: false, attempt: 1, finalError: "Retry cancelled" });
  assert.equal(over, retry);
  assert.deepEqual([t.block(note).level, t.block(note).text], ["error", "Retry failed after 1 attempt: Retry cancelled"]);
  assert.match(ext.renderBlock(t.block(retry), t.tools), /class="hidden"/);
});

test("Transcript: a failed compaction shows the server's words as they are", () => {
  // The server words it as pi does; the panel read "Compaction failed: Auto-compaction failed: …".
  const t = new ext.Transcript();
  const error = "Context overflow recovery failed after one compact-and-retry attempt.";
  const [failed] = t.apply({ type: "compaction_end", entryId: null, error });
  assert.deepEqual([t.block(failed).level, t.block(failed).text], ["error", error]);
  const [done] = t.apply({ type: "compaction_end", entryId: "c1", error: null });
  assert.deepEqual([t.block(done).level, t.block(done).text], ["info", "Compacted the context."]);
});

test("Transcript: a compaction the user stopped is a status, not an error", () => {
  // As pi 1.6's "Auto-compaction cancelled" line; the server sent it as an error before.
  const t = new ext.Transcript();
  const [stopped] = t.apply({ type: "compaction_end", entryId: null, error: null, aborted: true });
  assert.deepEqual([t.block(stopped).level, t.block(stopped).text], ["info", "Auto-compaction cancelled"]);
});

test("serverSettings sends only the server's keys, and only set ones", () => {
  const values = { model: "anthropic/x", toolApproval: "auto", summaryModel: "", thinkingLevel: null, pythonPath: "/py", command: ["a"], models: ["m"], sessionDirs: [] };
  assert.deepEqual(ext.serverSettings((k) => values[k], "key"), { model: "anthropic/x", toolApproval: "auto", sessionDirs: [], anthropicApiKey: "key" });
});

test("a repository's .vscode/settings.json cannot set where the key goes, what runs or what is approved", () => {
  const { setConfig } = vscode.__test;
  const get = ext.getter();
  const hostile = { command: ["sh", "-c", "evil"], pythonPath: "/repo/py", model: "evil/m", summaryModel: "evil/s",
    toolApproval: "auto", sessionDirs: ["/elsewhere"], anthropicBaseUrl: "https://attacker.example" };
  assert.deepEqual([...ext.USER_ONLY_KEYS].sort(), Object.keys(hostile).sort());
  try {
    for (const [key, value] of Object.entries(hostile)) setConfig(`piLsp.${key}`, value, "workspace");
    setConfig("piLsp.thinkingLevel", "high", "workspace"); // harmless: a workspace may still choose it
    assert.deepEqual(ext.serverSettings(get, "key", true),
      { thinkingLevel: "high", toolApproval: "ask", sessionDirs: [], durableLeafMoves: true, autoCompaction: true,
        diagnosticsFeedback: true, anthropicApiKey: "key", workspaceTrusted: true });
    assert.deepEqual(ext.serverLaunch(get, "/repo"), { command: "pi-lsp", args: ["serve"] });
    // The user's own values are used, with the workspace's still there.
    setConfig("piLsp.anthropicBaseUrl", "https://gateway.example");
    setConfig("piLsp.toolApproval", "auto");
    setConfig("piLsp.pythonPath", "/usr/bin/python3");
    assert.equal(get("anthropicBaseUrl"), "https://gateway.example");
    assert.equal(get("toolApproval"), "auto");
    assert.deepEqual(ext.serverLaunch(get, "/repo"), { command: "/usr/bin/python3", args: ["-P", "-m", "pi_lsp.cli", "serve"] });
  } finally {
    for (const key of [...Object.keys(hostile), "thinkingLevel"]) {
      setConfig(`piLsp.${key}`, undefined, "workspace");
      setConfig(`piLsp.${key}`, undefined);
    }
  }
});

test("package.json gives exactly the user-only settings a scope no workspace can set", () => {
  const declared = require("../package.json").contributes.configuration.properties;
  const machine = Object.keys(declared).filter((k) => ["machine", "application"].includes(declared[k].scope));
  assert.deepEqual(machine.map((k) => k.replace(/^piLsp\./, "")).sort(), [...ext.USER_ONLY_KEYS].sort());
});

test("modelList: the configured models first, then the server's, each once, with models.json's names", () => {
  // The server names a model by its id when models.json gives it no name.
  const listed = [{ provider: "anthropic", id: "claude-sonnet-4-5", name: "claude-sonnet-4-5" }, { provider: "ollama", id: "qwen2.5-coder:7b", name: "Qwen Coder" }];
  assert.deepEqual(ext.modelList(["anthropic/claude-sonnet-4-5", "anthropic/claude-opus-4-5"], listed),
    [{ id: "anthropic/claude-sonnet-4-5" }, { id: "anthropic/claude-opus-4-5" }, { id: "ollama/qwen2.5-coder:7b", name: "Qwen Coder" }]);
  assert.deepEqual(ext.modelList([], []), []);
});

test("code sent with a prompt shows in the user's message as a titled code block, not as markup", () => {
  const t = new ext.Transcript();
  t.load([{ entryId: "u1", role: "user", tokens: 9, message: { role: "user", content: [
    { type: "text", text: "why is b slow?" },
    { type: "text", text: '<file path="src/orders.py" lines="4-5" language="python">\ndef b():\n    return 2 < 3\n</file>' },
    { type: "text", text: '<file path="README.md">\n# Title\n</file>' },
    { type: "text", text: '<file path="one.py" lines="7-7">\nx = 1\n</file>' },
  ] } }]);
  const html = ext.renderBlock(t.block("u1"), t.tools);
  assert.ok(!html.includes("&lt;file"), html);
  assert.match(html, /<div class="file"><div class="file-title">src\/orders\.py:4-5<\/div><pre><code class="language-python">def b\(\):\n    return 2 &lt; 3<\/code><\/pre><\/div>/);
  assert.match(html, /<div class="file-title">README\.md<\/div><pre><code># Title<\/code><\/pre>/);
  assert.match(html, /<div class="file-title">one\.py:7<\/div>/);
  assert.match(html, /why is b slow\?/);
});

test("serverLaunch: piLsp.command, else pythonPath -P -m pi_lsp.cli serve, else pi-lsp serve", () => {
  const get = (values) => (k) => values[k];
  assert.deepEqual(ext.serverLaunch(get({ command: ["${workspaceFolder}/bin/pi-lsp", "serve"], pythonPath: "/py" }), "/ws"), { command: "/ws/bin/pi-lsp", args: ["serve"] });
  assert.deepEqual(ext.serverLaunch(get({ command: [], pythonPath: "${workspaceFolder}/.venv/bin/python" }), "/ws"), { command: "/ws/.venv/bin/python", args: ["-P", "-m", "pi_lsp.cli", "serve"] });
  assert.deepEqual(ext.serverLaunch(get({})), { command: "pi-lsp", args: ["serve"] });
});

test("pi-context URIs carry the session, leaf and layer; arguments name sessions several ways", () => {
  const session = "file:///tmp/a%20b/.pi/sessions/x.jsonl";
  const uri = ext.contextUri({ session, leafId: "abc", layer: "llm" }, "Context · my/session");
  assert.equal(uri.scheme, "pi-context");
  assert.ok(uri.path.endsWith(".md") && !uri.path.slice(1).includes("/"));
  assert.deepEqual(ext.parseContextUri(vscode.Uri.parse(uri.toString())), { session, leafId: "abc", layer: "llm" });
  assert.equal(ext.sessionOfArgument(session), session);
  assert.equal(ext.sessionOfArgument({ uri: session }), session);
  assert.equal(ext.sessionOfArgument({ sessionUri: session, uri: "ignored" }), session);
  assert.equal(ext.sessionOfArgument(uri), session, "a context preview stands for its session");
  assert.equal(ext.sessionOfArgument(vscode.Uri.file("/tmp/notes.txt")), undefined);
  assert.equal(ext.sessionKey(session), ext.sessionKey("file:///tmp/a b/.pi/sessions/x.jsonl"));
});

test("a restore says how many files it changed in open editors, unsaved", () => {
  const files = [{ path: "a.py", status: "modified", diff: "" }, { path: "b.txt", status: "deleted", diff: "" }];
  const result = { files, undoId: "0".repeat(40), skipped: [] };
  assert.equal(ext.restoredMessage(result, "e1"), "pi: restored 2 file(s) to entry e1.");
  assert.equal(ext.restoredMessage({ ...result, inEditor: ["a.py"] }, "e1"),
    "pi: restored 2 file(s) to entry e1; 1 open in the editor, not saved.");
  assert.equal(ext.restoredMessage({ ...result, inEditor: ["a.py"] }, null),
    "pi: undid the restore (2 file(s) back as they were; 1 open in the editor, not saved).");
  assert.equal(ext.restoredMessage(result, null), "pi: undid the restore (2 file(s) back as they were).");
});

test("what a restore leaves alone is listed once each with why, on one line, and counted", () => {
  const alone = {
    skipped: ["big.bin", "constructor", "sub", "x\n[run](command:rm)\u202e.txt"],
    refused: [".git/config"],
    why: { sub: "sub is a git repository of its own, whose files snapshots do not record" },
    unrecorded: ["sub", "vendor/lib"],
  };
  assert.deepEqual(ext.leftAlone(alone), [
    "left alone (ignored, unreadable, or too large to snapshot): big.bin",
    "left alone (ignored, unreadable, or too large to snapshot): constructor",
    "left alone (sub is a git repository of its own, whose files snapshots do not record): sub",
    "left alone (ignored, unreadable, or too large to snapshot): x [run](command:rm) .txt",
    "left alone (under .git/ or .pi/, or behind a symlink): .git/config",
    "left alone (a git repository of its own, whose changes are not recorded or restored): vendor/lib",
  ]);
  assert.deepEqual(ext.leftAlone({}), []);
  const result = { files: [{ path: "a.py", status: "modified", diff: "" }], undoId: "0".repeat(40), ...alone };
  assert.equal(ext.restoredMessage(result, "e1"), "pi: restored 1 file(s) to entry e1; 6 left alone, see the diff.");
  assert.equal(ext.restoredMessage({ ...result, inEditor: ["a.py"] }, null),
    "pi: undid the restore (1 file(s) back as they were; 1 open in the editor, not saved; 6 left alone).");
});

test("the pi-files: document shows the session's entry id and a path without a diff on one line", async () => {
  const id = "ok\u202e\n+injected";
  const answers = [
    { available: true, files: [{ path: "a\n+b.txt", status: "added", diff: "" }] },
    { available: true },
    { available: false, reason: "no turn recorded the files at or after this entry" },
  ];
  const provider = new ext.FilesDiffProvider({ call: async () => answers.shift() });
  const shown = [];
  for (let i = 0; i < 3; i++) shown.push(await provider.provideTextDocumentContent(ext.filesUri("file:///s.jsonl", id)));
  assert.deepEqual(shown, [
    "added: a +b.txt\n",
    "# The files already match entry ok +injected\n",
    "# No recorded files at ok +injected\n\nno turn recorded the files at or after this entry\n",
  ]);
});

test("a pi-files: or pi-context: tab's title shows the session's id on one line, cut; the query keeps it whole", () => {
  const id = `ok\u202e\n+injected/..\\${"x".repeat(200)}`;
  const files = ext.filesUri("file:///s.jsonl", id);
  const context = ext.contextUri({ session: "file:///s.jsonl", leafId: id, layer: "llm" }, "Context · s");
  for (const uri of [files, context]) {
    const title = uri.path.slice(1);
    assert.doesNotMatch(title, /[\n\u202e/\\]/, title);
    assert.ok(title.includes("ok +injected-..-x") && title.includes("…") && [...title].length < 110, title);
  }
  assert.match(files.path, /^\/files @ ok \+injected-\.\.-x+….diff$/);
  assert.equal(new URLSearchParams(vscode.Uri.parse(files.toString()).query).get("entry"), id);
  assert.equal(ext.parseContextUri(vscode.Uri.parse(context.toString())).leafId, id);
});

test("the pi-files: document keeps a file's carriage return in its line: the file cannot write a line of its own", async () => {
  // VS Code breaks a line at a lone CR (as at LF and CRLF); a CRLF file's lines stay as they are.
  const diff = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\rleft alone (nothing differs): b.txt\n+y\r\n";
  const provider = new ext.FilesDiffProvider({ call: async () => ({ available: true, files: [{ path: "a.txt", status: "modified", diff }] }) });
  const shown = await provider.provideTextDocumentContent(ext.filesUri("file:///s.jsonl", "e1"));
  assert.deepEqual(shown.split(/\r\n|\r|\n/), [
    "diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", "@@ -1 +1 @@",
    "-x\\rleft alone (nothing differs): b.txt", "+y", "",
  ]);
});

test("context edits: the preview's message headings get Remove / Replace / Undo by their state", () => {
  // pi.previewContext's headings: a summary and a message of no entry cannot be edited
  const headings = [
    { line: 2, entryId: "a2b2d4fe", role: "compactionSummary", state: "kept" },
    { line: 4, entryId: "4e303b25", role: "user", state: "kept" },
    { line: 6, entryId: "145bca81", role: "toolResult", state: "removed" },
    { line: 8, entryId: "456798a9", role: "assistant", state: "replaced" },
    { line: 10, entryId: "c0ffee00", role: "custom", state: "kept" },
    { line: 12, entryId: null, role: "user", state: "kept" },
  ];
  assert.deepEqual(ext.contextLenses(headings), [
    { line: 4, entryId: "4e303b25", state: "kept" },
    { line: 6, entryId: "145bca81", state: "removed" },
    { line: 8, entryId: "456798a9", state: "replaced" },
    { line: 10, entryId: "c0ffee00", state: "kept" },
  ]);
  const titles = (state) => ext.editActions(state).map((a) => a.title);
  assert.deepEqual(titles("kept"), ["Remove from Context", "Replace in Context…"]);
  assert.deepEqual(titles("replaced"), ["Replace in Context…", "Undo Context Edit"]);
  assert.deepEqual(titles("removed"), ["Undo Context Edit"]);
});

test("context edits in the chat: a removed message stays in its place with Undo; edited ones say so", () => {
  const t = new ext.Transcript();
  const user = (id, text, extra = {}) => ({ entryId: id, role: "user", tokens: 1, message: { role: "user", content: text }, ...extra });
  const call = { entryId: "a1", role: "assistant", tokens: 1, message: { role: "assistant", content: [{ type: "toolCall", id: "c1", name: "bash", arguments: { command: "ls" } }] } };
  const result = { entryId: "r1", role: "toolResult", tokens: 1, edited: true, message: { role: "toolResult", toolCallId: "c1", content: [{ type: "text", text: "short" }] } };
  t.load([user("u1", "hi"), call, result, user("u2", "bye")], [
    { targetId: "u0", editId: "e1", kind: "omitted", role: "user", tokensBefore: 9000, tokensAfter: 0, original: "huge paste", position: 0 },
    { targetId: "r1", editId: "e2", kind: "replaced", role: "toolResult", tokensBefore: 50, tokensAfter: 1, original: "bash: …", position: 2 },
    { targetId: "u3", editId: "e3", kind: "omitted", role: "user", tokensBefore: 4, tokensAfter: 0, original: "last", position: 4 },
  ]);
  assert.deepEqual(t.blocks.map((b) => b.id), ["removed-u0", "u1", "a1", "u2", "removed-u3"]);
  const html = t.blocks.map((b) => ext.renderBlock(b, t.tools));
  assert.match(html[0], /user removed from the context · 9,000 tokens<button class="ctx" data-ctx="undo" data-entry="u0">/);
  assert.match(html[1], /data-ctx="remove" data-entry="u1"/);
  assert.doesNotMatch(html[1], /data-ctx="undo"/);
  // the tool result is shown with its call, with its own actions, marked edited
  assert.match(html[2], /<div class="tool-result"><span class="ctx-actions"><span class="edited">✎ edited in context<\/span>.*data-ctx="undo" data-entry="r1"/);
  // a message being streamed is no entry yet: no actions
  t.apply({ type: "message_start", message: { role: "assistant", content: [] } });
  assert.doesNotMatch(ext.renderBlock(t.blocks.at(-1), t.tools), /data-ctx/);
});

test("a model name, a removed entry's role and a summary's title from a session stay one line in order in the chat", () => {
  // Before, an assistant message's `model` with U+202E turned the rest of its role line (the context
  // actions) around, as could a removed entry's role and a bash command's or custom type's title.
  const t = new ext.Transcript();
  const assistant = { entryId: "a1", role: "assistant", tokens: 1, message: { role: "assistant", model: "m\u202e\nx", content: [{ type: "text", text: "hi" }] } };
  const bash = { entryId: "b1", role: "bashExecution", tokens: 1, message: { role: "bashExecution", command: "ls\u202e #", output: "" } };
  t.load([assistant, bash], [
    { targetId: "u0", editId: "e1", kind: "omitted", role: "user\u202e", tokensBefore: 9, tokensAfter: 0, original: "x", position: 0 },
  ]);
  const html = t.blocks.map((b) => ext.renderBlock(b, t.tools)).join("");
  assert.ok(!html.includes("\u202e"), html);
  assert.match(html, /pi · m x<span/);
});

test("a tool call's name and command from a session stay one line in order in the chat", () => {
  // Before, a tool name or bash command with U+202E was escaped but not flattened: the override
  // turned the call's " · failed" around.
  const t = new ext.Transcript();
  const call = { entryId: "a1", role: "assistant", tokens: 1, message: { role: "assistant", content: [
    { type: "toolCall", id: "tc1", name: "bash\u202e", arguments: { command: "echo hi \u202e# " } }] } };
  const result = { entryId: "r1", role: "toolResult", tokens: 1, message: { role: "toolResult", toolCallId: "tc1", toolName: "bash", content: [{ type: "text", text: "hi" }], isError: true } };
  t.load([call, result], []);
  const html = t.blocks.map((b) => ext.renderBlock(b, t.tools)).join("");
  assert.match(html, /<summary>bash <code>echo hi #<\/code> · failed<\/summary>/);
});

test("the chat's model picker shows a session's model on one line, and picks it as it is", () => {
  // Before, the webview showed the state's model (a model_change's provider) as it came: U+202E
  // and a line break in the picker's option and tooltip.
  const element = () => ({ children: [], classList: { toggle() {} }, addEventListener() {},
    replaceChildren(...children) { this.children = children; } });
  const elements = new Map();
  const listeners = [];
  const sandbox = {
    acquireVsCodeApi: () => ({ postMessage() {} }),
    document: { body: element(), getElementById: (id) => elements.get(id) ?? elements.set(id, element()).get(id) },
    window: { addEventListener: (type, listener) => listeners.push(listener) },
    Option: class { constructor(text, value) { Object.assign(this, { text, value }); } },
    ResizeObserver: class { observe() {} },
  };
  vm.runInNewContext(fs.readFileSync(path.join(__dirname, "../out/webview.js"), "utf8"), sandbox);
  const model = "evil\u202e\nfake line/m";
  const state = { title: "t", busy: false, model, models: [], thinkingLevel: "off", thinkingLevels: ["off"], tokens: "", attachments: [] };
  for (const listener of listeners) listener({ data: { type: "state", state } });
  const picker = elements.get("model");
  assert.deepEqual(picker.children.map((o) => [o.text, o.title, o.value]).at(0), ["evil fake line/m", "evil fake line/m", model]);
  assert.equal(picker.title, "Model: evil fake line/m");
});

test("the chat's approval card shows what Accept for Session covers next to its button", () => {
  // Before, the card had the question and the buttons only: nothing said that Accept for Session
  // on a call outside the workspace covers a folder, or the file alone.
  const element = (tag) => ({ tag, children: [], dataset: {}, classList: { toggle() {} }, addEventListener() {},
    appendChild(child) { this.children.push(child); } });
  const elements = new Map();
  const listeners = [];
  const sandbox = {
    acquireVsCodeApi: () => ({ postMessage() {} }),
    document: { body: element(), createElement: element, getElementById: (id) => elements.get(id) ?? elements.set(id, element()).get(id) },
    window: { addEventListener: (type, listener) => listeners.push(listener) },
    ResizeObserver: class { observe() {} },
  };
  vm.runInNewContext(fs.readFileSync(path.join(__dirname, "../out/webview.js"), "utf8"), sandbox);
  const approval = { type: "approval", id: "a1", message: "pi wants to read /srv/x/a.txt", actions: ["Accept", "Accept for Session", "Reject"],
    notes: { "Accept for Session": "files in /srv/x and below only" } };
  for (const listener of listeners) listener({ data: approval });
  const [card] = elements.get("approvals").children;
  assert.deepEqual(card.children.slice(1).map((c) => [c.tag, c.textContent]), [
    ["button", "Accept"], ["button", "Accept for Session"], ["span", "files in /srv/x and below only"], ["button", "Reject"]]);
});

test("the check for a prompt the stopped server wrote reads the first lines past the size noted, not the rest of the file", (t) => {
  // It read the whole rest at once on the extension host: a session replaced by a 219 MB file
  // held it 882 ms (520 MB); past 512 MB Node refused the text, and the prompt came back.
  const dir = fs.mkdtempSync(path.join(require("node:os").tmpdir(), "pi-prompt-check-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "s.jsonl");
  const line = (entry) => JSON.stringify(entry) + "\n";
  const stamp = "2026-01-02T03:04:05.678Z";
  const header = line({ type: "session", version: 3, id: "s", timestamp: stamp, cwd: dir });
  const level = (id) => line({ type: "thinking_level_change", id, parentId: null, timestamp: stamp, thinkingLevel: "low" });
  // What a turn writes before its prompt: levels, a compaction; the prompt carries attached code.
  const written = [
    level("t1"),
    line({ type: "compaction", id: "c1", parentId: "t1", timestamp: stamp, summary: "s".repeat(200_000), firstKeptEntryId: "t1", tokensBefore: 1 }),
    level("t2"),
    line({ type: "message", id: "u1", parentId: "t2", timestamp: stamp, message: { role: "user", timestamp: 1,
      content: [{ type: "text", text: "my prompt" }, { type: "text", text: "x".repeat(100_000) }] } }),
  ].join("");
  const reply = line({ type: "custom", id: "r", parentId: null, timestamp: stamp, customType: "x", data: "y".repeat(10_000) });
  fs.writeFileSync(file, header + written + reply.repeat(800)); // the turn's own 8 MB after it
  const uri = vscode.Uri.file(file).toString();
  const readSync = fs.readSync;
  let read = 0;
  fs.readSync = (...args) => { const got = readSync(...args); read += got; return got; };
  t.after(() => { fs.readSync = readSync; });
  assert.equal(ext.promptWrittenSince(uri, header.length, "my prompt"), true);
  assert.ok(read > 0 && read < (1 << 20), `read ${read} bytes to find it`);
  read = 0;
  assert.equal(ext.promptWrittenSince(uri, header.length, "another prompt"), false);
  assert.ok(read > 0 && read < (1 << 20), `read ${read} bytes not to find it`);
  assert.equal(ext.promptWrittenSince(uri, fs.statSync(file).size + 1, "my prompt"), false, "a shorter file is another one");
  fs.writeFileSync(file, header + written.slice(0, -1)); // the prompt, its line not ended
  assert.equal(ext.promptWrittenSince(uri, header.length, "my prompt"), true);
});

test("a prompt the stopped server wrote with more than 16 MiB of code and images is found by the id the server named", (t) => {
  // The check stopped at 16 MiB past the size noted, inside the prompt's own line: the prompt
  // came back to the input though the file held it, and a resend wrote it twice.
  const dir = fs.mkdtempSync(path.join(require("node:os").tmpdir(), "pi-prompt-big-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "s.jsonl");
  const line = (entry) => JSON.stringify(entry) + "\n";
  const stamp = "2026-01-02T03:04:05.678Z";
  const header = line({ type: "session", version: 3, id: "s", timestamp: stamp, cwd: dir });
  const image = { type: "image", data: "A".repeat(6 << 20), mimeType: "image/png" };
  const written = [
    line({ type: "thinking_level_change", id: "t1", parentId: null, timestamp: stamp, thinkingLevel: "low" }),
    line({ type: "compaction", id: "c1", parentId: "t1", timestamp: stamp, summary: "s".repeat(200_000), firstKeptEntryId: "t1", tokensBefore: 1 }),
    line({ type: "message", id: "ab12cd34", parentId: "ee11ee11", timestamp: stamp, message: { role: "user",
      content: [{ type: "text", text: "look at these" }, { type: "text", text: "x".repeat(100_000) }, image, image, image], timestamp: 1 } }),
  ].join("");
  fs.writeFileSync(file, header + written + line({ type: "custom", id: "r", parentId: "ab12cd34", timestamp: stamp, customType: "x", data: "y" }));
  const uri = vscode.Uri.file(file).toString();
  const readSync = fs.readSync;
  let read = 0;
  fs.readSync = (...args) => { const got = readSync(...args); read += got; return got; };
  t.after(() => { fs.readSync = readSync; });
  assert.ok(fs.statSync(file).size - header.length > 16 << 20, "the prompt's line is past the bound");
  assert.equal(ext.promptWrittenSince(uri, header.length, "look at these", "ab12cd34"), true);
  assert.ok(read > 0 && read < (1 << 20), `read ${read} bytes to find it`);
  assert.equal(ext.promptWrittenSince(uri, header.length, "look at these", "ffff0000"), false, "another entry's id");
  assert.equal(ext.promptWrittenSince(uri, header.length, "look at these", "ee11ee11"), false, "a parentId is no id");
  assert.equal(ext.promptWrittenSince(uri, fs.statSync(file).size + 1, "look at these", "ab12cd34"), false, "a shorter file is another one");
});
