// A server that dies is started again by the language client itself (no Restart Server): what
// the old server had under way (a streamed reply, a question, a job) must not stay open forever.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const vscode = require("vscode");
const { eventually, PROCESS_CEILING_MS, setUp } = require("../testlib/server");
const { activateWithFake } = require("../testlib/activate");
const { textReply, toolReply } = require("../testlib/fake-anthropic");

const { rec } = vscode.__test;
let rig, api, fake, uri, panel;

setUp(async () => {
  ({ fake, api } = rig = await activateWithFake({ toolApproval: "ask" }));
  uri = (await api.sessions.list())[0].uri;
  panel = await vscode.commands.executeCommand("piLsp.openChat", { uri });
  panel.panel.__receive({ type: "ready" });
}, () => rig?.stop());

const lastReset = () => panel.posted.filter((m) => m.type === "reset").at(-1);
const resets = () => panel.posted.filter((m) => m.type === "reset").length;

/** Kills the server process, as a crash would, and waits for the client to start a new one. */
async function crash() {
  const client = api.pi.languageClient;
  const old = client._serverProcess;
  old.kill("SIGKILL");
  await eventually(() => client._serverProcess !== old && client.isRunning(), "the client to start the server again", PROCESS_CEILING_MS);
}

function slowReply(words) {
  const reply = textReply(...Array.from({ length: words }, (_, i) => `w${i} `));
  reply.delay = 150;
  return reply;
}

test("a server killed mid-reply: the chat goes idle and reloads, and the next prompt runs", async () => {
  fake.script(slowReply(80));
  await panel.receive({ type: "send", text: "talk slowly", delivery: "prompt" });
  await eventually(() => panel.posted.some((m) => m.type === "upsert" && /w3 /.test(m.html)), "the reply to stream");
  const before = resets();
  await crash();
  await eventually(() => !panel.transcript.busy && resets() > before, "the chat to go idle and reload");
  assert.equal(lastReset().state.busy, false);
  assert.ok(!panel.transcript.blocks.some((b) => b.streaming), "no block is left streaming");
  fake.script(textReply("back again"));
  await panel.receive({ type: "send", text: "still there?", delivery: "prompt" });
  await eventually(() => !panel.transcript.busy && lastReset().blocks.some((b) => b.html.includes("back again")), "a new turn to run");
});

test("a server killed under a question: its card and notification go", async () => {
  fake.script(toolReply({ text: "Deploying.", calls: [["toolu_k1", "bash", { command: "make deploy" }]] }));
  await panel.receive({ type: "send", text: "deploy it", delivery: "prompt" });
  const card = await eventually(() => panel.posted.find((m) => m.type === "approval" && m.detail === "make deploy"), "the approval card");
  const note = rec.progress.find((p) => p.options.title.includes("wants to run bash: make deploy (session: "));
  assert.ok(note && !note.done);
  await crash();
  await eventually(() => panel.posted.some((m) => m.type === "approvalDone" && m.id === card.id) && note.done, "the card and the notification to go");
  await eventually(() => !panel.transcript.busy, "the chat to go idle");
});

test("a server killed under a job: its notification goes and the command says why", async () => {
  // A job the old server never finishes (the example's summaries are made without a model, at
  // once): the command's pi.branchWithSummary answers with it.
  const call = api.pi.call;
  api.pi.call = (command, args) => command === "pi.branchWithSummary" ? Promise.resolve({ jobId: "lost-job" }) : call.call(api.pi, command, args);
  try {
    const job = vscode.commands.executeCommand("piLsp.branchWithSummary", { uri, entryId: "24652ae8", instructions: "" });
    const note = await eventually(() => rec.progress.find((p) => !p.done && /summarizing the branch/.test(p.options.title)), "the job's notification");
    await crash();
    await job;
    assert.ok(note.done);
    assert.ok(rec.messages.some((m) => m.kind === "error" && /branch summary failed: the pi-lsp server restarted/.test(m.message)), "the command says why");
  } finally {
    api.pi.call = call;
  }
});

test("a restarted server's trees are fetched anew, not patched from the old server's", async () => {
  const held = api.view.shape(uri);
  await held;
  assert.equal(api.view.shape(uri), held, "held while the server runs");
  await crash();
  await eventually(() => api.view.shape(uri) !== held, "the held tree to be dropped");
});
