// A chat opened while a turn waits to ask again for a failed reply (pi's retry, here a minute's
// wait) shows the wait, counted down, as a chat open all along does. The real server, and the
// fake Anthropic endpoint answering 529 once.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
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

// A new session whose prompt (sent by `send`) waits to be asked again, then has its file cut
// short by another program, so that the session moves to a new file. `onTurn` hears the turn's
// events until `stop()`; the session and the move ({from, to}).
async function promptThenMove(name, send, onTurn = () => {}) {
  fake.script(errorReply(529, "overloaded_error", "Overloaded"));
  const session = await api.pi.call("pi.newSession", { name });
  let waiting = false;
  let move;
  const listening = [
    api.pi.onTurn((n) => { waiting ||= n.event.type === "auto_retry_start"; onTurn(n); }),
    api.sessions.onDidMove((m) => { move = m; }),
  ];
  const stop = () => listening.forEach((l) => l.dispose());
  try {
    await send(session);
    await eventually(() => waiting, "the retry's wait to start");
    const file = vscode.Uri.parse(session.uri).fsPath;
    const lines = fs.readFileSync(file, "utf8").split("\n");
    fs.writeFileSync(file, lines.slice(0, -3).join("\n") + "\n"); // another program cuts the turn off
    await eventually(() => move, "the session to move to a new file");
  } catch (error) {
    stop();
    throw error;
  }
  return { session, move, stop };
}

/** A chat on `session`, its webview ready. */
async function openChat(session) {
  const chat = await vscode.commands.executeCommand("piLsp.openChat", { uri: session.uri });
  chat.panel.__receive({ type: "ready" });
  return chat;
}

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

test("a session moved to a new file during the wait: the chat opened there shows it, the cut file's shows none", async () => {
  // The wait was kept under the file name the turn began in: a chat opened on the cut file
  // showed the moved turn running, counting down a wait that was not that file's.
  const { move, stop } = await promptThenMove("moving wait",
    (session) => api.pi.call("pi.prompt", { uri: session.uri, text: "Try it too" }));
  stop();
  const retrying = (panel) => panel.posted.some((m) => m.type === "upsert" && /↻ Retrying \(1\/3\) in \d+s…/.test(m.html));
  const cut = await openChat({ uri: move.from });
  // (Its transcript is read: openChat returns once it is.)
  assert.equal(cut.transcript.busy, false, "the cut file runs no turn");
  assert.ok(!retrying(cut), "nor waits");
  const moved = await openChat({ uri: move.to });
  await eventually(() => retrying(moved), "the wait in the chat of the new file");
  assert.equal(moved.transcript.busy, true);
  await moved.receive({ type: "abort" });
  await eventually(() => !moved.transcript.busy, "the cancelled wait to end the turn");
});

test("a chat that followed its session to a new file, closed and opened again there, sees the turn end", async () => {
  // The closed chat kept the moved turn's events (the turn was routed to the chat that followed
  // it): the one opened again showed the turn running, Abort or not, until the window closed.
  let first;
  const { move, stop } = await promptThenMove("moving wait, reopened", async (session) => {
    first = await openChat(session);
    await first.receive({ type: "send", text: "Try it again", delivery: "prompt" });
  });
  stop();
  await eventually(() => first.uri === move.to, "the open chat to follow its session");
  first.panel.dispose(); // the user closes the chat...
  const again = await openChat({ uri: move.to }); // ...and opens it again
  assert.notEqual(again, first);
  await eventually(() => again.transcript.busy, "the chat opened again to show the turn running");
  await again.receive({ type: "abort" });
  await eventually(() => !again.transcript.busy, "the chat opened again to see the turn end");
  assert.equal(again.posted.filter((m) => m.type === "state").at(-1).state.busy, false, "in the webview too");
});

test("a follow-up an abort left unsent comes back in the chat opened again on the file its session moved to", async () => {
  // queue_dropped comes after the turn's end, when its run was no longer kept: it went to the
  // cut file's chat, and the chat opened on the new file, which had not queued it, gave nothing back.
  let first;
  let dropped;
  const { session, move, stop } = await promptThenMove("moving queue", async (session) => {
    first = await openChat(session);
    await first.receive({ type: "send", text: "Try it, moving", delivery: "prompt" });
  }, (n) => { if (n.event.type === "queue_dropped") dropped = n; });
  try {
    await eventually(() => first.uri === move.to, "the open chat to follow its session");
    await first.receive({ type: "send", text: "MOVED-STEER", delivery: "steer" });
    await first.receive({ type: "send", text: "MOVED-FOLLOW", delivery: "followUp" });
    first.panel.dispose(); // the user closes the chat...
    const again = await openChat({ uri: move.to }); // ...and opens it again
    await eventually(() => again.transcript.busy, "the chat opened again to show the turn running");
    await again.receive({ type: "abort" });
    await eventually(() => dropped, "the abort to drop the queued messages");
    assert.equal(dropped.uri, session.uri, "named by the cut file, as every event of the moved turn");
    await eventually(() => again.posted.some((m) => m.type === "setInput" && m.text === "MOVED-STEER\n\nMOVED-FOLLOW" && m.keepDraft),
      "the dropped messages back in the input of the chat open on the new file");
  } finally {
    stop();
  }
});

test("steers and follow-ups an abort left unsent after the session moved come back once in the chat that followed it", async () => {
  let chat;
  let dropped;
  const { move, stop } = await promptThenMove("moving queue, followed", async (session) => {
    chat = await openChat(session);
    await chat.receive({ type: "send", text: "Try it, moving along", delivery: "prompt" });
  }, (n) => { if (n.event.type === "queue_dropped") dropped = n; });
  try {
    await eventually(() => chat.uri === move.to, "the open chat to follow its session");
    await chat.receive({ type: "send", text: "FOLLOWED-STEER", delivery: "steer" });
    await chat.receive({ type: "send", text: "FOLLOWED-FOLLOW", delivery: "followUp" });
    await chat.receive({ type: "abort" });
    await eventually(() => dropped, "the abort to drop the queued messages");
  } finally {
    stop();
  }
  // (The chat hears queue_dropped before this test's listener does.)
  assert.deepEqual(chat.posted.filter((m) => m.type === "setInput").map((m) => m.text), ["FOLLOWED-STEER\n\nFOLLOWED-FOLLOW"],
    "given back once, at the turn's end, not again by queue_dropped");
});
