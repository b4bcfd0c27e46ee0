// activate() with the stand-in `vscode` and the real server: every command of package.json is
// registered, the Sessions view shows sessions and entries, and the actions reach the server.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const vscode = require("vscode");
const manifest = require("../package.json");
const ext = require("../out/extension.js");
const { eventually, setUp } = require("../testlib/server");
const { makeContext } = require("../testlib/context");
const { activateOn } = require("../testlib/activate");

const { rec, respond } = vscode.__test;
let rig, ws, api, sessionUri;
const run = (id, ...args) => vscode.commands.executeCommand(id, ...args);
const provider = () => rec.treeProviders.get("piLsp.sessions");
const errors = () => rec.messages.filter((m) => m.kind === "error").map((m) => m.message);

setUp(async () => {
  // Extractive summaries: no model needed.
  ({ ws, api } = rig = await activateOn({ settings: { summaryModel: null } }));
  sessionUri = (await api.sessions.list())[0].uri;
}, () => rig?.stop());

test("every piLsp.* command in package.json is registered, and nothing else", () => {
  const declared = manifest.contributes.commands.map((c) => c.command).sort();
  const registered = [...rec.commands.keys()].filter((k) => k.startsWith("piLsp.")).sort();
  assert.deepEqual(registered, declared);
  // Menus may only name declared commands.
  for (const items of Object.values(manifest.contributes.menus)) {
    for (const item of items) assert.ok(declared.includes(item.command), item.command);
  }
  assert.ok(rec.contentProviders.has("pi-context"));
  assert.ok(rec.treeViews.has("piLsp.sessions"));
});

test("the tree provider lists sessions, then entries, with the current path marked", async () => {
  const roots = await provider().getChildren();
  assert.equal(roots.length, 1);
  const [session] = roots;
  assert.equal(session.kind, "session");
  assert.equal(session.label, "Fix slow order listing");
  assert.equal(session.contextValue, "session");
  assert.equal(session.collapsibleState, vscode.TreeItemCollapsibleState.Collapsed);

  const entries = await provider().getChildren(session);
  assert.ok(entries.length > 3);
  assert.ok(entries.every((e) => e.kind === "entry"));
  assert.equal(entries[0].entryId, "c2c063fe", "the root chain starts at the first entry");
  // The chain stays flat up to the fork at 24652ae8, whose branches are its children.
  const fork = entries[entries.length - 1];
  assert.equal(fork.entryId, "24652ae8");
  assert.equal(fork.collapsibleState, vscode.TreeItemCollapsibleState.Expanded, "the path's fork is open");
  const branches = await provider().getChildren(fork);
  assert.deepEqual(branches.map((b) => b.entryId).sort(), ["18fc1fcb", "e1afef94"]);
  const dead = branches.find((b) => b.entryId === "e1afef94");
  assert.equal(dead.collapsibleState, vscode.TreeItemCollapsibleState.Collapsed, "an abandoned branch stays folded");
  // The label and the leaf mark lead the row (its end is cut at the side bar's default width); the id follows.
  assert.match(dead.label, /^\[data-layer-question\] OK, that makes sense/);
  assert.equal(dead.description, "e1afef94");
  assert.equal(dead.contextValue, "entry.user");
  assert.equal(dead.iconPath.color.id, "disabledForeground");
  const live = branches.find((b) => b.entryId === "18fc1fcb");
  assert.equal(live.contextValue, "entry.branch_summary.onPath");
  assert.equal(live.iconPath.color.id, "charts.blue");
  const rest = await provider().getChildren(live);
  const leaf = rest.find((e) => e.label.startsWith("← leaf · "));
  assert.ok(leaf, "the leaf is marked");
  assert.equal(leaf.entryId, "8fb6dff7");
  assert.equal(rest.filter((e) => e.label.includes("← leaf")).length, 1);
  assert.equal(leaf.iconPath.id, "debug-stackframe-focused");
  // A click on an entry previews the context there.
  assert.deepEqual(leaf.command.arguments, [{ uri: sessionUri, entryId: leaf.entryId }]);
});

test("the view asks for the tree folded: a folded branch's rows are fetched when it opens", async () => {
  const calls = [];
  const call = api.pi.call;
  api.pi.call = (command, args) => {
    if (command === "pi.getTree") calls.push(args);
    return call.call(api.pi, command, args);
  };
  try {
    provider().refresh();
    const session = (await provider().getChildren())[0];
    const fork = (await provider().getChildren(session)).find((e) => e.entryId === "24652ae8");
    const dead = (await provider().getChildren(fork)).find((b) => b.entryId === "e1afef94");
    assert.deepEqual(calls.map((a) => [a.limit, a.under]), [[300, undefined]], "one folded fetch, nothing under the branch yet");
    assert.equal(dead.node.hidden, 13);
    assert.equal(dead.collapsibleState, vscode.TreeItemCollapsibleState.Collapsed);
    const rows = await provider().getChildren(dead);
    assert.deepEqual(calls.slice(1).map((a) => [a.under, a.start]), [["e1afef94", 0]]);
    assert.equal(rows[0].entryId, "d9977f3d", "the branch's chain, under its head");
    const all = [];
    const walk = async (items) => { for (const item of items) { all.push(item.entryId); await walk(await provider().getChildren(item)); } };
    await walk(rows);
    assert.equal(all.length, 13);
    await provider().getChildren(dead);
    assert.equal(calls.length, 2, "kept, not fetched again");
  } finally {
    api.pi.call = call;
  }
});

