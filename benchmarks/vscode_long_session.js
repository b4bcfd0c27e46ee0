// VS Code on a long session, for benchmarks/bench_editors.py: the extension (on the offline
// stand-in for the VS Code API, as its tests run it) against the real server. How long the
// Sessions view and the chat take to show PI_LSP_SESSION, and how long the extension host's
// event loop stalls while a turn streams into the session with both open. Prints JSON.
"use strict";
const path = require("node:path");
const fs = require("node:fs");
const { performance } = require("node:perf_hooks");
const vscodeDir = path.join(__dirname, "..", "editors", "vscode");
require(path.join(vscodeDir, "testlib", "register-vscode-stub"));
const vscode = require("vscode");
const { activateWithFake } = require(path.join(vscodeDir, "testlib", "activate"));
const { eventually } = require(path.join(vscodeDir, "testlib", "server"));

const session = process.env.PI_LSP_SESSION;
const pieces = Number(process.env.PI_LSP_PIECES);
const pieceDelayMs = Number(process.env.PI_LSP_PIECE_DELAY_MS);

// A timer due every 5 ms: a gap much longer than that is time the extension host could not
// run, which a user feels as a window that does not answer.
let gaps = [];
let last = performance.now();
const ticker = setInterval(() => {
  const now = performance.now();
  gaps.push(now - last);
  last = now;
}, 5);
function stalls() {
  // The gap still open counts too: a wait that ends right after a block returns before the
  // timer can run, and a 170 s stall of the chat's opening was reported as 0.4 s.
  gaps.push(performance.now() - last);
  const result = { longest_ms: Math.max(0, ...gaps), over_50ms: gaps.filter((g) => g > 50).length };
  gaps = [];
  last = performance.now();
  return result;
}

/** The session file's last entry, read from its end (the waits must not cost what they measure). */
function lastEntry(file) {
  const fd = fs.openSync(file, "r");
  try {
    const size = fs.fstatSync(fd).size;
    const tail = Buffer.alloc(Math.min(size, 1 << 18));
    fs.readSync(fd, tail, 0, tail.length, size - tail.length);
    return JSON.parse(tail.toString("utf8").trimEnd().split("\n").at(-1));
  } finally {
    fs.closeSync(fd);
  }
}

function textReply(count) {
  const start = { type: "message_start", message: { id: "msg_bench", type: "message", role: "assistant", model: "claude-sonnet-4-5", content: [], stop_reason: null, usage: { input_tokens: 100, output_tokens: 0 } } };
  const deltas = Array.from({ length: count }, (_, i) => ({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: `word${i} ` } }));
  return {
    delay: pieceDelayMs,
    events: [start, { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }, ...deltas,
      { type: "content_block_stop", index: 0 },
      { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 20 } },
      { type: "message_stop" }],
  };
}

async function main() {
  const figures = {};
  let start = performance.now();
  const rig = await activateWithFake({ toolApproval: "auto" });
  // The long session joins the workspace's sessions (the watcher lists it).
  const copied = path.join(rig.ws.folder, ".pi", "sessions", path.basename(session));
  fs.copyFileSync(session, copied);
  const { api, fake } = rig;
  const uri = vscode.Uri.file(copied).toString();
  await eventually(async () => (await api.sessions.list()).some((s) => s.uri === uri), "the session to be listed");
  figures.activate_ms = performance.now() - start;
  stalls();

  // What VS Code does with the view: ask the session's rows, and again at each change it hears of.
  let rows = [];
  async function draw() {
    const item = (await api.view.getChildren()).find((i) => i.kind === "session" && i.sessionUri === uri);
    if (!item) throw new Error("the Sessions view does not show the session");
    rows = await api.view.getChildren(item);
  }
  start = performance.now();
  await draw();
  figures.view_ms = performance.now() - start;
  figures.view_rows = rows.length;
  api.view.onDidChangeTreeData(() => void draw());

  start = performance.now();
  const panel = await vscode.commands.executeCommand("piLsp.openChat", { uri });
  panel.panel.__receive({ type: "ready" });
  const resets = () => panel.posted.filter((m) => m.type === "reset").length;
  await eventually(() => resets() > 0, "the chat to show the transcript");
  figures.chat_ms = performance.now() - start;
  figures.opening = stalls();

  fake.script(textReply(pieces));
  const before = resets();
  start = performance.now();
  await panel.receive({ type: "send", text: "Count for the benchmark", delivery: "prompt" });
  const streamed = (piece) => panel.posted.some((m) => m.type === "upsert" && m.html.includes(piece));
  await eventually(() => streamed("word0 "), "the reply to start streaming");
  figures.first_piece_ms = performance.now() - start;
  figures.waiting = stalls();
  start = performance.now();
  await eventually(() => streamed(`word${pieces - 1}`), "the reply to stream in");
  figures.stream_ms = performance.now() - start;
  figures.streaming = stalls();
  start = performance.now();
  // The view follows: the tree it holds ends at the reply, as the session file does.
  await eventually(() => {
    const entry = lastEntry(copied);
    return entry.message?.role === "assistant" && rows.some((row) => row.node?.id === entry.id && String(row.label).startsWith("← leaf"));
  }, "the Sessions view to follow the turn");
  figures.tree_follow_ms = performance.now() - start;
  await eventually(() => !panel.transcript.busy && resets() > before, "the turn to end and the chat to reload");
  figures.chat_reload_ms = performance.now() - start;
  figures.settling = stalls();
  clearInterval(ticker);
  await rig.stop();
  process.stdout.write(JSON.stringify(figures) + "\n");
}

main().then(() => process.exit(0), (error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
