// A server that stops while a prompt's turn has not started yet (here: it compacts the context
// first, its summary held) never wrote the prompt: the chat gives it back, with its code, as
// Neovim's chat does when its server stops.
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
async function fullSession() {
  const example = path.join(EXAMPLE, ".pi", "sessions", path.basename(ws.sessionFile));
  const full = path.join(ws.sessionsDir, "full.jsonl");
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
  const uri = await fullSession();
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