test("previewContext opens a read-only pi-context: document with the server's markdown", async () => {
  const doc = await run("piLsp.previewContext", { uri: sessionUri, entryId: "24652ae8" });
  assert.equal(doc.scheme, "pi-context");
  const shown = rec.shown.at(-1);
  assert.equal(shown.uri.toString(), doc.toString());
  assert.match(shown.getText(), /24652ae8/);
  const preview = await api.pi.call("pi.previewContext", { uri: sessionUri, leafId: "24652ae8" });
  assert.equal(shown.getText(), preview.markdown);
  assert.equal(ext.parseContextUri(doc).leafId, "24652ae8");
});

test("the status bar's settled resolves when a later schedule replaces its update", async () => {
  // A test awaiting it hung: the second schedule cleared the timer that would resolve it.
  api.status.schedule(0);
  const first = api.status.settled;
  api.status.schedule(0);
  const which = await Promise.race([first.then(() => "first"), api.status.settled.then(() => "second")]);
  assert.equal(which, "first");
});

test("the status bar shows tokens / window of the session in use", async () => {
  api.status.schedule(0);
  await api.status.settled;
  const item = rec.statusItems.find((i) => i.id === "piLsp.tokens");
  assert.ok(item.visible);
  assert.match(item.text, /\d+(\.\d)?k? \/ 200k/);
  assert.equal(item.command, "piLsp.previewContext");
});

test("Branch here on a tree item moves the leaf; the view refreshes on pi/sessionChanged", async () => {
  const session = (await provider().getChildren())[0];
  const entries = await provider().getChildren(session);
  const target = entries.find((e) => e.entryId === "24652ae8");
  let redraws = 0;
  const sub = provider().onDidChangeTreeData(() => redraws++);
  const result = await run("piLsp.branch", target);
  assert.deepEqual(errors(), []);
  assert.ok(result.leafId);
  await eventually(() => redraws > 0, "a redraw");
  sub.dispose();
  const after = await provider().getChildren(session);
  const fork = after.find((e) => e.entryId === "24652ae8");
  const branches = await provider().getChildren(fork);
  const off = branches.find((b) => b.entryId === "18fc1fcb");
  assert.equal(off.iconPath.color.id, "disabledForeground", "the old branch is now off the path");
  assert.match(fork.label, /^← leaf · /, "the target is the leaf now");
  assert.ok(!branches.some((b) => b.node.type === "leaf"), "the bookkeeping `leaf` entry is not shown");
});

test("Label asks for the text (prefilled) and labels the entry", async () => {
  respond("showInputBox", (options) => (options.prompt.startsWith("Label") ? `${options.value}-2` : undefined));
  await run("piLsp.label", { uri: sessionUri, entryId: "e1afef94" });
  respond("showInputBox");
  assert.deepEqual(errors(), []);
  const tree = await api.pi.call("pi.getTree", { uri: sessionUri });
  assert.equal(tree.nodes.find((n) => n.id === "e1afef94").label, "data-layer-question-2");
});

test("Edit prompt branches before a user message and puts its text in the chat input", async () => {
  const result = await run("piLsp.editPrompt", { uri: sessionUri, entryId: "e1afef94" });
  assert.deepEqual(errors(), []);
  assert.match(result.editorText, /data layer/);
  const panel = api.chats.get(sessionUri);
  assert.ok(panel, "the chat panel opened");
  assert.ok(panel.posted.some((m) => m.type === "setInput" && /data layer/.test(m.text)));
});

test("Diff with current opens vscode.diff on two pi-context documents", async () => {
  const asked = [];
  const call = api.pi.call;
  api.pi.call = function (method, args) {
    asked.push(method);
    return call.call(this, method, args);
  };
  let diff;
  try {
    diff = await run("piLsp.diffWithCurrent", { uri: sessionUri, entryId: "28511eec" });
  } finally {
    api.pi.call = call;
  }
  assert.deepEqual(errors(), []);
  assert.ok(diff.onlyFrom.includes("28511eec"));
  // The tree is not fetched for its leaf: that would replace the view the server holds for the
  // Sessions view, which would then fetch it whole at the next change.
  assert.ok(asked.includes("pi.diffContext") && !asked.includes("pi.getTree"), asked.join(", "));
  const leaf = (await provider().shape(sessionUri)).tree.leafId; // the Sessions view's own
  const executed = rec.executed.find((e) => e.id === "vscode.diff");
  assert.ok(executed);
  const [left, right, title] = executed.args;
  assert.equal(left.scheme, "pi-context");
  assert.equal(ext.parseContextUri(left).leafId, "28511eec");
  assert.equal(right.scheme, "pi-context");
  assert.equal(ext.parseContextUri(right).leafId, leaf, "the current leaf");
  assert.match(title, new RegExp(`current ${leaf} \\(\\d+ tok\\)`));
});

test("Branch with summary runs as a job and lands a branch summary", async () => {
  // Leave the dead end's tip, so going back to the fork leaves a branch to summarize.
  await api.pi.call("pi.branch", { uri: sessionUri, targetId: "28511eec" });
  respond("showInputBox", () => "");
  const done = await run("piLsp.branchWithSummary", { uri: sessionUri, entryId: "24652ae8" });
  respond("showInputBox");
  assert.deepEqual(errors(), []);
  assert.equal(done.ok, true);
  const tree = await api.pi.call("pi.getTree", { uri: sessionUri });
  const leaf = tree.nodes.find((n) => n.id === tree.leafId);
  assert.equal(leaf.type, "branch_summary");
  assert.equal(leaf.parentId, "24652ae8");
});

