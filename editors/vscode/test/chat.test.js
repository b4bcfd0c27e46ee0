// The chat panel end to end: activate(), the real server, a local fake Anthropic endpoint.
// A prompt streams into the panel, a bash call asks for approval through pi/approveTool
// (answered in a notification or in the panel; an abort takes the question away), and
// abort/steer go through.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const cp = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const { once } = require("node:events");
const path = require("node:path");
const vscode = require("vscode");
const ext = require("../out/extension.js");
const { eventually, setUp, PROCESS_CEILING_MS } = require("../testlib/server");
const { activateWithFake } = require("../testlib/activate");
const { errorReply, held, textReply, toolReply } = require("../testlib/fake-anthropic");

const { rec, respond, links, click } = vscode.__test;
let rig, ws, api, fake, uri, panel;

setUp(async () => {
  ({ fake, ws, api } = rig = await activateWithFake({ toolApproval: "ask" }));
  // A model of pi's models.json, with the name it gives it.
  fs.writeFileSync(path.join(ws.folder, ".pi", "models.json"), JSON.stringify({ providers: { ollama: {
    baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "ollama",
    models: [{ id: "qwen2.5-coder:7b", name: "Qwen Coder", contextWindow: 32768 }] } } }));
  uri = (await api.sessions.list())[0].uri;
  panel = await vscode.commands.executeCommand("piLsp.openChat", { uri });
  panel.panel.__receive({ type: "ready" }); // what the webview script sends when loaded
}, () => rig?.stop());

const lastReset = () => panel.posted.filter((m) => m.type === "reset").at(-1);
const resets = () => panel.posted.filter((m) => m.type === "reset").length;
/** Sends a prompt and waits for the turn to end and the transcript to be reloaded. */
async function turn(text, during) {
  const before = resets();
  await panel.receive({ type: "send", text, delivery: "prompt" });
  if (during) await during();
  await eventually(() => !panel.transcript.busy && resets() > before, "the turn to end and the panel to reload");
  return lastReset().blocks.map((b) => b.html).join("\n");
}

/** A line of code attached from `${name}.py` in the workspace (it holds `${name} = 1`). */
const code = (name) => ({ label: `${name}.py:1`, context: { uri: vscode.Uri.file(path.join(ws.folder, `${name}.py`)).toString(),
  text: `${name} = 1\n`, languageId: "python", range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } } } });
/** A reply of eight pieces (`${word}0 ` to `${word}7 `) held after its fourth until released. */
const heldWords = (word) => held(textReply(...Array.from({ length: 8 }, (_, i) => `${word}${i} `)), 4);

/** A session of one user message per text, once the Sessions list has it; its uri. */
async function userSession(id, texts) {
  const stamp = "2026-01-01T00:00:00.000Z";
  const lines = [{ type: "session", version: 3, id, timestamp: stamp, cwd: ws.folder },
    ...texts.map((text, i) => ({ type: "message", id: `${id}${i}`, parentId: i ? `${id}${i - 1}` : null, timestamp: stamp,
      message: { role: "user", content: [{ type: "text", text }], timestamp: i } }))];
  const file = path.join(ws.folder, ".pi", "sessions", `${id}.jsonl`);
  fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const sessionUri = vscode.Uri.file(file).toString();
  await eventually(async () => (await api.sessions.list()).some((s) => s.uri === sessionUri), "the session to be listed");
  return sessionUri;
}

/** Runs `body` with the chats' Markdown worker giving each text all the time marked takes: its real
 * 2 s limit cuts off marked's slow texts these tests show as Markdown once a busy machine is slow. */
async function withoutTimeLimit(body) {
  const { markdown } = api.chats;
  const real = markdown.clock;
  markdown.clock = { now: real.now, after: () => () => undefined };
  try {
    return await body();
  } finally {
    markdown.clock = real;
  }
}

test("the panel opens on the session's context, with model and thinking pickers", async () => {
  const reset = lastReset();
  assert.ok(reset, "the panel was filled once the webview was ready");
  assert.equal(reset.state.model, "anthropic/claude-opus-4-5");
  assert.equal(reset.state.thinkingLevel, "high");
  // the levels claude-opus-4-5 offers, as pi's picker shows them (no xhigh or max)
  assert.deepEqual(reset.state.thinkingLevels, ["off", "minimal", "low", "medium", "high"]);
  // piLsp.models first, with the name pi 1.6's catalog gives it
  assert.deepEqual(reset.state.models[0], { id: "anthropic/claude-opus-5-5", name: "Claude Opus 5.5" }, "piLsp.models first");
  assert.ok(reset.state.models.some((m) => m.id === "anthropic/claude-fable-5"), "the server's own list (pi.listModels: the models with a key) is offered too");
  assert.ok(reset.state.models.some((m) => m.id === "ollama/qwen2.5-coder:7b" && m.name === "Qwen Coder"), "with models.json's names");
  assert.ok(reset.blocks.length > 5);
  assert.ok(reset.blocks.some((b) => b.html.includes('class="msg user"')));
  assert.ok(panel.panel.posted.length > 0, "queued messages were delivered after ready");
  assert.match(panel.panel.webview.html, /Content-Security-Policy/);
  // Attachment chips go above the input (the real VS Code run checks where they land).
  assert.match(panel.panel.webview.html, /<div id="attachments"><\/div>\s*<footer>\s*<textarea id="input"/);
});

test("a prompt streams in; bash asks for approval in a notification; the tool result is shown", async () => {
  fake.script(
    toolReply({ thinking: "The user wants a shell command.", text: "Running it.", calls: [["toolu_1", "bash", { command: "echo hi-from-bash" }]] }),
    textReply("All ", "done: **", "hi**"),
  );
  const html = await turn("please run echo", async () => {
    const note = await eventually(() => rec.progress.find((p) => !p.done && /pi wants to run bash: echo hi-from-bash \(session: .+\)$/.test(p.options.title)), "the notification");
    await click(links(note.options.title).find((l) => l.text === "Accept").href);
  });
  assert.ok(panel.posted.some((m) => m.type === "approval"), "the panel showed the approval too");
  assert.ok(panel.posted.some((m) => m.type === "approvalDone"), "and dropped it once answered");
  assert.ok(panel.posted.some((m) => m.type === "upsert" && m.html.includes("streaming")), "streamed while running");
  assert.match(html, /please run echo/);
  assert.match(html, /<details class="thinking"[^>]*><summary>Thinking<\/summary>/);
  assert.match(html, /The user wants a shell command/);
  assert.match(html, /<details class="tool"[^>]*><summary>bash <code>echo hi-from-bash<\/code> · done<\/summary>/);
  assert.match(html, /hi-from-bash/);
  assert.match(html, /All done: <strong>hi<\/strong>/);
  assert.equal(fake.requests.length, 2);
  assert.equal(fake.requests[0].body.stream, true);
  // The model got the command's real output back, not a denial.
  const results = fake.requests[1].body.messages.at(-1).content.filter((b) => b.type === "tool_result");
  assert.equal(results.length, 1);
  assert.notEqual(results[0].is_error, true);
  assert.match(JSON.stringify(results[0].content), /hi-from-bash/);
});

test("an approval can be answered in the panel instead (Reject)", async () => {
  fake.script(
    toolReply({ text: "Deleting.", calls: [["toolu_2", "bash", { command: "rm -rf build" }]] }),
    textReply("Understood, I will not."),
  );
  const html = await turn("clean up", async () => {
    const card = await eventually(() => panel.posted.find((m) => m.type === "approval" && /rm -rf build/.test(m.message)), "the approval card");
    assert.deepEqual(card.actions, ["Accept", "Accept for Session", "Reject"]);
    assert.equal(card.detail, "rm -rf build", "the whole command");
    await panel.receive({ type: "approve", id: card.id, choice: "Reject" });
  });
  assert.match(html, /<details class="tool failed"/);
  assert.match(html, /denied/);
  assert.match(html, /Understood, I will not/);
});

