// The real vscode-languageclient (inside the extension's PiClient) in plain Node, with the
// stand-in `vscode` module, against the real server: start, settings both ways, commands,
// notifications, restart.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");
const ext = require("../out/extension.js");
const { serverCommand, makeWorkspace, useEnv, eventually, PROCESS_CEILING_MS, setUp } = require("../testlib/server");

let ws, restoreEnv, pi, extraDir;
const { rec, setConfig } = vscode.__test;

setUp(async () => {
  ws = makeWorkspace();
  restoreEnv = useEnv(ws.env);
  // A second session folder, only visible when the `sessionDirs` setting reaches the server.
  extraDir = path.join(ws.root, "extra-sessions");
  fs.mkdirSync(extraDir);
  fs.copyFileSync(ws.sessionFile, path.join(extraDir, "2026-12-01T10-00-00-000Z_extra.jsonl"));
  vscode.workspace.workspaceFolders = [{ uri: vscode.Uri.file(ws.folder), name: "workspace", index: 0 }];
  const { command, args } = serverCommand();
  setConfig("piLsp.command", [command, ...args]);
  setConfig("piLsp.sessionDirs", [extraDir]);
  setConfig("piLsp.toolApproval", "ask");
  setConfig("piLsp.model", ""); // empty means unset: must not reach the server as ""
  pi = new ext.PiClient({ apiKey: async () => undefined });
  await pi.start();
}, async () => {
  await pi?.close();
  pi?.dispose();
  restoreEnv?.();
  ws?.cleanup();
});

test("the client starts the server with the settings as initializationOptions", async () => {
  assert.equal(pi.languageClient.isRunning(), true);
  const { sessions } = await pi.call("pi.listSessions", {});
  assert.equal(sessions.length, 2, "the sessionDirs setting reached the server");
  assert.deepEqual(rec.messages.filter((m) => m.kind === "error"), [], "the server accepted the settings");
});

test("the client's ExecuteCommandFeature registers the server's commands in vscode.commands", async () => {
  for (const c of ["pi.listSessions", "pi.getTree", "pi.branch", "pi.prompt"]) assert.ok(rec.commands.has(c), c);
  const viaCommand = await vscode.commands.executeCommand("pi.listSessions", {});
  assert.equal(viaCommand.sessions.length, 2);
});

test("a settings change is sent as workspace/didChangeConfiguration (server keys only)", async () => {
  setConfig("piLsp.sessionDirs", []);
  setConfig("piLsp.models", ["anthropic/x"]); // a client-only setting: the server must never see it
  await eventually(async () => (await pi.call("pi.listSessions", {})).sessions.length === 1, "the extra folder to go");
  assert.deepEqual(rec.messages.filter((m) => m.kind === "error"), [], "no 'invalid settings' complaint");
});

test("server notifications become events: pi/sessionChanged after pi.label", async () => {
  const [session] = (await pi.call("pi.listSessions", {})).sessions;
  const seen = [];
  const sub = pi.onSessionChanged((e) => seen.push(e));
  await pi.call("pi.label", { uri: session.uri, targetId: "24652ae8", label: "diagnosis" });
  const change = await eventually(() => seen[0], "pi/sessionChanged");
  sub.dispose();
  assert.equal(vscode.Uri.parse(change.uri).fsPath, vscode.Uri.parse(session.uri).fsPath);
  assert.equal(change.entries, 57);
});

test("server errors reach the caller with the server's message", async () => {
  await assert.rejects(pi.call("pi.getTree", {}), /uri/);
});

test("settings sent as the server goes away fail nobody: it is given them when it starts again", async () => {
  // The write to a server killed meanwhile rejects (ERR_STREAM_DESTROYED); callers `void` it
  // (a setting or the key changed), so it was an unhandled rejection.
  const client = pi.languageClient;
  const { sendNotification, isRunning } = client;
  let running = true, stops = true;
  client.isRunning = () => running;
  client.sendNotification = async () => {
    running = !stops;
    throw Object.assign(new Error("Cannot call write after a stream was destroyed"), { code: "ERR_STREAM_DESTROYED" });
  };
  try {
    await pi.sendSettings();
    running = true; // one still running that cannot be sent them is an error
    stops = false;
    await assert.rejects(pi.sendSettings(), /stream was destroyed/);
  } finally {
    Object.assign(client, { sendNotification, isRunning });
  }
});

test("changed settings that a running server could not be sent are said, not an unhandled rejection", async () => {
  // sendSettings still fails while the server runs (the write can fail before the library
  // sees the server go), and a changed setting `void`ed it: an unhandled rejection.
  const client = pi.languageClient;
  const { sendNotification } = client;
  const unhandled = [];
  const onUnhandled = (reason) => unhandled.push(reason);
  process.on("unhandledRejection", onUnhandled);
  client.sendNotification = async () => {
    throw Object.assign(new Error("Cannot call write after a stream was destroyed"), { code: "ERR_STREAM_DESTROYED" });
  };
  const before = rec.messages.length;
  try {
    setConfig("piLsp.toolApproval", "deny");
    await eventually(() => rec.messages.slice(before).some((m) => m.kind === "error" &&
      /changed settings did not reach the server: Cannot call write/.test(m.message)));
    await new Promise((resolve) => setImmediate(resolve)); // an unhandled rejection is told by now
    assert.deepEqual(unhandled, []);
  } finally {
    process.off("unhandledRejection", onUnhandled);
    client.sendNotification = sendNotification;
    setConfig("piLsp.toolApproval", "ask");
  }
});

test("changing the launch settings restarts the server", async () => {
  let started = 0;
  const sub = pi.onStarted(() => started++);
  const { command, args } = serverCommand();
  setConfig("piLsp.command", [command, ...args]); // the same command, but the setting "changed"
  await eventually(() => started === 1, "the restart", PROCESS_CEILING_MS);
  sub.dispose();
  assert.equal(pi.languageClient.isRunning(), true);
  assert.equal((await pi.call("pi.listSessions", {})).sessions.length, 1);
});