test("a command without an argument uses the active editor's session file, then the last used", async () => {
  for (const p of api.chats.all()) p.panel.active = false; // no chat panel in front
  const fork = await run("piLsp.fork", { uri: sessionUri, entryId: "24652ae8" });
  assert.ok(fork.uri);
  await eventually(async () => (await api.sessions.list()).length === 2, "the fork in the list");
  // The fork was remembered as the last used session.
  assert.equal(api.sessions.lastUsed(), fork.uri);
  vscode.__test.setActiveEditor(vscode.Uri.file(ws.sessionFile));
  // (ask: false also leaves "last used" alone; a real command would remember this one.)
  assert.equal(await api.sessions.resolve(undefined, { ask: false }), vscode.Uri.file(ws.sessionFile).toString());
  vscode.__test.setActiveEditor(undefined);
  assert.equal(await api.sessions.resolve(), fork.uri);
  // With no editor and nothing used yet: the workspace's newest session, without asking.
  const fresh = new api.sessions.constructor(api.pi, makeContext().workspaceState);
  let asked = false;
  respond("showQuickPick", () => { asked = true; });
  assert.equal(await fresh.resolve(undefined, { ask: false }), (await api.sessions.list())[0].uri);
  assert.equal(await fresh.resolve(), (await api.sessions.list())[0].uri);
  respond("showQuickPick");
  fresh.dispose();
  assert.equal(asked, false);
  // The rename works on the session resolved that way.
  await run("piLsp.rename", { name: "the fork" });
  assert.deepEqual(errors(), []);
  await eventually(async () => (await api.sessions.info(fork.uri))?.name === "the fork", "the new name");
});

test("a last used session that was deleted is forgotten: commands take the newest listed one", async () => {
  // Before, the deleted session stayed the default of every command, across restarts too.
  for (const p of api.chats.all()) p.panel.active = false; // no chat panel in front
  vscode.__test.setActiveEditor(undefined);
  const gone = await run("piLsp.fork", { uri: sessionUri, entryId: "24652ae8" });
  const isGone = (s) => ext.sessionKey(s.uri) === ext.sessionKey(gone.uri);
  await eventually(async () => (await api.sessions.list()).some(isGone), "the fork in the list");
  assert.equal(api.sessions.lastUsed(), gone.uri);
  fs.rmSync(vscode.Uri.parse(gone.uri).fsPath);
  const listed = await eventually(async () => { const l = await api.sessions.list(); return !l.some(isGone) && l; }, "the fork no longer listed");
  assert.equal(api.sessions.lastUsed(), undefined);
  assert.equal(await api.sessions.resolve(), listed[0].uri);
  // Remembered from before a restart: the first list shows it is gone.
  const fresh = new api.sessions.constructor(api.pi, makeContext().workspaceState);
  fresh.remember(gone.uri);
  assert.equal(await fresh.resolve(undefined, { ask: false }), listed[0].uri);
  assert.equal(fresh.lastUsed(), undefined);
  fresh.dispose();
});

test("the session list keeps the server's order, pi's", async () => {
  // It was sorted again by the text of `modified`: a header stamp kept as written, with its
  // offset ("2025-01-01T05:00:00+09:00", 20:00 UTC), came before a later time written in UTC,
  // where pi and the server list by time.
  const listed = [{ uri: "file:///w/a.jsonl", modified: "2025-02-01T00:00:00.000Z" },
    { uri: "file:///w/b.jsonl", modified: "2024-12-31T21:00:00.000Z" },
    { uri: "file:///w/c.jsonl", modified: "2025-01-01T05:00:00+09:00" }];
  const none = () => ({ dispose() {} });
  const pi = { call: async () => ({ sessions: listed }), onSessionsChanged: none, onSessionChanged: none, onTurn: none, onStarted: none, onStopped: none };
  const sessions = new api.sessions.constructor(pi, makeContext().workspaceState);
  assert.deepEqual((await sessions.list()).map((s) => s.uri), listed.map((s) => s.uri));
  sessions.dispose();
});

test("Compact on a branch with nothing to summarize says the server's reason, and asks nothing", async () => {
  // It said its own "nothing to compact on this branch yet." whatever the refusal was.
  const { uri } = await api.pi.call("pi.newSession", {});
  const { reason } = await api.pi.call("pi.compact", { uri, dryRun: true });
  assert.match(reason, /^nothing to compact: /);
  const before = rec.messages.length;
  assert.equal(await run("piLsp.compact", { uri }), undefined);
  assert.deepEqual(rec.messages.slice(before).map((m) => [m.kind, m.message]), [["info", `pi: ${reason}`]]);
});

