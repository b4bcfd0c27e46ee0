// A chat opened while a turn waits to ask again for a failed reply (pi's retry, here a minute's
// wait) shows the wait, counted down, as a chat open all along does. The real server, and the
// fake Anthropic endpoint answering 529 once.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const vscode = require("vscode");
const { eventually, setUp } = require("../testlib/server");
const { activateWithFake } = require("../testlib/activate");
const { errorReply } = require("../testlib/fake-anthropic");

let rig, ws, api, fake, uri;

setUp(async () => {
  ({ fake, ws, api } = rig = await activateWithFake({
    toolApproval: "ask", settings: { summaryModel: null, compaction: { enabled: false }, retry: { baseDelayMs: 60000 } } }));
  uri = vscode.Uri.file(ws.sessionFile).toString();
}, () => rig?.stop());

test("a chat opened while pi waits to ask again for a failed reply shows the wait, and Abort ends it", async () => {
  // It showed the transcript as if no turn ran: no wait and no Abort (it saw no auto_retry_start).
  fake.script(errorReply(529, "overloaded_error", "Overloaded"));
  let waiting = false;
  const listening = api.pi.onTurn((n) => { waiting ||= n.event.type === "auto_retry_start"; });
  try {
    await api.pi.call("pi.prompt", { uri, text: "Try it" });
    await eventually(() => waiting, "the retry's wait to start");
  } finally {
    listening.dispose();
  }
  const panel = await vscode.commands.executeCommand("piLsp.openChat", { uri });
  panel.panel.__receive({ type: "ready" });
  const upserts = () => panel.posted.filter((m) => m.type === "upsert");
  await eventually(() => upserts().some((m) => /↻ Retrying \(1\/3\) in \d+s… \(Abort to cancel\)/.test(m.html)), "the wait in the chat");
  assert.equal(panel.transcript.busy, true, "the turn runs: Abort, Steer and Follow up show");
  assert.ok(panel.posted.filter((m) => m.type === "state").at(-1).state.busy, "in the webview too");
  const reset = panel.posted.filter((m) => m.type === "reset").at(-1);
  assert.match(reset.blocks.map((b) => b.html).join("\n"), /assistant removed from the context/, "the failed reply, left out");
  await panel.receive({ type: "abort" });
  await eventually(() => !panel.transcript.busy && upserts().some((m) => /Retry failed after 1 attempt: Retry cancelled/.test(m.html)),
    "the cancelled wait to end the turn");
  assert.equal(fake.requests.length, 1, "never asked again");
});