test("a question the turn is aborted under goes, card and notification", async () => {
  fake.script(toolReply({ text: "Deploying.", calls: [["toolu_3", "bash", { command: "make deploy" }]] }));
  const html = await turn("deploy it", async () => {
    const card = await eventually(() => panel.posted.find((m) => m.type === "approval" && m.detail === "make deploy"), "the approval card");
    const note = rec.progress.find((p) => p.options.title.includes("wants to run bash: make deploy (session: "));
    assert.ok(note && !note.done);
    await panel.receive({ type: "abort" });
    await eventually(() => panel.posted.some((m) => m.type === "approvalDone" && m.id === card.id) && note.done, "the card and the notification to go");
  });
  assert.match(html, /deploy it/);
  assert.match(html, /aborted/i);
});

test("a question the server withdraws goes, card and notification, with no turn event to say so", async () => {
  // Before, only the turn's end took it away: the server's $/cancelRequest was never sent nor heard.
  const onTurn = api.pi.onTurn;
  api.pi.onTurn = () => new vscode.Disposable(() => {});
  try {
    fake.script(toolReply({ text: "Deploying.", calls: [["toolu_w", "bash", { command: "make withdrawn" }]] }));
    await turn("deploy again", async () => {
      const card = await eventually(() => panel.posted.find((m) => m.type === "approval" && m.detail === "make withdrawn"), "the approval card");
      const note = rec.progress.find((p) => p.options.title.includes("wants to run bash: make withdrawn (session: "));
      assert.ok(note && !note.done);
      await panel.receive({ type: "abort" });
      await eventually(() => panel.posted.some((m) => m.type === "approvalDone" && m.id === card.id) && note.done, "the card and the notification to go");
    });
  } finally {
    api.pi.onTurn = onTurn;
  }
});

test("a turn that ends while its question is being prepared asks nothing", async () => {
  // The turn ends (an abort) while the session's title is fetched, before the question is shown.
  let release;
  const info = api.sessions.info;
  api.sessions.info = (u) => new Promise((r) => (release = r)).then(() => info.call(api.sessions, u));
  const asked = panel.posted.filter((m) => m.type === "approval").length;
  const notes = rec.progress.length;
  let decision;
  try {
    api.approvals.approve({ uri, turnId: "turn-gone", toolCallId: "toolu_gone", tool: "bash", command: "make gone" }).then((d) => (decision = d));
    await eventually(() => release, "the title to be asked for");
    api.pi.turnEmitter.fire({ uri, turnId: "turn-gone", event: { type: "agent_end", messages: [] } });
    release();
    await eventually(() => decision, "the question to be settled");
  } finally {
    api.sessions.info = info;
  }
  assert.deepEqual(decision, { decision: "deny" });
  assert.equal(panel.posted.filter((m) => m.type === "approval").length, asked, "no card");
  assert.equal(rec.progress.length, notes, "no notification");
});

test("an attachment's question stays when the turn it was queued behind ends", async () => {
  // Before, it went with that turn (same turnId), so a follow-up the user then allowed failed.
  let decision;
  void api.approvals.approve({ uri, turnId: "turn-queued", toolCallId: "context-0", tool: "read",
    path: "/elsewhere/notes.txt", outsideWorkspace: true, attachment: true }).then((d) => (decision = d));
  const card = await eventually(() => panel.posted.find((m) => m.type === "approval" && m.message.includes("/elsewhere/notes.txt")), "the approval card");
  api.pi.turnEmitter.fire({ uri, turnId: "turn-queued", event: { type: "agent_end", messages: [] } });
  await panel.receive({ type: "approve", id: card.id, choice: "Accept" });
  await eventually(() => decision, "the answer");
  assert.deepEqual(decision, { decision: "allow" });
});

test("an attachment's question goes when the turn it was queued behind is aborted", async () => {
  // Before, it stayed: the server had dropped its follow-up, and the question lingered unanswerable.
  let decision;
  void api.approvals.approve({ uri, turnId: "turn-aborted", toolCallId: "context-0", tool: "read",
    path: "/elsewhere/dropped.txt", outsideWorkspace: true, attachment: true }).then((d) => (decision = d));
  await eventually(() => panel.posted.find((m) => m.type === "approval" && m.message.includes("/elsewhere/dropped.txt")), "the approval card");
  const note = await eventually(() => rec.progress.find((p) => p.options.title.includes("/elsewhere/dropped.txt")), "the notification");
  api.pi.turnEmitter.fire({ uri, turnId: "turn-aborted", event: { type: "queue_dropped", steering: [], followUp: ["look at this"] } });
  await eventually(() => decision, "the question to be settled");
  assert.deepEqual(decision, { decision: "deny" });
  await eventually(() => note.done, "the notification to go");
  assert.equal(panel.transcript.busy, false, "the event, after agent_end, starts no turn in the chat");
});

test("a follow-up dropped by an abort while its file was asked about stays, text and code, to send again", async () => {
  // Before, the answer read as a turn's start: the input and the attached code were cleared.
  const call = api.pi.call;
  api.pi.call = function (method, args) {
    return method === "pi.prompt" ? Promise.resolve({ turnId: null, dropped: "followUp" }) : call.call(this, method, args);
  };
  panel.attach({ label: "/elsewhere/notes.txt", context: { uri: "file:///elsewhere/notes.txt" } });
  try {
    await panel.receive({ type: "send", text: "DROPPED-FOLLOW", delivery: "followUp" });
    assert.ok(panel.posted.some((m) => m.type === "setInput" && m.text === "DROPPED-FOLLOW" && m.keepDraft), "the text is back");
    assert.deepEqual(panel.attachments.map((a) => a.label), ["/elsewhere/notes.txt"], "the code is still attached");
  } finally {
    api.pi.call = call;
    panel.attachments.splice(0);
  }
});

/** A chat on a new session whose prompt and steer each attach a file outside the workspace: the
 *  abort comes while both are asked about (the steer is answered `dropped`), then the prompt's
 *  question is answered `choice`. The chat and what its session's turns sent. */
async function steerWithdrawnBeforeItsTurn(name, choice) {
  const outside = path.join(ws.root, "outside-notes.txt");
  fs.writeFileSync(outside, "OUTSIDE\n");
  const attachment = () => ({ label: outside, context: { uri: vscode.Uri.file(outside).toString() } });
  const session = await api.pi.call("pi.newSession", { name });
  const chat = await vscode.commands.executeCommand("piLsp.openChat", { uri: session.uri });
  chat.panel.__receive({ type: "ready" });
  await eventually(() => chat.posted.some((m) => m.type === "reset"), "the chat to load");
  const cards = () => chat.posted.filter((m) => m.type === "approval");
  const events = [];
  const listening = api.pi.onTurn((n) => n.uri === session.uri && events.push(n.event));
  fake.script(); // the turn, if any, starts aborted: nothing reaches the model
  chat.attach(attachment());
  const prompt = chat.receive({ type: "send", text: "PROMPT-P", delivery: "prompt" });
  await eventually(() => cards().length === 1, "the prompt's attachment question");
  chat.attach(attachment());
  const steer = chat.receive({ type: "send", text: "STEER-S", delivery: "steer" });
  await eventually(() => cards().length === 2, "the steer's attachment question");
  await chat.receive({ type: "abort" });
  await steer;
  await chat.receive({ type: "approve", id: cards()[0].id, choice });
  await prompt;
  chat.attachments.splice(0);
  return { chat, events, stop: () => listening.dispose() };
}
const inputs = (chat) => chat.posted.filter((m) => m.type === "setInput").map((m) => m.text);

test("a steer withdrawn while the prompt it was sent behind was asked about its file comes back once", async () => {
  // Before, twice ("STEER-S", then "STEER-S" again): the `dropped` answer gave it back, the prompt
  // allowed after the abort started its turn, whose agent_start cleared what the chat had given
  // back, and whose queue_dropped named the steer.
  const { chat, events, stop } = await steerWithdrawnBeforeItsTurn("withdrawn steer", "Accept");
  try {
    await eventually(() => events.some((e) => e.type === "queue_dropped"), "the aborted turn to name the steer");
  } finally {
    stop();
  }
  assert.deepEqual(events.filter((e) => e.type === "queue_dropped"), [{ type: "queue_dropped", steering: ["STEER-S"], followUp: [] }]);
  // (The chat hears queue_dropped before this test's listener does.)
  assert.deepEqual(inputs(chat), ["STEER-S"], "given back once");
  assert.equal(fake.requests.length, 0, "nothing reached the model");
});