test("Set model and thinking level write entries; Check finds nothing wrong", async () => {
  await run("piLsp.setModel", { uri: sessionUri, model: "anthropic/claude-haiku-4-5" });
  await run("piLsp.setThinkingLevel", { uri: sessionUri, level: "low" });
  assert.deepEqual(errors(), []);
  const preview = await api.pi.call("pi.previewContext", { uri: sessionUri });
  assert.equal(preview.model, "anthropic/claude-haiku-4-5");
  assert.equal(preview.thinkingLevel, "low");
  assert.deepEqual(await run("piLsp.check", { uri: sessionUri }), []);
  // Without a level: a pick among the levels claude-haiku-4-5 offers, as pi's picker shows them.
  let offered;
  respond("showQuickPick", (items) => { offered = items; return "high"; });
  try {
    await run("piLsp.setThinkingLevel", { uri: sessionUri });
  } finally {
    respond("showQuickPick");
  }
  assert.deepEqual(offered, ["off", "minimal", "low", "medium", "high"]);
  assert.equal((await api.pi.call("pi.previewContext", { uri: sessionUri, page: 1 })).thinkingLevel, "high");
  // A level the model lacks: the one pi records is said, not the one asked for.
  await run("piLsp.setThinkingLevel", { uri: sessionUri, level: "max" });
  assert.ok(rec.messages.some((m) => m.kind === "info" && m.message === "pi: thinking level high (the model offers no max)."),
    JSON.stringify(rec.messages));
});

test("a path longer than the view asks for: its earlier rows come on demand", async () => {
  const path = require("node:path");
  const file = path.join(ws.sessionsDir, "long-path.jsonl");
  const lines = [JSON.stringify({ type: "session", version: 3, id: "long-path", timestamp: "2026-12-01T10:00:00.000Z", cwd: "/tmp/long" })];
  for (let i = 0; i < 350; i++) {
    lines.push(JSON.stringify({ type: "message", id: `p${i}`, parentId: i ? `p${i - 1}` : null, timestamp: "2026-12-01T10:00:01.000Z",
      message: { role: "user", content: `prompt ${i}`, timestamp: 1796119201000 } }));
  }
  require("node:fs").writeFileSync(file, lines.join("\n") + "\n");
  const session = await eventually(async () => (await provider().getChildren()).find((s) => s.kind === "session" && ext.sessionKey(s.sessionUri) === file), "the long session in the view");
  const first = await provider().getChildren(session);
  assert.equal(first.length, 301);
  assert.equal(first[0].kind, "more");
  assert.equal(first[0].label, "… 50 earlier rows");
  assert.deepEqual([first[1].entryId, first.at(-1).entryId], ["p50", "p349"]);
  await run(first[0].command.command, ...first[0].command.arguments);
  const all = await eventually(async () => { const items = await provider().getChildren(session); return items.length === 350 && items; }, "the earlier rows");
  assert.deepEqual([all[0].entryId, all.at(-1).entryId], ["p0", "p349"]);
});

test("a session begun again from the very start shows its first conversation, folded", async () => {
  const { session } = await writeSession("two-roots", [["a1", null], ["a2", "a1"], ["b1", null], ["b2", "b1"]]);
  const rows = await provider().getChildren(session);
  assert.deepEqual(rows.map((item) => item.entryId), ["a1", "b1"]); // no "earlier rows" that never open
  assert.equal(rows[0].collapsibleState, vscode.TreeItemCollapsibleState.Collapsed);
  assert.deepEqual((await provider().getChildren(rows[0])).map((item) => item.entryId), ["a2"]);
  assert.deepEqual((await provider().getChildren(rows[1])).map((item) => item.entryId), ["b2"]);
});

test("a fork with more branches than the view is sent shows the rest a page at a click", async () => {
  const messages = [["r0", null]];
  for (let n = 0; n < 305; n++) messages.push([`b${n}`, "r0"], [`c${n}`, `b${n}`]);
  messages.push(["r1", "r0"]); // the leaf: the branches come before it
  const { file, session } = await writeSession("wide-fork", messages);
  const [top] = await provider().getChildren(session);
  assert.equal(top.entryId, "r0");
  const first = await provider().getChildren(top);
  assert.equal(first.length, 300 + 1 + 1, "300 branches, the rest as one item, then the path");
  assert.deepEqual([first[299].entryId, first[300].kind, first[300].label, first[301].entryId], ["b299", "more", "… 5 more branches", "r1"]);
  const calls = [];
  const call = api.pi.call;
  api.pi.call = (command, args) => {
    if (args?.after) calls.push(args);
    return call.call(api.pi, command, args);
  };
  try {
    // Clicked twice while the page comes: asked once.
    await Promise.all([1, 2].map(() => run(first[300].command.command, ...first[300].command.arguments)));
    assert.deepEqual(calls.map((a) => [a.after, a.start]), [["b299", 0]]);
  } finally {
    api.pi.call = call;
  }
  const all = await eventually(async () => { const items = await provider().getChildren(top); return items.length === 306 && items; }, "the branches left out");
  assert.deepEqual(all.slice(299, 306).map((item) => item.entryId), ["b299", "b300", "b301", "b302", "b303", "b304", "r1"]);
  const fetched = all[304];
  assert.equal(fetched.collapsibleState, vscode.TreeItemCollapsibleState.Collapsed, "a branch fetched is folded as one sent");
  assert.deepEqual((await provider().getChildren(fetched)).map((item) => item.entryId), ["c304"]);
  // A change elsewhere (the path grows): the branches fetched and the rows under them are kept, not asked again.
  const fs = require("node:fs");
  const user = (id, parentId) => JSON.stringify({ type: "message", id, parentId, timestamp: "2026-12-01T10:00:02.000Z",
    message: { role: "user", content: `prompt ${id}`, timestamp: 1796119202000 } });
  fs.appendFileSync(file, user("r2", "r1") + "\n");
  await eventually(async () => (await provider().node(session.sessionUri, "r2")) !== undefined, "the path grown");
  const asked = [];
  api.pi.call = (command, args) => {
    if (command === "pi.getTree") asked.push(args);
    return call.call(api.pi, command, args);
  };
  try {
    assert.deepEqual((await provider().getChildren(fetched)).map((item) => item.entryId), ["c304"]);
    assert.equal((await provider().getChildren((await provider().getChildren(session))[0])).length, 306);
    assert.deepEqual(asked.filter((a) => a.under || a.after), []);
  } finally {
    api.pi.call = call;
  }
  // Another writer answers inside a branch fetched, then moves the leaf back (pi-lsp's durable move hangs under
  // its target): one more row left out after b299, so the branches fetched are other ones now.
  const b302 = (await provider().node(session.sessionUri, "b302"));
  assert.equal(b302.hidden, 1);
  fs.appendFileSync(file, [user("d302", "c302"),
    JSON.stringify({ type: "custom", id: "m302", parentId: "r2", timestamp: "2026-12-01T10:00:02.000Z", customType: "pi-lsp.leaf",
      data: { targetId: "r2" } }),
  ].join("\n") + "\n");
  const again = await eventually(async () => {
    const [root] = await provider().getChildren(session);
    const items = await provider().getChildren(root);
    return items[300]?.kind === "more" && items;
  }, "the branches fetched forgotten");
  assert.equal(again[300].label, "… 5 more branches");
  await run(again[300].command.command, ...again[300].command.arguments);
  assert.equal((await provider().node(session.sessionUri, "b302")).hidden, 2, "fetched again, with its two rows");
});

