// A chat opened while a turn runs: it shows the turn as running at once (a turn held in a long
// tool may send no event for minutes), and events that come while it reads the transcript are
// shown on top of that transcript, none lost and none twice. The real server, the fake model.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const vscode = require("vscode");
const { eventually, setUp } = require("../testlib/server");
const { activateWithFake } = require("../testlib/activate");
const { held, textReply } = require("../testlib/fake-anthropic");

let rig, ws, api, fake, uri;
let running = false; // a turn of the session runs (the server said so)

setUp(async () => {
  ({ fake, ws, api } = rig = await activateWithFake({ toolApproval: "ask" }));
  uri = vscode.Uri.file(ws.sessionFile).toString();
  api.pi.onTurn((n) => {
    if (n.event.type === "agent_start") running = true;
    else if (n.event.type === "agent_end" || n.event.type === "error") running = false;
  });
}, () => rig?.stop());

const LOADED = /guards the CTE fix/; // the example session's last reply
/** A reply of words `<word>0 <word>1 …`, held after its first two. */
const words = (word) => held(textReply(...Array.from({ length: 8 }, (_, i) => `${word}${i} `)), 4);

/** Resolves once a turn event of the session satisfies `seen`. */
function arrival(seen) {
  return new Promise((resolve) => {
    const listening = api.pi.onTurn((n) => {
      if (!seen(n)) return;
      listening.dispose();
      resolve(n);
    });
  });
}
/** The turn event that brings `<word>1`. */
const streamed = (word) => (n) => n.event.type === "message_update" && n.event.deltas.some((d) => d.delta?.includes(`${word}1`));

/** `pi.previewContext` goes through `around(real)` while `body` runs. */
async function withPreview(around, body) {
  const call = api.pi.call;
  api.pi.call = (command, args) => command === "pi.previewContext" ? around(() => call.call(api.pi, command, args)) : call.call(api.pi, command, args);
  try {
    return await body();
  } finally {
    api.pi.call = call;
  }
}

async function openChat() {
  const panel = await vscode.commands.executeCommand("piLsp.openChat", { uri });
  panel.panel.__receive({ type: "ready" });
  return panel;
}

/** Aborts the panel's turn, waits for it to end and closes the chat (each test opens its own). */
async function abort(panel) {
  await panel.receive({ type: "abort" });
  await eventually(() => !panel.transcript.busy, "the turn to end");
  panel.panel.dispose();
}

/** What the webview shows: the last reset's blocks, as the upserts since changed them. */
const shown = (panel) => {
  const reset = panel.posted.findLastIndex((m) => m.type === "reset");
  const blocks = new Map(reset < 0 ? [] : panel.posted[reset].blocks.map((b) => [b.id, b.html]));
  for (const m of panel.posted.slice(Math.max(reset, 0))) if (m.type === "upsert") blocks.set(m.id, m.html);
  return [...blocks.values()].join("\n");
};

test("a chat opened while a turn runs shows it running at once, with Abort", async () => {
  // It showed no turn until the turn's next event: none comes while a reply (or a long bash) waits.
  const reply = words("talk");
  fake.script(reply.reply);
  try {
    const streaming = arrival(streamed("talk"));
    const { turnId } = await api.pi.call("pi.prompt", { uri, text: "Talk slowly" });
    running = true;
    await streaming;
    const panel = await openChat();
    assert.equal(panel.transcript.busy, true, "the turn runs: Abort, Steer and Follow up show");
    assert.equal(panel.posted.filter((m) => m.type === "state" || m.type === "reset").at(-1).state.busy, true, "in the webview too");
    assert.equal(panel.turnId, turnId);
    assert.match(shown(panel), LOADED);
    await abort(panel);
  } finally {
    reply.release(); // a failed check leaves no reply held, nor a chat open
    await eventually(() => !running, "the turn to end");
    api.chats.get(uri)?.panel.dispose();
  }
});

test("events that come while the chat reads its transcript are shown on it, none lost", async () => {
  // The transcript read was thrown away: the chat showed only the turn's events.
  const reply = words("go");
  fake.script(reply.reply);
  let answered;
  const read = new Promise((resolve) => (answered = resolve));
  let eventCame;
  const gate = new Promise((resolve) => (eventCame = resolve));
  try {
    const panel = await withPreview(async (real) => {
      const preview = await real();
      answered();
      await gate; // the context read before the turn, the turn's events come before its answer
      return preview;
    }, async () => {
      const opening = openChat();
      await read;
      const streaming = arrival(streamed("go"));
      await api.pi.call("pi.prompt", { uri, text: "Go on slowly" });
      running = true;
      await streaming;
      eventCame();
      return await opening;
    });
    await eventually(() => /go0 go1/.test(shown(panel)), "the streamed words in the chat");
    assert.match(shown(panel), LOADED, "the transcript read");
    assert.match(shown(panel), /Go on slowly/, "the prompt, from its events");
    assert.equal(panel.transcript.busy, true);
    await abort(panel);
  } finally {
    reply.release(); // a failed check leaves no reply held, nor a chat open
    await eventually(() => !running, "the turn to end");
    api.chats.get(uri)?.panel.dispose();
  }
});

test("a transcript read after the turn's prompt was written shows the prompt once", async () => {
  // The events of a message the transcript read holds are not added again.
  const reply = words("more");
  fake.script(reply.reply);
  try {
    const streaming = arrival(streamed("more"));
    const panel = await withPreview(async (real) => {
      await streaming; // read once the prompt is written, its events still to be shown
      return real();
    }, async () => {
      const opening = openChat();
      await api.pi.call("pi.prompt", { uri, text: "Once more slowly" });
      running = true;
      return await opening;
    });
    await eventually(() => /more0 more1/.test(shown(panel)), "the streamed words in the chat");
    assert.match(shown(panel), LOADED, "the transcript read");
    assert.equal(shown(panel).match(/Once more slowly/g)?.length, 1, "the prompt shown once");
    assert.equal(shown(panel).match(/more0 more1/g)?.length, 1, "the reply shown once");
    await abort(panel);
  } finally {
    reply.release(); // a failed check leaves no reply held, nor a chat open
    await eventually(() => !running, "the turn to end");
    api.chats.get(uri)?.panel.dispose();
  }
});