test("a steer withdrawn for a prompt then refused does not come back with a later turn", async () => {
  // Before, the next, unrelated turn's queue_dropped named it, and it came back into the input then.
  const { chat, events, stop } = await steerWithdrawnBeforeItsTurn("withdrawn steer, refused prompt", "Reject");
  try {
    await eventually(() => inputs(chat).length === 2, "the refused prompt back in the input");
    assert.deepEqual(inputs(chat), ["STEER-S", "PROMPT-P"], "each given back once");
    fake.script(textReply("unrelated"), textReply("after"));
    for (const text of ["UNRELATED", "AFTER"]) { // AFTER runs once UNRELATED's turn let go, after its queue_dropped if any
      const ended = events.filter((e) => e.type === "agent_end").length;
      await chat.receive({ type: "send", text, delivery: "prompt" });
      await eventually(() => events.filter((e) => e.type === "agent_end").length > ended, `${text}'s turn to end`);
    }
  } finally {
    stop();
  }
  assert.deepEqual(events.filter((e) => e.type === "queue_dropped"), [], "no turn named it");
  assert.deepEqual(inputs(chat), ["STEER-S", "PROMPT-P"], "nothing came back later");
});

test("the model picker offers models by their models.json name and marks the current one", async () => {
  let offered;
  respond("showQuickPick", (items) => { offered = items; return items.find((i) => i.label === "Qwen Coder"); });
  await panel.receive({ type: "pickModel" });
  respond("showQuickPick");
  const qwen = offered.find((i) => i.label === "Qwen Coder");
  assert.equal(qwen.description, "ollama/qwen2.5-coder:7b");
  assert.deepEqual(offered.filter((i) => /current/.test(i.description ?? "")).map((i) => [i.label, i.description]), [["Claude Opus 4.5 (latest)", "anthropic/claude-opus-4-5 · current"]]);
  await eventually(() => lastReset().state.model === "ollama/qwen2.5-coder:7b", "the picked model in the panel");
});

test("model and thinking pickers write to the session", async () => {
  await panel.receive({ type: "setModel", model: "anthropic/claude-haiku-4-5" });
  await panel.receive({ type: "setThinking", level: "minimal" });
  await eventually(() => lastReset().state.model === "anthropic/claude-haiku-4-5" && lastReset().state.thinkingLevel === "minimal", "the new settings in the panel");
});

test("a reply asked for again shows pi's wait, and its failed attempt as the transcript after the turn does", async () => {
  // The panel dropped auto_retry_*: the attempt's error read as the turn's while pi waited (2 s,
  // the default first wait), then "removed from the context" once the turn was over.
  fake.script(errorReply(529, "overloaded_error", "Overloaded"), textReply("after the retry"));
  const from = panel.posted.length;
  const all = await turn("Try it");
  const html = all.slice(all.lastIndexOf("Try it")); // this turn's (earlier tests' turns come before)
  const upserts = panel.posted.slice(from).filter((m) => m.type === "upsert");
  assert.ok(upserts.some((m) => /↻ Retrying \(1\/3\) in 2s… \(Abort to cancel\)/.test(m.html)), "the wait was shown");
  // Drawn once, as pi 1.6 draws a failed reply once: it was drawn as the turn's error at its
  // message_end, then redrawn as removed at auto_retry_start (a flash).
  assert.ok(!upserts.some((m) => /class="error">Anthropic 529/.test(m.html)), "the failed reply is never drawn as the turn's error");
  const removed = upserts.filter((m) => /assistant removed from the context<\/div><div class="text">\[error\] Anthropic 529 overloaded_error: Overloaded</.test(m.html));
  assert.equal(removed.length, 1, "it is drawn once, as left out of the context");
  assert.match(html, /assistant removed from the context · [\d,]+ tokens.*<div class="text">\[error\] Anthropic 529 overloaded_error: Overloaded</);
  assert.doesNotMatch(html, /class="error"|Retrying/);
  assert.match(html, /after the retry/);
});

test("a failed reply left out of the context shows its error whole after the turn", async () => {
  // The transcript read after the turn showed the server's one-line preview of it, cut at 72
  // characters: "[error] Anthropic 529 overloaded_error: Overloaded: every server is b…".
  const error = "Overloaded: every server is busy, try again in a minute or pick a model with more room";
  fake.script(errorReply(529, "overloaded_error", error), textReply("after the long retry"));
  const all = await turn("Try it at length");
  const html = all.slice(all.lastIndexOf("Try it at length"));
  assert.match(html, /after the long retry/);
  assert.ok(html.includes(`removed from the context · `), "the failed reply, left out");
  assert.ok(html.includes(`<div class="text">[error] Anthropic 529 overloaded_error: ${error}</div>`), "its error, whole");
});

test("while a turn runs, the input steers; abort stops the turn", async () => {
  const slow = textReply(..."a slow answer that keeps going and going".split(" ").map((w) => w + " "));
  slow.delay = 150;
  fake.script(slow, textReply("after the steer"));
  const html = await turn("talk slowly", async () => {
    await eventually(() => panel.transcript.busy && fake.requests.length === 1, "the turn to start");
    await panel.receive({ type: "send", text: "faster please", delivery: "steer" });
    assert.ok(panel.posted.some((m) => m.type === "upsert" && /Steering message queued/.test(m.html)));
    await panel.receive({ type: "abort" });
  });
  assert.match(html, /talk slowly/);
  assert.match(html, /aborted/i);
});

test("a context asked for before a prompt and answered after its turn ended does not take the prompt away", async () => {
  // Before, only a context asked for during the turn was kept out: one asked for just before the
  // prompt became the transcript after the turn's end, without the prompt (the 'input steers' flake).
  const call = api.pi.call;
  let hold = true, answered = false, release;
  const held = new Promise((resolve) => (release = resolve));
  api.pi.call = function (method, args) {
    const answer = call.call(this, method, args);
    if (method !== "pi.previewContext" || !hold) return answer;
    hold = false;
    return answer.then(async (preview) => { answered = true; await held; return preview; });
  };
  try {
    const old = new Set(panel.posted.filter((m) => m.type === "reset"));
    const stale = panel.reload();
    await eventually(() => answered, "the context from before the prompt");
    fake.script(textReply("a quick answer"));
    await panel.receive({ type: "send", text: "PROMPT DURING RELOAD", delivery: "prompt" });
    await eventually(() => !panel.transcript.busy, "the turn to end");
    release();
    await stale;
    await eventually(() => panel.posted.some((m) => m.type === "reset" && !old.has(m)), "the chat to be reloaded after the turn");
    for (const reset of panel.posted.filter((m) => m.type === "reset" && !old.has(m))) {
      assert.match(reset.blocks.map((b) => b.html).join("\n"), /PROMPT DURING RELOAD/, "every reset after the turn shows its prompt");
    }
  } finally {
    api.pi.call = call;
  }
});