test("a page of a folded row's rows that comes after they changed is not glued onto the rows held", async () => {
  const messages = [["r0", null], ...chain("x", 502, "r0"), ["r1", "r0"]]; // the leaf: x's 502 rows fold
  const { file, session } = await writeSession("changed-under", messages);
  const [top] = await provider().getChildren(session);
  const folded = (await provider().getChildren(top)).find((item) => item.entryId === "x0");
  assert.equal(folded.node.hidden, 501);
  const first = await provider().getChildren(folded);
  assert.deepEqual([first.length, first.at(-1).label], [501, "… 1 more row"]);
  let release;
  const gate = new Promise((resolve) => { release = resolve; });
  const call = api.pi.call;
  api.pi.call = async (command, args) => {
    if (args?.under === "x0" && args.start > 0) await gate; // the page is on its way while a row comes
    return call.call(api.pi, command, args);
  };
  try {
    const clicked = run(first.at(-1).command.command, ...first.at(-1).command.arguments);
    // Another writer's turn inside x0's rows, then the leaf moved back (pi-lsp's durable move hangs under its target).
    // Its stamp is older than x2's: it is drawn first, and the rows after it move down one.
    require("node:fs").appendFileSync(file, [JSON.stringify({ type: "message", id: "y0", parentId: "x1",
      timestamp: "2026-12-01T10:00:00.500Z", message: { role: "user", content: "prompt y0", timestamp: 1796119202000 } }),
    JSON.stringify({ type: "custom", id: "m0", parentId: "r1", timestamp: "2026-12-01T10:00:02.000Z", customType: "pi-lsp.leaf",
      data: { targetId: "r1" } })].join("\n") + "\n");
    await eventually(async () => (await provider().node(session.sessionUri, "x0"))?.hidden === 502, "the row under x0");
    release();
    await clicked;
  } finally {
    api.pi.call = call;
  }
  const [again] = await provider().getChildren(session);
  const x0 = (await provider().getChildren(again)).find((item) => item.entryId === "x0");
  const ids = await reachable(x0);
  assert.equal(new Set(ids).size, ids.length, "no row twice");
  assert.ok(ids.includes("y0"), "the new row, in the rows fetched again from the top");
});

test("a page of branches that comes after the tree was fetched again goes with the tree fetched", async () => {
  const messages = [["r0", null]];
  for (let n = 0; n < 302; n++) messages.push([`b${n}`, "r0"]);
  messages.push(["r1", "r0"]); // the leaf: the branches come before it
  const { session } = await writeSession("wide-refetched", messages);
  const [top] = await provider().getChildren(session);
  const more = (await provider().getChildren(top)).find((item) => item.kind === "more");
  assert.equal(more.label, "… 2 more branches");
  let release;
  const gate = new Promise((resolve) => { release = resolve; });
  const call = api.pi.call;
  api.pi.call = async (command, args) => {
    if (args?.after) await gate; // the page is on its way while the tree is fetched again
    return call.call(api.pi, command, args);
  };
  try {
    const clicked = run(more.command.command, ...more.command.arguments);
    provider().refresh(session.sessionUri);
    await provider().getChildren((await provider().getChildren(session))[0]); // the tree fetched again
    release();
    await clicked;
  } finally {
    api.pi.call = call;
  }
  const items = await provider().getChildren((await provider().getChildren(session))[0]);
  assert.deepEqual(items.slice(299).map((item) => item.entryId ?? item.label), ["b299", "b300", "b301", "r1"],
    "the page shown with the tree fetched again");
});

