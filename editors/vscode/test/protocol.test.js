// Contract test: the real server over stdio, with the JSON-RPC stack VS Code itself uses and
// no `vscode` at all. It pins the shapes the extension reads (DESIGN.md, "LSP surface").
"use strict";
const { test } = require("node:test");
const assert = require("node:assert/strict");
const cp = require("node:child_process");
const path = require("node:path");
// The protocol package re-exports its own vscode-jsonrpc; a second copy breaks instanceof checks.
const rpc = require("vscode-languageserver-protocol/node");
const { pathToFileURL, fileURLToPath } = require("node:url");
const { serverCommand, makeWorkspace, eventually, setUp } = require("../testlib/server");

const CLIENT_COMMANDS = [
  "pi.listSessions", "pi.newSession", "pi.getTree", "pi.previewContext", "pi.diffContext", "pi.branch",
  "pi.branchWithSummary", "pi.compact", "pi.label", "pi.fork", "pi.setName", "pi.setModel",
  "pi.setThinkingLevel", "pi.prompt", "pi.abort", "pi.check",
];

let ws, child, conn;
const notes = [];
const exec = (command, arg) => conn.sendRequest(rpc.ExecuteCommandRequest.type, { command, arguments: [arg] });
const samePath = (a, b) => fileURLToPath(a) === fileURLToPath(b);
const keys = (o) => Object.keys(o).sort();

setUp(async () => {
  ws = makeWorkspace();
  const { command, args } = serverCommand();
  // The server logs the expected InvalidParams below with tracebacks: keep stderr quiet
  // unless asked (PI_TEST_VERBOSE=1).
  child = cp.spawn(command, args, { cwd: ws.folder, env: ws.env, stdio: ["pipe", "pipe", process.env.PI_TEST_VERBOSE ? "inherit" : "ignore"] });
  conn = rpc.createMessageConnection(new rpc.StreamMessageReader(child.stdout), new rpc.StreamMessageWriter(child.stdin));
  for (const method of ["pi/sessionsChanged", "pi/sessionChanged", "pi/turn", "pi/jobDone"]) {
    conn.onNotification(method, (params) => notes.push({ method, params }));
  }
  conn.onNotification(rpc.ShowMessageNotification.type, (p) => notes.push({ method: "window/showMessage", params: p }));
  conn.onRequest(rpc.WorkDoneProgressCreateRequest.type, () => null);
  conn.listen();
  const folderUri = pathToFileURL(ws.folder).href;
  const init = await conn.sendRequest(rpc.InitializeRequest.type, {
    processId: process.pid, rootUri: folderUri, workspaceFolders: [{ uri: folderUri, name: "workspace" }],
    capabilities: { window: { workDoneProgress: true, showMessage: { messageActionItem: { additionalPropertiesSupport: false } } }, workspace: { workspaceFolders: true } },
    initializationOptions: { toolApproval: "ask", durableLeafMoves: true },
  });
  const advertised = init.capabilities.executeCommandProvider.commands;
  for (const c of CLIENT_COMMANDS) assert.ok(advertised.includes(c), `server does not advertise ${c}`);
  await conn.sendNotification(rpc.InitializedNotification.type, {});
}, async () => {
  if (conn && child.exitCode === null) {
    await conn.sendRequest(rpc.ShutdownRequest.type);
    await conn.sendNotification(rpc.ExitNotification.type);
    const code = await new Promise((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.on("exit", resolve)));
    assert.equal(code, 0, "the server exits 0 after shutdown/exit");
  }
  conn?.dispose();
  ws?.cleanup();
});

let session;

test("pi.listSessions lists the workspace session with the documented keys", async () => {
  const { sessions } = await exec("pi.listSessions", {});
  assert.equal(sessions.length, 1);
  session = sessions[0];
  assert.deepEqual(keys(session), ["created", "cwd", "entryCount", "firstMessage", "id", "modified", "name", "parentSession", "title", "uri"]);
  assert.ok(samePath(session.uri, pathToFileURL(ws.sessionFile).href));
  assert.equal(session.name, "Fix slow order listing");
  assert.equal(session.entryCount, 56);
  assert.equal(notes.filter((n) => n.method === "window/showMessage").length, 0, "no settings complaint");
});

test("pi.getTree: one row per entry, parents inside the tree, the leaf on the path", async () => {
  const tree = await exec("pi.getTree", { uri: session.uri });
  assert.deepEqual(keys(tree), ["earlier", "entries", "leafId", "leafRow", "nodes", "title", "version"]);
  assert.equal(tree.nodes.length, 56);
  assert.equal(tree.entries, 56);
  assert.equal(tree.title, session.title);
  const ids = new Set(tree.nodes.map((n) => n.id));
  for (const n of tree.nodes) {
    assert.deepEqual(keys(n), ["depth", "head", "hidden", "id", "label", "moreBranches", "moreRows", "onPath", "parentId", "preview", "role", "timestamp", "type"]);
    assert.ok(n.parentId === null || ids.has(n.parentId), `dangling parent ${n.parentId}`);
  }
  const leaf = tree.nodes.find((n) => n.id === tree.leafId);
  assert.ok(leaf && leaf.onPath);
  assert.ok(tree.nodes.some((n) => !n.onPath), "the example has an abandoned branch");
  assert.equal(tree.nodes.find((n) => n.id === "e1afef94").label, "data-layer-question");
});