test("a queued steer the turn ends without goes back to the input; one delivered does not", async () => {
  const slow = textReply(..."a slow answer that keeps going and going".split(" ").map((w) => w + " "));
  slow.delay = 150;
  fake.script(slow);
  await turn("talk slowly again", async () => {
    await eventually(() => panel.transcript.busy && fake.requests.length > 0 && panel.posted.some((m) => m.type === "upsert" && /slow answer/.test(m.html)), "the reply to stream");
    await panel.receive({ type: "send", text: "LOST-STEER please", delivery: "steer" });
    await panel.receive({ type: "abort" });
  });
  const back = await eventually(() => panel.posted.find((m) => m.type === "setInput" && m.text.includes("LOST-STEER")), "the steer back in the input");
  assert.equal(back.text, "LOST-STEER please");
  assert.equal(back.keepDraft, true, "before what is being written now");
  assert.ok(rec.messages.some((m) => /queued message reached pi; it is back in the chat's input/.test(m.message)));

  const slower = textReply(...Array.from({ length: 30 }, (_, i) => `w${i} `));
  slower.delay = 100;
  fake.script(slower, textReply("steered"));
  const html = await turn("talk slowly once more", async () => {
    await eventually(() => panel.transcript.busy && fake.requests.length === 1, "the turn to start");
    await panel.receive({ type: "send", text: "DELIVERED-STEER please", delivery: "steer" });
  });
  assert.match(html, /DELIVERED-STEER/, "the steer reached the model");
  assert.ok(!panel.posted.some((m) => m.type === "setInput" && m.text.includes("DELIVERED-STEER")), "and is not handed back");
});

test("a delivered steer or follow-up is matched by its own text, not by a queued one inside it", async () => {
  const slower = textReply(...Array.from({ length: 30 }, (_, i) => `w${i} `));
  slower.delay = 100;
  fake.script(slower, textReply("steered"), textReply("followed"));
  const html = await turn("talk slowly, then more", async () => {
    await eventually(() => panel.transcript.busy && fake.requests.length === 1, "the turn to start");
    await panel.receive({ type: "send", text: "fix", delivery: "followUp" });
    await panel.receive({ type: "send", text: "please fix", delivery: "steer" });
  });
  assert.match(html, /please fix/, "the steer reached the model");
  assert.match(html, /followed/, "and the follow-up after it");
  // "please fix" holds "fix": the steer took the follow-up's place in the queue and was handed back.
  assert.ok(!panel.posted.some((m) => m.type === "setInput" && /fix/.test(m.text)), "nothing is handed back");
});

/** The HTML of the blocks the webview shows now: the last reset's, with the upserts since. */
function shownBlocks() {
  const at = panel.posted.findLastIndex((m) => m.type === "reset");
  const blocks = new Map((at >= 0 ? panel.posted[at].blocks : []).map((b) => [b.id, b.html]));
  for (const m of panel.posted.slice(at + 1)) if (m.type === "upsert") blocks.set(m.id, m.html);
  return [...blocks.values()];
}

test("a steer's or follow-up's notice goes once its message reaches the model", async () => {
  // The notices stayed until the turn ended: messages shown as queued after they were delivered.
  const queuedNotices = () => shownBlocks().filter((h) => /(Steering message|Follow-up) queued/.test(h));
  const first = heldWords("w");
  const last = heldWords("more");
  fake.script(first.reply, textReply("steered"), last.reply);
  try {
    await turn("hold on", async () => {
      await eventually(() => panel.transcript.busy && fake.requests.length === 1, "the turn to start");
      await panel.receive({ type: "send", text: "steer me", delivery: "steer" });
      await panel.receive({ type: "send", text: "follow me", delivery: "followUp" });
      assert.equal(queuedNotices().length, 2, "each queued message is noted");
      first.release();
      const said = (text) => panel.transcript.blocks.some((b) => b.kind === "user" && b.parts.some((p) => p.text === text));
      // The follow-up's reply streams after its message_end, which takes its notice away.
      const streaming = () => panel.posted.some((m) => m.type === "upsert" && /more0/.test(m.html));
      await eventually(() => said("steer me") && said("follow me") && streaming(), "both messages delivered");
      assert.ok(panel.transcript.busy, "the follow-up's reply is still held");
      assert.deepEqual(queuedNotices(), [], "no notice of a delivered message is left");
      last.release();
    });
  } finally {
    first.release(); // a failed check leaves no reply held
    last.release();
  }
});

test("a delivered message whose text a queued steer and follow-up share is the steer's", async () => {
  // pi delivers steers before follow-ups: the steer "same" took the queued follow-up's notice
  // away (the first queued "same") and its own stayed, as if it were still to come.
  const queuedNotices = () => shownBlocks().filter((h) => /(Steering message|Follow-up) queued/.test(h));
  const first = heldWords("w");
  const steered = heldWords("steer");
  fake.script(first.reply, steered.reply);
  const mark = panel.posted.length;
  try {
    await turn("hold on again", async () => {
      await eventually(() => panel.transcript.busy && fake.requests.length === 1, "the turn to start");
      await panel.receive({ type: "send", text: "same", delivery: "followUp" });
      await panel.receive({ type: "send", text: "same", delivery: "steer" });
      assert.equal(queuedNotices().length, 2, "each queued message is noted");
      first.release();
      await eventually(() => panel.posted.some((m) => m.type === "upsert" && /steer1/.test(m.html)), "the steered reply to stream");
      assert.equal(queuedNotices().length, 1, "one message is still queued");
      assert.match(queuedNotices()[0], /Follow-up queued/, "the follow-up's notice stays, the steer's goes");
      await panel.receive({ type: "abort" });
    });
  } finally {
    first.release(); // a failed check leaves no reply held
    steered.release();
  }
  const back = panel.posted.slice(mark).filter((m) => m.type === "setInput");
  assert.deepEqual(back.map((m) => m.text), ["same"], "the follow-up, once, is back in the input");
  assert.equal(fake.requests.length, 2, "the follow-up never reached the model");
});

test("a queued steer's and follow-up's attached code comes back with their text when the turn is aborted", async () => {
  // Before, only their texts went back to the input: the code attached to them was lost.
  const first = heldWords("w");
  fake.script(first.reply);
  const mark = panel.posted.length;
  try {
    await turn("hold on with code", async () => {
      await eventually(() => panel.transcript.busy && fake.requests.length === 1, "the turn to start");
      panel.attach(code("steered"));
      await panel.receive({ type: "send", text: "steer with code", delivery: "steer" });
      panel.attach(code("followed"));
      await panel.receive({ type: "send", text: "follow with code", delivery: "followUp" });
      assert.deepEqual(panel.attachments, [], "each went with its message");
      panel.attach(code("followed")); // attached again meanwhile: it is not shown twice once the follow-up's is back
      await panel.receive({ type: "abort" });
    });
  } finally {
    first.release(); // a failed check leaves no reply held
  }
  const back = panel.posted.slice(mark).filter((m) => m.type === "setInput");
  assert.deepEqual(back.map((m) => m.text), ["steer with code\n\nfollow with code"], "the texts are back in the input");
  assert.deepEqual(panel.attachments.map((a) => a.label), ["steered.py:1", "followed.py:1"], "and their code, once each, attached");
  const shown = panel.posted.filter((m) => m.type === "state").at(-1).state.attachments;
  assert.deepEqual(shown, ["steered.py:1", "followed.py:1"], "shown above the input");
  fake.script(textReply("got both"));
  await turn("steer with code\n\nfollow with code");
  const sent = JSON.stringify(fake.requests.at(-1).body.messages.at(-1));
  assert.equal(sent.match(/steered = 1/g)?.length, 1, "the resend carries the steer's code");
  assert.equal(sent.match(/followed = 1/g)?.length, 1, "and the follow-up's, once");
  assert.deepEqual(panel.attachments, [], "sent with it");
});

test("an abort gives back every queued steer, then every follow-up, as pi 1.6 does", async () => {
  // Before, they came back in the order sent: pi 1.6's restoreQueuedMessagesToEditor puts steers first.
  const first = heldWords("w");
  fake.script(first.reply);
  const mark = panel.posted.length;
  try {
    await turn("hold on for the order", async () => {
      await eventually(() => panel.transcript.busy && fake.requests.length === 1, "the turn to start");
      panel.attach(code("follow_one"));
      await panel.receive({ type: "send", text: "FOLLOW-ONE", delivery: "followUp" });
      panel.attach(code("steer_one"));
      await panel.receive({ type: "send", text: "STEER-ONE", delivery: "steer" });
      panel.attach(code("follow_two"));
      await panel.receive({ type: "send", text: "FOLLOW-TWO", delivery: "followUp" });
      await panel.receive({ type: "abort" });
    });
  } finally {
    first.release(); // a failed check leaves no reply held
  }
  const back = panel.posted.slice(mark).filter((m) => m.type === "setInput");
  assert.deepEqual(back.map((m) => m.text), ["STEER-ONE\n\nFOLLOW-ONE\n\nFOLLOW-TWO"], "steers first, then follow-ups");
  assert.deepEqual(panel.attachments.map((a) => a.label), ["steer_one.py:1", "follow_one.py:1", "follow_two.py:1"], "their code in the same order");
  panel.attachments.splice(0);
  assert.equal(fake.requests.length, 1, "none of them reached the model");
});

test("code attached while pi.prompt is answered stays for the next message", async () => {
  // Before, the answer cleared every attachment: the code attached meanwhile was never sent.
  const call = api.pi.call;
  let answer;
  api.pi.call = function (method, args) {
    if (method !== "pi.prompt") return call.call(this, method, args);
    const answered = call.call(this, method, args);
    return new Promise((resolve, reject) => { answer = () => answered.then(resolve, reject); });
  };
  fake.script(textReply("first"), textReply("second"));
  const before = resets();
  try {
    panel.attach(code("sent"));
    const sending = panel.receive({ type: "send", text: "with the first", delivery: "prompt" });
    await eventually(() => answer, "pi.prompt to be asked");
    panel.attach(code("later"));
    answer();
    await sending;
  } finally {
    api.pi.call = call;
  }
  await eventually(() => !panel.transcript.busy && resets() > before, "the turn to end and the panel to reload");
  assert.deepEqual(panel.attachments.map((a) => a.label), ["later.py:1"], "the code attached meanwhile stays, the sent goes");
  assert.deepEqual(panel.posted.filter((m) => m.type === "state").at(-1).state.attachments, ["later.py:1"], "shown above the input");
  await turn("with the second");
  const [first, second] = fake.requests.slice(-2).map((r) => JSON.stringify(r.body.messages.at(-1)));
  assert.ok(/sent = 1/.test(first) && !/later = 1/.test(first), "the first prompt carried its own code");
  assert.ok(/later = 1/.test(second) && !/sent = 1/.test(second), "the second, the code attached meanwhile");
  assert.deepEqual(panel.attachments, [], "sent with it");
});

test("the markdown renderer escapes raw HTML and drops script links", () => {
  const html = ext.markdown('<script>alert(1)</script>\n\nsee <img src=x onerror=alert(1)> and [x](javascript:alert(1))\n\n[ok](https://example.org) ![img](https://example.org/a.png)');
  assert.ok(!html.includes("<script>"));
  assert.ok(!html.includes("<img"), "inline HTML is escaped");
  assert.ok(!/href="javascript/.test(html));
  assert.match(html, /<a href="https:\/\/example.org">ok<\/a>/);
  assert.ok(!html.includes("<img"));
});

test("Markdown too long for marked, or that marked fails on, is shown as plain text", () => {
  // Before, every text went to marked: 2,000 nested quotes threw (stack overflow) and text of
  // any length was parsed on the extension host.
  const quotes = ext.markdown("> ".repeat(2500));
  assert.match(quotes, /^<pre>&gt; &gt; /);
  const long = "# title\n" + "x".repeat(ext.MARKDOWN_LIMIT);
  assert.equal(ext.markdown(long), `<pre>${long}</pre>`);
  assert.match(ext.markdown(long.slice(0, ext.MARKDOWN_LIMIT)), /^<h1>title<\/h1>/, "up to the limit it is Markdown");
});

test("a chat holding Markdown that marked 15 took minutes over opens without blocking the extension host", async () => {
  // Before, marked 15 parsed unclosed links and emphasis in quadratic time on the extension host
  // (8 KB of `[a](` took 21 s) and 5 KB of nested quotes overflowed its stack: no chat at all.
  const mdUri = await userSession("slow-md", ["[a](".repeat(2000), "_a ".repeat(10000), "> ".repeat(2500)]);
  // The longest the event loop went without running a 10 ms timer, while the chat opened.
  let longest = 0, last = Date.now();
  const gap = () => { const now = Date.now(); longest = Math.max(longest, now - last); last = now; };
  const tick = setInterval(gap, 10);
  try {
    const md = await vscode.commands.executeCommand("piLsp.openChat", { uri: mdUri });
    const reset = await eventually(() => md.posted.find((m) => m.type === "reset"), "the chat to be rendered");
    assert.equal(reset.blocks.filter((b) => /class="msg user"/.test(b.html)).length, 3, "every message is shown");
    md.panel.dispose();
  } finally {
    clearInterval(tick);
    gap(); // the render may have ended just now, before the timer could run
  }
  assert.ok(longest < 2000, `the extension host was blocked ${longest} ms at once`);
});

test("a chat of many texts slow for marked spends a bounded time in it, the newest shown as Markdown", async () => {
  // Before, MARKDOWN_LIMIT bounded each text, not the chat: 200 texts of `*a` just under it all
  // went to marked, which blocked the extension host 170 s while the chat opened.
  const mdUri = await userSession("slow-chat", Array.from({ length: 200 }, () => "*a".repeat(20_000)));
  await withoutTimeLimit(async () => {
    const md = await vscode.commands.executeCommand("piLsp.openChat", { uri: mdUri });
    try {
      const reset = await eventually(() => md.posted.find((m) => m.type === "reset"), "the chat to be rendered");
      const texts = reset.blocks.filter((b) => /class="msg user"/.test(b.html));
      assert.equal(texts.length, 200, "every message is shown");
      assert.match(texts.at(-1).html, /<div class="text"><p><em>a<\/em>/, "the newest is Markdown");
      assert.match(texts[0].html, /<div class="text"><pre>\*a\*a/, "the oldest is plain text");
      // Each takes marked 0.3 s here: a budget of a few tenths of a second parses one or two.
      const parsed = texts.filter((b) => /<em>/.test(b.html)).length;
      assert.ok(parsed <= 20, `${parsed} texts of 40,000 characters went to marked in one render`);
    } finally {
      md.panel.dispose();
    }
  });
});

test("a block spends the Markdown budget on its reply text before its folded thinking, newest first", () => {
  // Before, parts went to the budget oldest first: a long thinking part before the newest reply
  // used it up, and the reply the user reads was shown as plain text.
  const asked = [];
  const budgetOfOne = (text) => (asked.push(text), asked.length === 1 ? ext.markdown(text) : `<pre>${text}</pre>`);
  const block = { id: "b", kind: "assistant", streaming: false, parts: [
    { type: "thinking", text: "first thought" }, { type: "text", text: "**first** reply" },
    { type: "thinking", text: "second thought" }, { type: "text", text: "**second** reply" }] };
  const html = ext.renderBlock(block, new Map(), budgetOfOne);
  assert.deepEqual(asked, ["**second** reply", "**first** reply", "second thought", "first thought"]);
  assert.match(html, /<div class="text"><p><strong>second<\/strong> reply<\/p>/, "the newest reply is Markdown");
  assert.match(html, /first thought.*\*\*first\*\* reply.*second thought.*<strong>second/s, "in the order of the message");
});

test("a text marked takes half a minute over is shown as plain text, the extension host running meanwhile", async () => {
  // Before, marked ran on the extension host: 49,999 characters of `*a_` blocked it 28 s while the
  // chat opened, under MARKDOWN_LIMIT and the render budget alike (both are checked between texts).
  const crafted = "*a_".repeat(16_666) + "<";
  const mdUri = await userSession("crafted-md", [crafted, "**bold** reply"]);
  let ticks = 0;
  const tick = setInterval(() => ticks++, 10);
  try {
    const md = await vscode.commands.executeCommand("piLsp.openChat", { uri: mdUri });
    const reset = await eventually(() => md.posted.find((m) => m.type === "reset"), "the chat to be rendered");
    const texts = reset.blocks.filter((b) => /class="msg user"/.test(b.html));
    assert.ok(texts[0].html.includes(`<div class="text"><pre>${crafted.slice(0, -1)}&lt;</pre>`), "the crafted text as plain text, escaped");
    assert.match(texts[1].html, /<div class="text"><p><strong>bold<\/strong> reply<\/p>/, "the newest as Markdown");
    assert.ok(ticks > 0, "timers ran while marked worked on the crafted text");
    md.panel.dispose();
  } finally {
    clearInterval(tick);
  }
});

/** A clock for MarkdownWorker that moves only when told: a time limit runs out when the test says, never by a race. */
function manualClock() {
  let now = 0;
  const timers = new Set();
  let onArmed = () => undefined;
  return {
    now: () => now,
    after(ms, fn) {
      const timer = { at: now + ms, fn };
      timers.add(timer);
      onArmed();
      return () => timers.delete(timer);
    },
    /** Resolves once a time limit is running. */
    armed: () => new Promise((resolve) => (timers.size ? resolve() : (onArmed = resolve))),
    advance(ms) {
      now += ms;
      for (const timer of [...timers]) if (timer.at <= now) timers.delete(timer), timer.fn();
    },
  };
}

/** A worker thread script written to the workspace; its path. */
function threadScript(name, source) {
  const script = path.join(ws.folder, name);
  fs.writeFileSync(script, 'const { parentPort } = require("node:worker_threads");\n' + source);
  return script;
}

test("Markdown from the worker is marked's own; past its time limit, or when it dies, the text is plain", async () => {
  // Before, there was no worker and no time limit: what marked took, the extension host waited.
  const samples = ["# title\n\n**bold** `code` [ok](https://example.org)", "- a\n- b\n\n```js\nx < 1\n```", "<script>x</script>", "| a | b |\n|---|---|\n| 1 | 2 |"];
  const clock = manualClock();
  const worker = new ext.MarkdownWorker(200, undefined, clock);
  try {
    for (const text of samples) assert.equal((await worker.render(text)).html, ext.markdown(text), "as marked renders it on the host");
    const crafted = "*a_".repeat(16_666); // 28 s in marked: the 200 ms it is given run out first
    const rendered = worker.render(crafted);
    await clock.armed();
    clock.advance(200);
    assert.deepEqual(await rendered, { html: undefined, ms: 200 }, "no HTML past the limit, and the limit's time spent");
    const budgeted = ext.budgetedMarkdown(ext.RENDER_BUDGET_MS, worker)(crafted);
    await clock.armed();
    clock.advance(200);
    assert.equal(await budgeted, `<pre>${crafted}</pre>`);
    assert.equal((await worker.render(samples[0])).html, ext.markdown(samples[0]), "a new worker took its place");
  } finally {
    worker.dispose();
  }
  const crashing = new ext.MarkdownWorker(undefined, threadScript("crashing-worker.js", 'parentPort.on("message", () => process.exit(3));\n'));
  try {
    assert.equal(await ext.budgetedMarkdown(ext.RENDER_BUDGET_MS, crashing)("**b**"), "<pre>**b**</pre>", "a worker that died: plain text");
  } finally {
    crashing.dispose();
  }
});

test("the Markdown budgets count the time marked took over the chat's own texts, as the worker reports it", async () => {
  // Before, they timed the wait for the worker on the host, which counted the worker's start-up
  // and the texts of other chats queued ahead: the times below took no time at all, and counted none.
  const script = threadScript("timed-worker.js", 'parentPort.postMessage("ready");\n' +
    'parentPort.on("message", (text) => text === "hang" || parentPort.postMessage({ html: `<p>${text}</p>`, ms: parseInt(text) }));\n');
  const clock = manualClock();
  const worker = new ext.MarkdownWorker(100, script, clock);
  try {
    const chat = ext.budgetedMarkdown(300, worker);
    assert.deepEqual([await chat("250 ms"), await chat("60 ms"), await chat("1 ms")], ["<p>250 ms</p>", "<p>60 ms</p>", "<pre>1 ms</pre>"]);
    const stream = ext.streamingMarkdown(50, worker);
    assert.deepEqual([await stream("49 ms"), await stream("50 ms"), await stream("1 ms")], ["<p>49 ms</p>", "<p>50 ms</p>", "<pre>1 ms</pre>"]);
    // A text past the time limit reports nothing: the time it was given counts.
    const hung = ext.budgetedMarkdown(50, worker);
    const hang = hung("hang");
    await clock.armed();
    clock.advance(100);
    assert.deepEqual([await hang, await hung("1 ms")], ["<pre>hang</pre>", "<pre>1 ms</pre>"]);
  } finally {
    worker.dispose();
  }
});

test("a worker's start-up does not count against its first text's time limit", async () => {
  // Before, the limit ran from when the text was posted, start-up included: 0.2 s for a thread
  // to load marked, over 2 s on a busy machine, and a chat's first text was drawn plain.
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  // The thread is ready once the test ends its connection: it starts for as long as the test says.
  const script = threadScript("slow-start-worker.js", `require("node:net").connect(${server.address().port}, "127.0.0.1").on("end", () => {\n` +
    '  parentPort.postMessage("ready");\n  parentPort.on("message", (text) => parentPort.postMessage({ html: `<p>${text}</p>`, ms: 1 }));\n});\n');
  const clock = manualClock();
  const worker = new ext.MarkdownWorker(100, script, clock);
  try {
    const connected = once(server, "connection");
    const rendered = worker.render("first");
    const [socket] = await connected;
    clock.advance(1_000);
    socket.end();
    assert.deepEqual(await rendered, { html: "<p>first</p>", ms: 1 });
  } finally {
    worker.dispose();
    server.close();
  }
});

test("a chat's texts queued behind another chat's slow one, in a worker just started, are Markdown", async () => {
  // Before, chat B's three tiny texts and its streaming reply waited behind chat A's 40,000
  // characters of `*a` (0.46 s in marked), were charged that wait, and two of them were drawn plain.
  const worker = new ext.MarkdownWorker(); // shared, as ChatPanels.markdown is; not started yet
  try {
    const a = ext.budgetedMarkdown(ext.RENDER_BUDGET_MS, worker)("*a".repeat(20_000));
    const b = ext.budgetedMarkdown(ext.RENDER_BUDGET_MS, worker);
    const stream = ext.streamingMarkdown(ext.STREAM_MARKDOWN_MS, worker);
    // Each chat draws its texts one after another, as renderBlockAsync does.
    const chatB = (async () => [await b("**one**"), await b("**two**"), await b("**three**")])();
    const streamed = (async () => [await stream("**reply**"), await stream("**reply** on")])();
    const [, htmlB, frames] = await Promise.all([a, chatB, streamed]);
    assert.deepEqual(htmlB, ["<p><strong>one</strong></p>\n", "<p><strong>two</strong></p>\n", "<p><strong>three</strong></p>\n"]);
    assert.deepEqual(frames, ["<p><strong>reply</strong></p>\n", "<p><strong>reply</strong> on</p>\n"]);
  } finally {
    worker.dispose();
  }
});

test("a streaming reply is drawn once per frame, not per delta, and as plain text once it is slow for marked", async () => {
  // Before, each delta drew the whole reply again with marked: 20,000 characters of `*a` in
  // 100-character deltas blocked the extension host 5.2 s, quadratic in the reply's length.
  const fire = (event) => api.pi.turnEmitter.fire({ uri, turnId: "turn-stream", event });
  const delta = (text) => fire({ type: "message_update", deltas: [{ type: "text_delta", contentIndex: 0, delta: text }] });
  const upserts = (id) => panel.posted.filter((m) => m.type === "upsert" && m.id === id);
  await withoutTimeLimit(async () => {
    const before = resets();
    fire({ type: "agent_start" });
    fire({ type: "message_start", message: { role: "assistant", content: [] } });
    const id = panel.transcript.blocks.at(-1).id;
    const drawn = upserts(id).length;
    // 40,000 characters in 200 deltas: marked takes 0.2 s over them, far more than a frame.
    for (let i = 0; i < 200; i++) delta("*a".repeat(100));
    const first = await eventually(() => upserts(id)[drawn], "the deltas to be drawn");
    assert.equal(upserts(id).length, drawn + 1, "200 deltas in one frame are drawn once");
    assert.equal(first.html.match(/<em>a<\/em>a/g).length, 10_000, "all of them");
    assert.match(first.html, /<div class="text"><p><em>a<\/em>/, "as Markdown, at first");
    delta("*a");
    const next = await eventually(() => upserts(id)[drawn + 1], "the next delta to be drawn");
    assert.ok(next.html.includes(`<div class="text"><pre>${"*a".repeat(20_001)}</pre>`), "then as plain text: the last draw took marked more than a frame");
    fire({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "*a".repeat(20_001) }] } });
    // marked runs in a worker: a draw is posted when its HTML is back.
    const end = await eventually(() => upserts(id)[drawn + 2], "the reply's end to be drawn");
    assert.match(end.html, /<div class="text"><p><em>a<\/em>/, "the reply that ended is Markdown");
    assert.equal(upserts(id).length, drawn + 3);
    fire({ type: "agent_end", messages: [] });
    await eventually(() => resets() > before, "the chat to be reloaded after the turn");
  });
});