/** A session file of user messages, as [id, parentId] pairs in file order; its item in the view. */
async function writeSession(name, messages) {
  const file = require("node:path").join(ws.sessionsDir, `${name}.jsonl`);
  require("node:fs").writeFileSync(file, [
    JSON.stringify({ type: "session", version: 3, id: name, timestamp: "2026-12-01T10:00:00.000Z", cwd: "/tmp/shapes" }),
    ...messages.map(([id, parentId]) => JSON.stringify({ type: "message", id, parentId, timestamp: "2026-12-01T10:00:01.000Z",
      message: { role: "user", content: `prompt ${id}`, timestamp: 1796119201000 } })),
  ].join("\n") + "\n");
  const session = await eventually(async () => (await provider().getChildren()).find((s) => s.kind === "session" && ext.sessionKey(s.sessionUri) === file), `${name} in the view`);
  return { file, session };
}
const chain = (prefix, n, parentId) => Array.from({ length: n }, (_, i) => [`${prefix}${i}`, i ? `${prefix}${i - 1}` : parentId]);

/** Every entry item under `item`, depth first, as the view shows them when all are expanded. */
async function reachable(item) {
  const ids = [];
  for (const child of await provider().getChildren(item)) {
    if (child.kind === "entry") ids.push(child.entryId, ...(await reachable(child)));
  }
  return ids;
}

test("a window that starts at a branch's head, and a folded row that forks at once: every row can be reached", async () => {
  // a0 … a9 < b0 < x0 - x1            (b0 folded: its rows start with a fork)
  //            |    < y0 - y1
  //          < c0 … c299 (the leaf)   (exactly the 300 rows the view asks for: the window starts at c0)
  const { session } = await writeSession("fork-above", [
    ...chain("a", 10, null), ["b0", "a9"], ...chain("x", 2, "b0"), ...chain("y", 2, "b0"), ...chain("c", 300, "a9"),
  ]);
  const first = await provider().getChildren(session);
  assert.deepEqual(first.map((item) => item.entryId ?? item.label), ["… 15 earlier rows", "c0"]);
  const path = await reachable(session);
  assert.deepEqual([path.length, path[0], path.at(-1)], [300, "c0", "c299"]);
  await run(first[0].command.command, ...first[0].command.arguments);
  const all = await eventually(async () => { const ids = await reachable(session); return ids.length === 315 && ids; }, "every row");
  assert.deepEqual(all.slice(9, 17), ["a9", "b0", "x0", "x1", "y0", "y1", "c0", "c1"]);
});

test("a label on a row under an opened folded row shows; a turn's entries under the leaf fetch no rows again", async () => {
  // a0 - a1 < b0 - b1 - b2   (folded, opened)
  //         < c0 - c1 - c2   (the leaf)
  const { file, session } = await writeSession("label-folded", [...chain("a", 2, null), ...chain("b", 3, "a1"), ...chain("c", 3, "a1")]);
  const uri = session.sessionUri;
  const call = api.pi.call;
  const pages = [];
  api.pi.call = (command, args) => {
    if (command === "pi.getTree" && args.under) pages.push(args.under);
    return call.call(api.pi, command, args);
  };
  const item = async (id) => (await provider().getChildren((await provider().getChildren(session))[1])).find((i) => i.entryId === id);
  const labels = async () => (await provider().getChildren(await item("b0"))).map((i) => i.label);
  try {
    assert.deepEqual(await labels(), ["prompt b1", "prompt b2"]);
    assert.deepEqual(pages, ["b0"]);
    require("node:fs").appendFileSync(file, JSON.stringify({ type: "message", id: "c3", parentId: "c2", timestamp: "2026-12-01T10:00:02.000Z",
      message: { role: "user", content: "prompt c3", timestamp: 1796119202000 } }) + "\n");
    await eventually(async () => (await provider().getChildren(await item("c0"))).some((i) => i.entryId === "c3"), "the appended entry");
    assert.deepEqual(await labels(), ["prompt b1", "prompt b2"]);
    assert.deepEqual(pages, ["b0"], "kept: the new entry is under the leaf");
    respond("showInputBox", () => "good idea");
    await run("piLsp.label", { uri, entryId: "b2" });
    respond("showInputBox");
    assert.deepEqual(errors(), []);
    await eventually(async () => (await labels()).includes("[good idea] prompt b2"), "the label under the folded row");
    assert.deepEqual(pages, ["b0", "b0"]);
  } finally {
    api.pi.call = call;
  }
});

/** A session of 350 prompts in a row, as a `file:` uri. */
function longSession(id) {
  const file = require("node:path").join(ws.sessionsDir, `${id}.jsonl`);
  const lines = [JSON.stringify({ type: "session", version: 3, id, timestamp: "2026-12-01T10:00:00.000Z", cwd: "/tmp/long" })];
  for (let i = 0; i < 350; i++) {
    lines.push(JSON.stringify({ type: "message", id: `c${i}`, parentId: i ? `c${i - 1}` : null, timestamp: "2026-12-01T10:00:01.000Z",
      message: { role: "user", content: `prompt ${i}`, timestamp: 1796119201000 } }));
  }
  require("node:fs").writeFileSync(file, lines.join("\n") + "\n");
  return vscode.Uri.file(file).toString();
}