test("pi.previewContext: messages with entry ids and token counts, and markdown", async () => {
  const preview = await exec("pi.previewContext", { uri: session.uri });
  for (const k of ["leafId", "model", "thinkingLevel", "messages", "totalTokens", "contextWindow", "markdown"]) assert.ok(k in preview, k);
  assert.equal(typeof preview.markdown, "string");
  assert.ok(preview.markdown.length > 100);
  assert.equal(preview.model, "anthropic/claude-opus-4-5");
  assert.ok(preview.totalTokens > 0 && preview.contextWindow >= preview.totalTokens);
  for (const m of preview.messages) {
    assert.deepEqual(keys(m), ["entryId", "message", "role", "tokens"]);
    assert.equal(typeof m.message.role, "string");
  }
  const llm = await exec("pi.previewContext", { uri: session.uri, leafId: "24652ae8", layer: "llm" });
  assert.equal(llm.leafId, "24652ae8");
  assert.ok(llm.messages.every((m) => ["user", "assistant", "toolResult"].includes(m.role)));
});

test("pi.diffContext: entry ids only on either side, and both totals", async () => {
  const tree = await exec("pi.getTree", { uri: session.uri });
  const diff = await exec("pi.diffContext", { uri: session.uri, fromLeafId: "28511eec", toLeafId: tree.leafId });
  assert.deepEqual(keys(diff), ["fromTokens", "onlyFrom", "onlyTo", "toLeafId", "toTokens"]);
  assert.equal(diff.toLeafId, tree.leafId);
  assert.deepEqual(await exec("pi.diffContext", { uri: session.uri, fromLeafId: "28511eec" }), diff, "the current leaf by default");
  assert.ok(diff.onlyFrom.includes("28511eec"));
  assert.ok(diff.onlyTo.length > 0);
});

test("pi.branch moves the leaf and the server says so with pi/sessionChanged", async () => {
  const before = notes.length;
  const result = await exec("pi.branch", { uri: session.uri, targetId: "24652ae8" });
  assert.ok("leafId" in result);
  const change = await eventually(() => notes.slice(before).find((n) => n.method === "pi/sessionChanged"), "pi/sessionChanged");
  // The server holds the tree fetched above, so the note says how it changed.
  assert.deepEqual(keys(change.params), ["entries", "leafId", "reloaded", "title", "tree", "uri"]);
  assert.ok(samePath(change.params.uri, session.uri));
  assert.equal(change.params.reloaded, false);
  assert.equal(change.params.entries, 57, "a durable leaf move appends one entry");
  const tree = await exec("pi.getTree", { uri: session.uri });
  assert.equal(tree.leafId, result.leafId);
  assert.equal(change.params.tree.version, tree.version);
  assert.equal(change.params.tree.leafRow, tree.leafRow);
  assert.ok(tree.nodes.find((n) => n.id === "24652ae8").onPath);
  assert.ok(!tree.nodes.find((n) => n.id === "b45d7b19").onPath, "the old branch is off the path");
});

test("pi.branch to a user message returns its text to edit", async () => {
  const result = await exec("pi.branch", { uri: session.uri, targetId: "e1afef94" });
  assert.match(result.editorText, /How should we fix the data layer/);
  const tree = await exec("pi.getTree", { uri: session.uri });
  assert.ok(!tree.nodes.find((n) => n.id === "e1afef94").onPath, "the leaf is the message's parent");
});

test("pi.label and pi.fork; pi.fork announces pi/sessionsChanged", async () => {
  assert.deepEqual(await exec("pi.label", { uri: session.uri, targetId: "24652ae8", label: "diagnosis" }), {});
  const tree = await exec("pi.getTree", { uri: session.uri });
  assert.equal(tree.nodes.find((n) => n.id === "24652ae8").label, "diagnosis");
  const before = notes.length;
  const forked = await exec("pi.fork", { uri: session.uri, leafId: "24652ae8" });
  assert.ok(forked.uri.endsWith(".jsonl") && !samePath(forked.uri, session.uri));
  await eventually(() => notes.slice(before).find((n) => n.method === "pi/sessionsChanged"), "pi/sessionsChanged");
  const { sessions } = await exec("pi.listSessions", {});
  assert.equal(sessions.length, 2);
  assert.ok(sessions.some((s) => samePath(s.uri, forked.uri) && s.parentSession));
});

test("bad arguments answer InvalidParams naming the field", async () => {
  await assert.rejects(exec("pi.getTree", {}), (e) => e.code === -32602 && /uri/.test(e.message));
  await assert.rejects(exec("pi.branch", { uri: session.uri, targetId: "nope" }), (e) => e.code === -32602);
  await assert.rejects(exec("pi.setThinkingLevel", { uri: session.uri, level: "extreme" }), (e) => e.code === -32602 && /level/.test(e.message));
});

test("pi.compact dry run gives a plan; pi.check finds no problems", async () => {
  const { plan } = await exec("pi.compact", { uri: session.uri, dryRun: true });
  assert.ok(plan === null || typeof plan.firstKeptEntryId === "string");
  const { problems } = await exec("pi.check", { uri: session.uri });
  assert.deepEqual(problems, []);
  assert.equal(path.extname(fileURLToPath(session.uri)), ".jsonl");
});