test("a long session's chat shows the context's last messages, and earlier ones on demand", async () => {
  // 1000 questions: the chat shows the last CHAT_PAGE (200) of them, then 200 more; then all of
  // them, as the server sends the whole context once its first and last pages meet.
  const stamp = (i) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString();
  const lines = [{ type: "session", version: 3, id: "long-chat", timestamp: stamp(0), cwd: ws.folder }];
  for (let i = 0; i < 1000; i++) {
    lines.push({ type: "message", id: `e${String(i).padStart(7, "0")}`, parentId: i ? `e${String(i - 1).padStart(7, "0")}` : null,
      timestamp: stamp(i), message: { role: "user", content: `question ${i}`, timestamp: i } });
  }
  const file = path.join(ws.folder, ".pi", "sessions", "long-chat.jsonl");
  fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const longUri = vscode.Uri.file(file).toString();
  await eventually(async () => (await api.sessions.list()).some((s) => s.uri === longUri), "the session to be listed");
  const long = await vscode.commands.executeCommand("piLsp.openChat", { uri: longUri });
  long.panel.__receive({ type: "ready" });
  const shown = async (count) => {
    const reset = await eventually(() => long.posted.filter((m) => m.type === "reset").find((m) => m.blocks.filter((b) => /class="msg user"/.test(b.html)).length === count), `${count} messages in the chat`);
    return reset.blocks;
  };
  let blocks = await shown(200);
  assert.match(blocks[0].html, /800 earlier messages of the context not shown <button data-earlier="1">Show 200 more<\/button>/);
  assert.match(blocks[1].html, /question 800</, "the first message shown is the 801st");
  assert.match(blocks.at(-1).html, /question 999</);
  await long.receive({ type: "earlier" });
  blocks = await shown(400);
  assert.match(blocks[0].html, /600 earlier messages of the context not shown <button data-earlier="1">Show 200 more<\/button>/);
  await long.receive({ type: "earlier" });
  blocks = await shown(1000);
  assert.match(blocks[0].html, /question 0</, "all of them, without the notice");
  long.panel.dispose();
});

