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
const words = () => held(textReply(...Array.from({ length: 8 }, (_, i) => `w${i} `)), 4);

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
const streamed = (n) => n.event.type === "message_update" && n.event.deltas.some((d) => d.delta?.includes("w1"));

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
  const reply = words();
  fake.script(reply.reply);
  try {
    const streaming = arrival(streamed);
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