test("a long context's preview shows both ends at first, more on Show More of the Context", async () => {
  const uri = longSession("long-context");
  const doc = await run("piLsp.previewContext", { uri });
  const text = () => rec.shown.at(-1).getText();
  assert.equal(rec.shown.at(-1).uri.toString(), doc.toString());
  assert.match(text(), /## 50\. user/);
  assert.match(text(), /_… messages 51 to 300 not shown_/);
  assert.match(text(), /## 350\. user · \d+ tokens · `c349`/);
  await run("piLsp.showMoreContext", doc);
  const more = await api.contextProvider.provideTextDocumentContent(doc);
  assert.match(more, /## 100\. user/);
  assert.match(more, /_… messages 101 to 250 not shown_/);
});

test("a preview closed and opened again shows its first page: it kept the page of the closed one", async () => {
  const uri = longSession("reopened-context");
  const doc = await run("piLsp.previewContext", { uri });
  await run("piLsp.showMoreContext", doc);
  vscode.__test.closeDocument(doc);
  const again = await vscode.workspace.openTextDocument(doc);
  assert.match(again.getText(), /_… messages 51 to 300 not shown_/);
});

test("Check counts the problems past those listed: its warning said 1,001 for 1,500 blank lines", async () => {
  const path = require("node:path");
  const file = path.join(ws.sessionsDir, "blank-lines.jsonl");
  const head = JSON.stringify({ type: "session", version: 3, id: "blank-lines", timestamp: "2026-12-01T10:00:00.000Z", cwd: "/tmp/blank" });
  fs.writeFileSync(file, head + "\n".repeat(1501));
  const problems = await run("piLsp.check", { uri: vscode.Uri.file(file).toString() });
  assert.equal(problems.length, 1001);
  assert.equal(problems.at(-1).more, 500);
  assert.equal(rec.messages.at(-1).message, "pi: 1500 problem(s) in the session file; see the output.");
});

test("a failing command shows the server's message instead of throwing", async () => {
  const before = errors().length;
  assert.equal(await run("piLsp.branch", { uri: sessionUri, entryId: "no-such-entry" }), undefined);
  assert.equal(errors().length, before + 1);
  assert.match(errors().at(-1), /^pi: /);
});

test("a session with every entry type: the view shows exactly the server's rows, as Neovim draws them", async () => {
  const file = require("node:path").join(ws.sessionsDir, "every-type.jsonl");
  require("node:fs").copyFileSync(require("node:path").join(__dirname, "..", "..", "..", "tests", "fixtures", "every-type.jsonl"), file);
  const uri = vscode.Uri.file(file).toString();
  const rows = (await api.pi.call("pi.getTree", { uri })).nodes;
  const session = await eventually(async () => (await provider().getChildren()).find((s) => s.kind === "session" && ext.sessionKey(s.sessionUri) === file), "the new session in the view");
  assert.equal(session.label, "Every type");
  // Depth first, as the view shows them when every item is expanded.
  const shown = [];
  const walk = async (item) => {
    for (const child of await provider().getChildren(item)) {
      shown.push(child);
      assert.equal(child.collapsibleState !== vscode.TreeItemCollapsibleState.None, (await provider().getChildren(child)).length > 0, child.entryId);
      await walk(child);
    }
  };
  await walk(session);
  assert.deepEqual(shown.map((i) => [i.entryId, i.node.head]), rows.map((r) => [r.id, r.head]));
  assert.deepEqual(rows.map((r) => r.id), ["m1", "u1", "a1", "u2", "a2", "u3", "u4", "cx1", "lb1", "si1"]);
  assert.deepEqual(shown.filter((i) => /^← leaf/.test(i.label)).map((i) => i.entryId), ["u3"]);
  // Another program appends: the view is patched from pi/sessionChanged, not fetched again.
  const call = api.pi.call;
  let fetched = 0;
  api.pi.call = (command, args) => {
    if (command === "pi.getTree") fetched += 1;
    return call.call(api.pi, command, args);
  };
  try {
    require("node:fs").appendFileSync(file, JSON.stringify({ type: "message", id: "u5", parentId: "cl2", timestamp: "2026-12-01T10:00:16.000Z",
      message: { role: "user", content: "Appended by the pi CLI", timestamp: 1796119216000 } }) + "\n");
    const items = async () => {
      const out = [];
      const walk = async (item) => { for (const child of await provider().getChildren(item)) { out.push(child); await walk(child); } };
      await walk(session);
      return out;
    };
    const after = await eventually(async () => { const all = await items(); return all.some((i) => i.entryId === "u5") && all; }, "the appended entry in the view");
    const added = after.find((i) => i.entryId === "u5");
    assert.match(added.label, /^← leaf · Appended by the pi CLI/);
    assert.deepEqual(after.map((i) => i.entryId), [...rows.map((r) => r.id).slice(0, 6), "u5", ...rows.map((r) => r.id).slice(6)]);
    assert.equal(fetched, 0, "the tree was patched, not fetched");
  } finally {
    api.pi.call = call;
  }
});

test("Branch Here on a prompt that is the leaf moves nothing, as pi's /tree; Edit prompt there moves to its parent", async () => {
  const file = require("node:path").join(ws.sessionsDir, "prompt-leaf.jsonl");
  const stamp = "2026-01-02T03:04:05.678Z";
  const usage = { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
  const entries = [
    { type: "session", version: 3, id: "prompt-leaf", timestamp: stamp, cwd: ws.folder },
    { type: "message", id: "u1", parentId: null, timestamp: stamp, message: { role: "user", content: "first", timestamp: 1 } },
    { type: "message", id: "a1", parentId: "u1", timestamp: stamp, message: { role: "assistant", content: [{ type: "text", text: "answer" }], api: "anthropic-messages", provider: "anthropic", model: "m", usage, stopReason: "stop", timestamp: 2 } },
    { type: "message", id: "u2", parentId: "a1", timestamp: stamp, message: { role: "user", content: "still waiting", timestamp: 3 } },
  ];
  fs.writeFileSync(file, entries.map((e) => JSON.stringify(e) + "\n").join(""));
  const uri = vscode.Uri.file(file).toString();
  const earlier = errors().length; // a test before may have left one
  const stay = await run("piLsp.branch", { uri, entryId: "u2" });
  assert.deepEqual(errors().slice(earlier), []);
  assert.equal(stay.leafId, "u2");
  assert.equal(stay.editorText, undefined);
  const edited = await run("piLsp.editPrompt", { uri, entryId: "u2" });
  assert.deepEqual(errors().slice(earlier), []);
  assert.equal(edited.leafId, "a1");
  assert.equal(edited.editorText, "still waiting");
});

const STAMP = "2026-01-02T03:04:05.678Z";
const USAGE = { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
/** A session file of two prompts: u1 answered by a1, then u2 of `content`, answered by a2
 *  (unless not `answered`: u2 is the leaf). */
function twoPrompts(name, content, { answered = true } = {}) {
  const file = require("node:path").join(ws.sessionsDir, name);
  const reply = (id, parentId, text, timestamp) => ({ type: "message", id, parentId, timestamp: STAMP,
    message: { role: "assistant", content: [{ type: "text", text }], api: "anthropic-messages", provider: "anthropic", model: "m", usage: USAGE, stopReason: "stop", timestamp } });
  const entries = [
    { type: "session", version: 3, id: name, timestamp: STAMP, cwd: ws.folder },
    { type: "message", id: "u1", parentId: null, timestamp: STAMP, message: { role: "user", content: "first", timestamp: 1 } },
    reply("a1", "u1", "answer", 2),
    { type: "message", id: "u2", parentId: "a1", timestamp: STAMP, message: { role: "user", content, timestamp: 3 } },
    reply("a2", "u2", "a picture", 4),
  ].slice(0, answered ? 5 : 4);
  fs.writeFileSync(file, entries.map((e) => JSON.stringify(e) + "\n").join(""));
  return vscode.Uri.file(file).toString();
}

test("Edit Prompt on a prompt of an image alone moves to its parent and empties the chat input, as pi", async () => {
  // It moved, then said "that entry is not a user message": the text to edit was "", taken for none.
  const uri = twoPrompts("image-only.jsonl", [{ type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }]);
  const earlier = errors().length;
  const edited = await run("piLsp.editPrompt", { uri, entryId: "u2" });
  assert.deepEqual(errors().slice(earlier), []);
  assert.equal(edited.leafId, "a1");
  assert.equal(edited.editorText, "");
  const inputs = api.chats.get(uri).posted.filter((m) => m.type === "setInput");
  assert.equal(inputs.at(-1)?.text, "", "the chat's input holds the prompt's text: none");
});

test("Branch Here on the leaf says it is already at this point, as pi and Neovim do", async () => {
  // It said nothing: nothing moved, and the user could not tell why.
  const uri = twoPrompts("branch-leaf.jsonl", "hello");
  const infos = () => rec.messages.filter((m) => m.kind === "info").map((m) => m.message);
  const before = infos().length;
  const stay = await run("piLsp.branch", { uri, entryId: "a2" });
  assert.equal(stay.leafId, "a2");
  assert.deepEqual(infos().slice(before), ["pi: already at this point."]);
  const moved = await run("piLsp.branch", { uri, entryId: "a1" });
  assert.equal(moved.leafId, "a1");
  assert.deepEqual(infos().slice(before), ["pi: already at this point."], "a move says nothing of it");
});

test("Edit Prompt against an older server, which refuses fields it does not know, edits any prompt", async () => {
  // Every Edit Prompt sent `edit: true`, which a server before it refuses: every one failed.
  // It is sent only where the server left the leaf on the prompt (the leaf prompt, which an
  // older server moves off without being asked).
  const uri = twoPrompts("older-server.jsonl", "second");
  const call = api.pi.call;
  const sent = [];
  api.pi.call = async (method, params) => {
    if (method === "pi.branch") {
      sent.push(params);
      if ("edit" in params) throw new Error("Object contains unknown field `edit` - at `$[0]`");
    }
    return call.call(api.pi, method, params);
  };
  try {
    const earlier = errors().length;
    const edited = await run("piLsp.editPrompt", { uri, entryId: "u2" });
    assert.deepEqual(errors().slice(earlier), []);
    assert.equal(edited.leafId, "a1");
    assert.equal(edited.editorText, "second");
    assert.deepEqual(sent.map((p) => "edit" in p), [false]);
  } finally {
    api.pi.call = call;
  }
});

test("Edit Prompt on a prompt that is the leaf asks again, with edit, where the server left the leaf on it", async () => {
  const uri = twoPrompts("leaf-prompt-edit.jsonl", "second", { answered: false });
  const call = api.pi.call;
  const sent = [];
  api.pi.call = async (method, params) => {
    if (method === "pi.branch") sent.push(params);
    return call.call(api.pi, method, params);
  };
  try {
    const edited = await run("piLsp.editPrompt", { uri, entryId: "u2" });
    assert.equal(edited.leafId, "a1");
    assert.equal(edited.editorText, "second");
    assert.deepEqual(sent.map((p) => p.edit), [undefined, true]);
  } finally {
    api.pi.call = call;
  }
});