test("opening a chat has the server get its first turn ready (pi.prepareTurn): the first reply does not wait for the SDK", async () => {
  const asked = [];
  const call = api.pi.call;
  api.pi.call = function (method, args) {
    const answer = call.call(this, method, args);
    if (method === "pi.prepareTurn") asked.push({ args, answer });
    return answer;
  };
  try {
    const { uri: other } = await call.call(api.pi, "pi.newSession", {});
    const chat = await vscode.commands.executeCommand("piLsp.openChat", { uri: other });
    assert.equal(asked.length, 1, "asked once, when the chat opened");
    assert.equal(asked[0].args.uri, other);
    const { provider, model } = await asked[0].answer;
    const preview = await call.call(api.pi, "pi.previewContext", { uri: other, page: 1 });
    assert.equal(`${provider}/${model}`, preview.model, "the model the chat shows");
    await vscode.commands.executeCommand("piLsp.openChat", { uri: other });
    assert.equal(asked.length, 1, "a chat already open is only shown");
    chat.panel.dispose();
  } finally {
    api.pi.call = call;
  }
});

test("a session moved to a new file mid-turn: the chat and its context preview follow it there", async () => {
  // Before, both kept the uri they opened: the turn's last events (naming the old file) were
  // dropped, and the next prompt went into the file cut short, without the first prompt or its
  // reply; the Sessions view went on showing the old file's rows as they were before the cut.
  const moving = await userSession("moving", ["An old prompt"]);
  const chat = await vscode.commands.executeCommand("piLsp.openChat", { uri: moving });
  chat.panel.__receive({ type: "ready" });
  const doc = await vscode.commands.executeCommand("piLsp.previewContext", { uri: moving });
  fake.script({ ...textReply(...Array.from({ length: 30 }, (_, i) => `word${i} `)), delay: 100 }, textReply("Second reply"));
  await chat.receive({ type: "send", text: "FIRST PROMPT", delivery: "prompt" });
  await eventually(() => chat.posted.some((m) => m.type === "upsert" && m.html.includes("word3")), "the reply to stream");
  const previews = async (uri) => {
    const item = (await api.view.getChildren()).find((i) => i.sessionUri === uri);
    return item ? (await api.view.getChildren(item)).map((row) => row.node?.preview ?? "").join("\n") : "";
  };
  await eventually(async () => (await previews(moving)).includes("FIRST PROMPT"), "the Sessions view to show the prompt");
  const oldFile = vscode.Uri.parse(moving).fsPath;
  const lines = fs.readFileSync(oldFile, "utf8").split("\n");
  fs.writeFileSync(oldFile, lines.slice(0, -2).join("\n") + "\n"); // another program cuts the prompt off
  await eventually(() => chat.uri !== moving, "the chat to follow the session");
  const newFile = vscode.Uri.parse(chat.uri).fsPath;
  assert.notEqual(newFile, oldFile);
  assert.equal(api.chats.get(chat.uri), chat);
  assert.equal(api.chats.get(moving), undefined);
  assert.ok(rec.messages.some((m) => m.message === `pi: session moved to ${path.basename(newFile)}`), "the user is told");
  assert.equal(api.sessions.lastUsed(), chat.uri, "the last used session follows");
  assert.equal(ext.parseContextUri(doc).session, chat.uri, "the context preview shows the new file");
  await eventually(() => !chat.transcript.busy, "the moved turn to end in the chat");
  // The Sessions view shows the cut file as it is now, and the session's rows under the new one.
  await eventually(async () => !(await previews(moving)).includes("FIRST PROMPT"), "the old file's rows to be read again");
  assert.match(await previews(chat.uri), /FIRST PROMPT/);
  const before = chat.posted.filter((m) => m.type === "reset").length;
  await chat.receive({ type: "send", text: "SECOND PROMPT", delivery: "prompt" });
  await eventually(() => !chat.transcript.busy && chat.posted.filter((m) => m.type === "reset").length > before, "the second turn to end");
  const sent = JSON.stringify(fake.requests.at(-1).body.messages);
  assert.match(sent, /FIRST PROMPT/);
  assert.match(sent, /word29/);
  assert.match(fs.readFileSync(newFile, "utf8"), /SECOND PROMPT/);
  assert.doesNotMatch(fs.readFileSync(oldFile, "utf8"), /SECOND PROMPT/);
  chat.panel.dispose();
});

