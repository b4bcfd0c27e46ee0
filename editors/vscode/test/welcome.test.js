// What the Sessions view says while it has no sessions to show: "starting" until the server
// first answers (never "no sessions" before that), "no sessions" once it said so, and a way
// out when it cannot start. VS Code picks the welcome text by its `when` clause.
"use strict";
require("../testlib/register-vscode-stub");
const { test, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");
const manifest = require("../package.json");
const ext = require("../out/extension.js");
const { serverCommand, makeWorkspace, useEnv } = require("../testlib/server");
const { makeContext, disposeAll } = require("../testlib/context");

const { rec, setConfig } = vscode.__test;
const cleanups = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** The context keys as the extension set them (setContext is VS Code's, so the stub records it). */
function contextKeys() {
  const keys = {};
  for (const e of rec.executed) if (e.id === "setContext") keys[e.args[0]] = e.args[1];
  return keys;
}

/** The welcome texts VS Code shows in the empty view, by their `when` clauses. */
function welcome() {
  const keys = contextKeys();
  const holds = (when) => when.split("&&").every((clause) => {
    const m = /^\s*([\w.]+)\s*(==|!=)\s*(\w+)\s*$/.exec(clause);
    assert.ok(m, `a clause this test can read: ${clause}`);
    return (keys[m[1]] === m[3]) === (m[2] === "==");
  });
  return manifest.contributes.viewsWelcome
    .filter((w) => w.view === "piLsp.sessions" && (!w.when || holds(w.when)))
    .map((w) => w.contents);
}

async function activate(folder, command) {
  vscode.workspace.workspaceFolders = [{ uri: vscode.Uri.file(folder), name: "workspace", index: 0 }];
  setConfig("piLsp.command", command);
  const context = makeContext();
  const api = await ext.activate(context);
  cleanups.push(async () => {
    await ext.deactivate();
    disposeAll(context);
  });
  return { api, provider: rec.treeProviders.get("piLsp.sessions") };
}

test("a server that does not start: the view offers its output and a restart, not an empty workspace", async () => {
  const ws = makeWorkspace();
  cleanups.push(useEnv(ws.env), ws.cleanup);
  const { provider } = await activate(ws.folder, [path.join(ws.root, "no-such-pi-lsp"), "serve"]);
  assert.deepEqual(await provider.getChildren(), []);
  assert.deepEqual(welcome(), ["The pi-lsp server did not answer.\n[Show Server Output](command:piLsp.showOutput)\n[Restart Server](command:piLsp.restartServer)"]);
  for (const c of cleanups.splice(0).reverse()) await c();
});

test("a workspace without sessions: starting until the server answers, then no sessions", async () => {
  rec.executed.length = 0;
  const ws = makeWorkspace();
  cleanups.push(useEnv(ws.env), ws.cleanup);
  for (const f of fs.readdirSync(ws.sessionsDir)) fs.rmSync(path.join(ws.sessionsDir, f));
  const { command, args } = serverCommand();
  const { provider } = await activate(ws.folder, [command, ...args]);
  assert.deepEqual(welcome(), ["Starting the pi-lsp server…"], "nothing has been listed yet");
  assert.deepEqual(await provider.getChildren(), []);
  assert.deepEqual(welcome(), ["No pi sessions in this workspace yet.\n[New Session](command:piLsp.newSession)"]);
});
