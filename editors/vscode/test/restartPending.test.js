// A server that stops while a prompt's turn has not started yet (here: it compacts the context
// first, its summary held) never wrote the prompt: the chat gives it back, with its code, as
// Neovim's chat does when its server stops. One that wrote it (a clean stop writes it aborted)
// keeps it in the session, whether or not its agent_start reached the chat.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");
const { EXAMPLE, eventually, PROCESS_CEILING_MS, setUp } = require("../testlib/server");
const { activateWithFake } = require("../testlib/activate");
const { held, textReply } = require("../testlib/fake-anthropic");

let rig, ws, api, fake;

setUp(async () => {
  ({ fake, ws, api } = rig = await activateWithFake({ toolApproval: "ask", settings: { compaction: { keepRecentTokens: 500 } } }));
}, () => rig?.stop());

/** A copy of the example whose leaf's reply says the window is nearly full: a prompt compacts first. */
async function fullSession(name) {
  const example = path.join(EXAMPLE, ".pi", "sessions", path.basename(ws.sessionFile));
  const full = path.join(ws.sessionsDir, name);
  fs.writeFileSync(full, fs.readFileSync(example, "utf8").replace('"totalTokens":8124', '"totalTokens":199000'));
  const uri = vscode.Uri.file(full).toString();
  await eventually(async () => (await api.sessions.list()).some((s) => s.uri === uri), "the copy to be listed");
  return uri;
}

/** Kills the server process, as a crash would, and waits for the client to start a new one. */
async function crash() {
  const client = api.pi.languageClient;
  const old = client._serverProcess;
  old.kill("SIGKILL");
  await eventually(() => client._serverProcess !== old && client.isRunning(), "the client to start the server again", PROCESS_CEILING_MS);
}

test("a server killed before a prompt's turn began: the prompt and its code come back to the input", async () => {
  // They were dropped: the chat forgot the prompt, whose text and code nothing else held.
  const uri = await fullSession("full.jsonl");
  const panel = await vscode.commands.executeCommand("piLsp.openChat", { uri });
  panel.panel.__receive({ type: "ready" });
  const summary = held(textReply("## Goal\nsummarized"), 1);
  fake.script(summary.reply);
  const code = { label: "kept.py:1", context: { uri: vscode.Uri.file(path.join(ws.folder, "kept.py")).toString(),
    text: "kept = 1\n", languageId: "python", range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } } } };
  const mark = panel.posted.length;
  try {
    panel.attach(code);
    await panel.receive({ type: "send", text: "never started", delivery: "prompt" });
    await eventually(() => fake.requests.length === 1, "the compaction's summary to be asked for");
    assert.deepEqual(panel.attachments, [], "the code went with the prompt");
    await crash();
  } finally {
    summary.release();
  }
  await eventually(() => !panel.transcript.busy, "the chat to go idle");
  const back = panel.posted.slice(mark).filter((m) => m.type === "setInput");
  assert.deepEqual(back.map((m) => m.text), ["never started"], "the prompt is back in the input");
  assert.equal(back[0].keepDraft, true, "before a draft typed meanwhile");
  assert.deepEqual(panel.attachments.map((a) => a.label), ["kept.py:1"], "its code attached again");
  assert.deepEqual(panel.posted.filter((m) => m.type === "state").at(-1).state.attachments, ["kept.py:1"], "and shown");
  assert.ok(!fake.requests.some((r) => JSON.stringify(r.body).includes("never started")), "the prompt never reached the model");
});

test("a server stopped after it wrote the prompt, its agent_start unseen: the prompt is not given back", async () => {
  // It was: the chat gave back every prompt whose agent_start had not come, so the prompt was
  // both in the session (written aborted by the stopping server) and back in the input.
  const uri = await fullSession("written.jsonl");
  const file = vscode.Uri.parse(uri).fsPath;
  const panel = await vscode.commands.executeCommand("piLsp.openChat", { uri });
  panel.panel.__receive({ type: "ready" });
  const summary = held(textReply("## Goal\nsummarized"), 1);
  fake.script(summary.reply);
  const asked = fake.requests.length;
  const mark = panel.posted.length;
  const turns = api.pi.turnEmitter;
  const fire = turns.fire;
  try {
    await panel.receive({ type: "send", text: "written before the stop", delivery: "prompt" });
    await eventually(() => fake.requests.length === asked + 1, "the compaction's summary to be asked for");
    turns.fire = () => undefined; // the stopping server's events of the turn never reach the chat
    await vscode.commands.executeCommand("piLsp.restartServer"); // a clean stop: the prompt is written aborted
  } finally {
    turns.fire = fire;
    summary.release();
  }
  assert.ok(fs.readFileSync(file, "utf8").includes("written before the stop"), "the stopped server wrote the prompt");
  await eventually(() => !panel.transcript.busy && panel.transcript.blocks.some((b) => b.kind === "user" &&
    b.parts.some((p) => p.type === "text" && p.text === "written before the stop")), "the reloaded transcript to show the prompt");
  const back = panel.posted.slice(mark).filter((m) => m.type === "setInput");
  assert.deepEqual(back.map((m) => m.text), [], "the prompt is in the session, not also back in the input");
});