test("a question asked, with no chat open, after its session moved is a card in the chat opened on the new file", async () => {
  // Before, the server's question went on naming the file cut short: the chat of the file the
  // session went on in never showed it.
  const moving = await userSession("closedask", ["An old prompt"]);
  const moves = [];
  const listening = api.sessions.onDidMove((move) => moves.push(move));
  fake.script(
    toolReply({ text: "First.", calls: [["toolu_c1", "bash", { command: "echo closed-before" }]] }),
    toolReply({ text: "Second.", calls: [["toolu_c2", "bash", { command: "echo closed-after" }]] }),
    textReply("Both ran."));
  await api.pi.call("pi.prompt", { uri: moving, text: "CLOSED PROMPT" });
  const note = (command) => eventually(() => rec.progress.find((p) => !p.done && p.options.title.includes(`run bash: ${command}`)), command);
  const first = await note("echo closed-before");
  const oldFile = vscode.Uri.parse(moving).fsPath;
  const lines = fs.readFileSync(oldFile, "utf8").split("\n");
  fs.writeFileSync(oldFile, lines.slice(0, -2).join("\n") + "\n"); // another program cuts the call off
  await click(links(first.options.title).find((l) => l.text === "Accept").href);
  await note("echo closed-after");
  const [move] = await eventually(() => moves.length && moves, "the session to move");
  listening.dispose();
  const chat = await vscode.commands.executeCommand("piLsp.openChat", { uri: move.to });
  chat.panel.__receive({ type: "ready" });
  const card = await eventually(() => chat.posted.find((m) => m.type === "approval" && m.detail === "echo closed-after"), "the card in the new file's chat");
  await chat.receive({ type: "approve", id: card.id, choice: "Accept" });
  await eventually(() => fs.readFileSync(vscode.Uri.parse(move.to).fsPath, "utf8").includes("Both ran."), "the moved turn to end in the new file");
  chat.panel.dispose();
});

