// A server that keeps crashing is given up on by the language client (five crashes in three
// minutes): the user is to see that it stopped and how to start it again, in the view and the chat.
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
let redraws = 0, rows, question;

setUp(async () => {
  ({ fake, api } = rig = await activateWithFake({ toolApproval: "ask" }));
  uri = (await api.sessions.list())[0].uri;
  panel = await vscode.commands.executeCommand("piLsp.openChat", { uri });
  panel.panel.__receive({ type: "ready" });
  // As VS Code does: a view told that its data changed asks for its rows again.
  const provider = rec.treeProviders.get("piLsp.sessions");
  provider.onDidChangeTreeData(() => { redraws++; rows = provider.getChildren(); });
}, () => rig?.stop());

const viewState = () => rec.executed.filter((e) => e.id === "setContext" && e.args[0] === "piLsp.sessionsState").at(-1)?.args[1];

/** Each server dies under a question of a running turn. */
async function underQuestion(i) {
  fake.script(toolReply({ text: "Deploying.", calls: [[`toolu_c${i}`, "bash", { command: `make deploy${i}` }]] }));
  await panel.receive({ type: "send", text: `deploy ${i}`, delivery: "prompt" });
  question = await eventually(() => panel.posted.find((m) => m.type === "approval" && m.detail === `make deploy${i}`), "the approval card");
}

/** Kills the server until the client gives up on it (it starts it again after each of four), each
 *  time once `underWay(i)` has begun what it dies under, the view drawn anew after each start. */
async function crashUntilGivenUp(underWay) {
  const client = api.pi.languageClient;
  const givenUp = () => rec.messages.filter((m) => /crashed 5 times/.test(m.message)).length;
  const before = givenUp();
  for (let i = 0; ; i++) {
    await underWay(i);
    const old = client._serverProcess;
    const drawn = redraws;
    old.kill("SIGKILL");
    const next = await eventually(() => (client._serverProcess !== old && client.isRunning() ? "running" : undefined) ||
      (givenUp() > before ? "given up" : undefined), "the client to restart or give up", PROCESS_CEILING_MS);
    if (next === "given up") return;
    await eventually(() => redraws > drawn, "the view to be drawn anew");
    await rows;
  }
}

test("a server the client gave up on: the view offers a restart, a prompt says how, and Restart Server brings it back", async () => {
  const provider = rec.treeProviders.get("piLsp.sessions");
  assert.ok((await provider.getChildren()).length > 0);
  assert.equal(viewState(), "ready");
  await crashUntilGivenUp(underQuestion);
  // The turn and its question ended with the server: the chat stayed busy (Abort failing), the
  // question open in the chat and the notification center.
  await eventually(() => !panel.transcript.busy, "the chat to go idle");
  const note = rec.progress.find((p) => p.options.title.includes(`wants to run bash: ${question.detail} (session: `));
  await eventually(() => panel.posted.some((m) => m.type === "approvalDone" && m.id === question.id) && note.done, "the question to go, card and notification");
  // The view showed the sessions still, each click failing with "No preview: Client is not running".
  await eventually(() => viewState() === "failed", "the view to say the server did not answer (Restart Server)");
  await panel.receive({ type: "send", text: "hello?", delivery: "prompt" });
  const error = panel.posted.filter((m) => m.type === "upsert" && /notice error/.test(m.html)).at(-1);
  assert.match(error.html, /the pi-lsp server stopped.*pi: Restart Server/, "the chat says what happened and what to do");
  assert.equal(panel.posted.filter((m) => m.type === "setInput").at(-1).text, "hello?", "the prompt is back in the input");

  await vscode.commands.executeCommand("piLsp.restartServer");
  await eventually(() => viewState() === "ready", "the view to list the sessions again");
  fake.script(textReply("back again"));
  await panel.receive({ type: "send", text: "hello again", delivery: "prompt" });
  // The reload after the turn's end (the restart's own reload may come while it runs).
  await eventually(() => !panel.transcript.busy && /back again/.test(panel.posted.filter((m) => m.type === "reset").at(-1).blocks.map((b) => b.html).join("\n")),
    "the turn to run and the chat to reload");
});

test("a server the client gave up on under a job: its notification goes and the command says why", async () => {
  // A job the old server never finishes (the example's summaries are made at once, without a
  // model): the command's pi.branchWithSummary answers with it.
  const call = api.pi.call;
  api.pi.call = (command, args) => command === "pi.branchWithSummary" ? Promise.resolve({ jobId: "lost-job" }) : call.call(api.pi, command, args);
  try {
    let job, note;
    await crashUntilGivenUp(async () => {
      job = vscode.commands.executeCommand("piLsp.branchWithSummary", { uri, entryId: "24652ae8", instructions: "" });
      note = await eventually(() => rec.progress.find((p) => !p.done && /summarizing the branch/.test(p.options.title)), "the job's notification");
    });
    await job;
    assert.ok(note.done);
    assert.ok(rec.messages.some((m) => m.kind === "error" && /branch summary failed: the pi-lsp server stopped/.test(m.message)), "the command says why");
  } finally {
    api.pi.call = call;
  }
});
