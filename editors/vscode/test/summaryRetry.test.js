// A summary's retries show where a turn's do: in the progress the language client draws from the
// server's $/progress (the status bar), for a Compact job and for the compaction a prompt makes
// first. The real server summarizes with the fake Anthropic endpoint, which answers 503 once.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");
const { EXAMPLE, eventually, setUp } = require("../testlib/server");
const { activateWithFake } = require("../testlib/activate");
const { errorReply, textReply } = require("../testlib/fake-anthropic");

const { rec, respond } = vscode.__test;
const WAIT = "Anthropic 503 api_error: Service unavailable; retrying in 0.001s (1/3)";
let rig, ws, api, fake, uri;

setUp(async () => {
  ({ fake, ws, api } = rig = await activateWithFake({
    toolApproval: "ask", settings: { compaction: { keepRecentTokens: 500 }, retry: { baseDelayMs: 1 } } }));
  uri = vscode.Uri.file(ws.sessionFile).toString();
}, () => rig?.stop());

/** What every progress reported, in order. */
const reported = () => rec.progress.flatMap((p) => p.reports.map((r) => r.message));

test("Compact's summary retry wait shows in its progress, as a turn's retry does", async () => {
  fake.script(errorReply(503, "api_error", "Service unavailable"), textReply("## Goal\nsummarized"), textReply("## Goal\nsummarized"));
  respond("showInformationMessage", () => "Compact");
  respond("showInputBox", () => "");
  try {
    const done = await vscode.commands.executeCommand("piLsp.compact", { uri });
    assert.equal(done.ok, true, JSON.stringify(done));
  } finally {
    rec.responders.clear();
  }
  await eventually(() => reported().indexOf("compacting the context") > reported().indexOf(WAIT) && reported().includes(WAIT),
    "the wait, then the attempt after it, in the job's progress");
});

test("the compaction a prompt makes first shows its retry wait in the turn's progress", async () => {
  // A copy of the example (not compacted yet) whose leaf's reply says the window is nearly
  // full, so the prompt compacts first.
  const example = path.join(EXAMPLE, ".pi", "sessions", path.basename(ws.sessionFile));
  const full = path.join(ws.sessionsDir, "full.jsonl");
  fs.writeFileSync(full, fs.readFileSync(example, "utf8").replace('"totalTokens":8124', '"totalTokens":199000'));
  const fullUri = vscode.Uri.file(full).toString();
  await eventually(async () => (await api.sessions.list()).some((s) => s.uri === fullUri), "the copy to be listed");
  fake.script(errorReply(503, "api_error", "Service unavailable"), ...Array.from({ length: 3 }, () => textReply("## Goal\nsummarized")));
  const before = reported().filter((m) => m === WAIT).length;
  const turns = [];
  const sub = api.pi.onTurn((t) => turns.push(t.event));
  try {
    await api.pi.call("pi.prompt", { uri: fullUri, text: "NEXT" });
    await eventually(() => turns.some((e) => e.type === "agent_end" || e.type === "error"), "the turn to end");
  } finally {
    sub.dispose();
  }
  assert.deepEqual(turns.filter((e) => e.type.startsWith("summarization_retry")).map((e) => e.type),
    ["summarization_retry_scheduled", "summarization_retry_attempt_start", "summarization_retry_finished"]);
  // Then the attempt after it (the client draws each report as it comes, after the turn's end).
  await eventually(() => reported().filter((m) => m === WAIT).length === before + 1 && reported().includes("auto-compacting"),
    "the wait and the attempt after it in the turn's progress: " + JSON.stringify(rec.progress.map((p) => [p.options.title, p.reports.map((r) => r.message)])));
});