test("a question of a turn whose session moved to a new file is a card in the chat that followed it", async () => {
  // Before, the questions went on naming the file cut short: the card asked before the move
  // stayed once answered, and the next question was shown in the notification only.
  const moving = await userSession("movingask", ["An old prompt"]);
  const chat = await vscode.commands.executeCommand("piLsp.openChat", { uri: moving });
  chat.panel.__receive({ type: "ready" });
  fake.script(
    toolReply({ text: "First.", calls: [["toolu_m1", "bash", { command: "echo before-move" }]] }),
    toolReply({ text: "Second.", calls: [["toolu_m2", "bash", { command: "echo after-move" }]] }),
    textReply("Both ran."));
  await chat.receive({ type: "send", text: "MOVING PROMPT", delivery: "prompt" });
  const first = await eventually(() => chat.posted.find((m) => m.type === "approval" && m.detail === "echo before-move"), "the first card");
  const oldFile = vscode.Uri.parse(moving).fsPath;
  const lines = fs.readFileSync(oldFile, "utf8").split("\n");
  fs.writeFileSync(oldFile, lines.slice(0, -2).join("\n") + "\n"); // another program cuts the reply off
  await eventually(() => chat.uri !== moving, "the chat to follow the session");
  await chat.receive({ type: "approve", id: first.id, choice: "Accept" });
  await eventually(() => chat.posted.some((m) => m.type === "approvalDone" && m.id === first.id), "the first card to go");
  const second = await eventually(() => chat.posted.find((m) => m.type === "approval" && m.detail === "echo after-move"), "the second card");
  await chat.receive({ type: "approve", id: second.id, choice: "Accept" });
  await eventually(() => chat.posted.some((m) => m.type === "approvalDone" && m.id === second.id), "the second card to go");
  await eventually(() => !chat.transcript.busy, "the moved turn to end in the chat");
  assert.match(fs.readFileSync(vscode.Uri.parse(chat.uri).fsPath, "utf8"), /after-move/);
  chat.panel.dispose();
});

test("a chat reopened mid-turn follows its session to a new file and sees the turn end", async () => {
  // Before, only agent_start gave the chat its turnId: reopened mid-turn it had none, the move
  // routed none of the turn's remaining events to it, and it stayed busy for good.
  const moving = await userSession("reopened", ["An old prompt"]);
  let chat = await vscode.commands.executeCommand("piLsp.openChat", { uri: moving });
  chat.panel.__receive({ type: "ready" });
  fake.script({ ...textReply(...Array.from({ length: 40 }, (_, i) => `word${i} `)), delay: 100 });
  await chat.receive({ type: "send", text: "REOPENED PROMPT", delivery: "prompt" });
  await eventually(() => chat.posted.some((m) => m.type === "upsert" && m.html.includes("word3")), "the reply to stream");
  chat.panel.dispose();
  chat = await vscode.commands.executeCommand("piLsp.openChat", { uri: moving });
  chat.panel.__receive({ type: "ready" });
  await eventually(() => chat.posted.some((m) => m.type === "upsert" && /word1\d/.test(m.html)), "the reopened chat to stream");
  const oldFile = vscode.Uri.parse(moving).fsPath;
  const lines = fs.readFileSync(oldFile, "utf8").split("\n");
  fs.writeFileSync(oldFile, lines.slice(0, -2).join("\n") + "\n"); // another program cuts the prompt off
  await eventually(() => chat.uri !== moving, "the chat to follow the session");
  await eventually(() => !chat.transcript.busy, "the moved turn to end in the reopened chat");
  assert.ok(chat.posted.some((m) => m.type === "upsert" && m.html.includes("word39")), "the rest of the reply is shown");
  chat.panel.dispose();
});

test("a context preview closed after its session moved and opened again on the cut file is the cut file's", async () => {
  // Before, the preview's follow of the move was kept by its uri for good: opened again on the
  // file cut short, it showed the new file, and its Remove from Context lens edited that one.
  const moving = await userSession("reviewed", ["An old prompt"]);
  const chat = await vscode.commands.executeCommand("piLsp.openChat", { uri: moving });
  chat.panel.__receive({ type: "ready" });
  const first = await vscode.commands.executeCommand("piLsp.previewContext", { uri: moving });
  fake.script({ ...textReply(...Array.from({ length: 30 }, (_, i) => `word${i} `)), delay: 100 });
  await chat.receive({ type: "send", text: "REVIEWED PROMPT", delivery: "prompt" });
  await eventually(() => chat.posted.some((m) => m.type === "upsert" && m.html.includes("word3")), "the reply to stream");
  const oldFile = vscode.Uri.parse(moving).fsPath;
  const lines = fs.readFileSync(oldFile, "utf8").split("\n");
  fs.writeFileSync(oldFile, lines.slice(0, -2).join("\n") + "\n"); // another program cuts the prompt off
  await eventually(() => ext.parseContextUri(first).session !== moving, "the preview to follow the session");
  await eventually(() => !chat.transcript.busy, "the moved turn to end in the chat");
  vscode.__test.closeDocument(first);
  const again = await vscode.commands.executeCommand("piLsp.previewContext", { uri: moving });
  assert.equal(again.toString(), first.toString());
  assert.equal(ext.parseContextUri(again).session, moving);
  const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === again.toString());
  assert.match(doc.getText(), /An old prompt/);
  assert.doesNotMatch(doc.getText(), /word29/);
  const [{ provider }] = rec.codeLensProviders.filter((p) => p.selector.scheme === "pi-context");
  const remove = provider.provideCodeLenses(doc).find((l) => l.command.title === "Remove from Context");
  assert.equal(remove.command.arguments[0].uri, moving, "the lens edits the cut file");
  chat.panel.dispose();
});

test("no Markdown worker is left running once the extension is deactivated", async () => {
  // Before, the chats' worker thread was never terminated: it outlived the extension.
  const worker = api.chats.markdown;
  assert.ok(worker.alive, "the chats rendered in it");
  const stopping = rig;
  rig = undefined;
  await stopping.stop();
  await eventually(() => !worker.alive, "the worker to end");
});

test("a run of this file that selects none of its tests ends, its server stopped", async () => {
  // On Node 22 such a run never ended: `after` ran at once, before the server was started.
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT; // else it reports to this run instead of being one of its own
  const run = cp.spawn(process.execPath, ["--test", "--test-name-pattern=^no test has this name$", __filename],
    { env, stdio: "ignore", detached: true });
  try {
    await eventually(() => run.exitCode !== null, "the run with no test to end", PROCESS_CEILING_MS);
    assert.equal(run.exitCode, 0);
  } finally {
    if (run.exitCode === null) process.kill(-run.pid, "SIGKILL"); // the run, its test file and its server
  }
});
