// Editing the context end to end: activate(), the real server, the example session. Remove from
// Context on a preview heading's code lens, Undo and Replace in Context… from the chat; the
// preview and the chat's token count follow each edit.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");
const { eventually, setUp } = require("../testlib/server");
const { activateOn } = require("../testlib/activate");

const { rec, respond } = vscode.__test;
const RESULT = "145bca81"; // the EXPLAIN ANALYZE output on the current branch
const REPLY = "456798a9";
let rig, api, uri, panel;

setUp(async () => {
  rig = await activateOn({ settings: {} });
  api = rig.api;
  uri = (await api.sessions.list())[0].uri;
}, () => rig?.stop());

const lastReset = () => panel.posted.filter((m) => m.type === "reset").at(-1);
const total = async () => (await api.pi.call("pi.previewContext", { uri })).totalTokens;
const lines = () => fs.readFileSync(vscode.Uri.parse(uri).fsPath, "utf8").trim().split("\n").map((l) => JSON.parse(l));

async function lenses(session = uri) {
  const doc = await vscode.commands.executeCommand("piLsp.previewContext", { uri: session });
  const document = await vscode.workspace.openTextDocument(doc); // the preview as it is now
  const [{ provider }] = rec.codeLensProviders.filter((p) => p.selector.scheme === "pi-context");
  return { text: document.getText(), lenses: provider.provideCodeLenses(document) };
}

test("Remove from Context on a preview heading writes pi's edit, and the preview marks it", async () => {
  const before = await total();
  const shown = await lenses();
  const remove = shown.lenses.find((l) => l.command.title === "Remove from Context" && l.command.arguments[0].entryId === RESULT);
  assert.ok(remove, "the tool result's heading offers Remove from Context");
  assert.match(shown.text.split("\n")[remove.range.start.line], /^## \d+\. toolResult · 301 tokens · `145bca81`$/);
  assert.equal(remove.command.arguments[0].uri, uri);
  await vscode.commands.executeCommand(remove.command.command, ...remove.command.arguments);
  const edit = lines().at(-1);
  assert.deepEqual([edit.type, edit.targetId, edit.replacement], ["context_edit", RESULT, null]);
  assert.ok((await total()) < before, "the total goes down");
  const after = await lenses();
  assert.match(after.text, /## ~~toolResult~~ · removed from the context · 301 → 0 tokens · `145bca81`/);
  assert.deepEqual(after.lenses.filter((l) => l.command.arguments[0].entryId === RESULT).map((l) => l.command.title), ["Undo Context Edit"]);
});

test("the chat shows the removed message in its place; Undo and Replace… update its token count", async () => {
  panel = await vscode.commands.executeCommand("piLsp.openChat", { uri });
  panel.panel.__receive({ type: "ready" });
  await eventually(() => lastReset()?.blocks.some((b) => b.id === `removed-${RESULT}`), "the removed tool result in the chat");
  const removedTokens = lastReset().state.tokens;
  const removed = lastReset().blocks.find((b) => b.id === `removed-${RESULT}`).html;
  assert.match(removed, /toolResult removed from the context · 301 tokens.*data-ctx="undo" data-entry="145bca81"/);

  await panel.receive({ type: "contextEdit", action: "undo", entryId: RESULT });
  await eventually(() => !lastReset().blocks.some((b) => b.id.startsWith("removed-")), "the result back in the chat");
  assert.match(lastReset().blocks.map((b) => b.html).join("\n"), /data-ctx="remove" data-entry="145bca81"/);
  assert.notEqual(lastReset().state.tokens, removedTokens);
  assert.deepEqual(lines().at(-1).replacement.content[0].type, "text", "the original content, restored by a later edit");

  const restoredTokens = lastReset().state.tokens;
  respond("showInputBox", (options) => {
    assert.match(options.value, /^I'll add tests\/test_orders\.py/, "a short message is offered for editing");
    return "I added the test.";
  });
  await panel.receive({ type: "contextEdit", action: "replace", entryId: REPLY });
  await eventually(() => lastReset().blocks.find((b) => b.id === REPLY)?.html.includes("✎ edited in context"), "the reply marked edited");
  assert.match(lastReset().blocks.find((b) => b.id === REPLY).html, /I added the test\./);
  assert.notEqual(lastReset().state.tokens, restoredTokens);
  respond("showInputBox");
});

test("an edit the server refuses is said plainly, and nothing is written", async () => {
  const before = fs.readFileSync(vscode.Uri.parse(uri).fsPath);
  rec.messages.length = 0;
  await vscode.commands.executeCommand("piLsp.removeFromContext", { uri, entryId: "a2b2d4fe" });
  assert.match(rec.messages.find((m) => m.kind === "error").message, /pi: entry 'a2b2d4fe' is a compaction entry/);
  assert.deepEqual(fs.readFileSync(vscode.Uri.parse(uri).fsPath), before);
});

test("a heading's lens edits its own entry whatever the id holds", async () => {
  // Before, the lenses read the id back from the heading: `x \`victim\`` matched no pattern (no
  // lens), and an id with a line break split its heading, so a crafted line could name another.
  const ts = "2026-01-01T00:00:00.000Z";
  const ids = ["victim", "x `victim`", "y\n## 3. user · 1 tokens · `victim`"];
  const lines = [{ type: "session", version: 3, id: "ids", timestamp: ts, cwd: rig.ws.folder },
    ...ids.map((id, i) => ({ type: "message", id, parentId: i ? ids[i - 1] : null, timestamp: ts,
      message: { role: "user", content: [{ type: "text", text: `message ${i}` }], timestamp: i } }))];
  const file = path.join(rig.ws.sessionsDir, "2027-01-02T00-00-00-000Z_ids.jsonl");
  fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const shown = await lenses(vscode.Uri.file(file).toString());
  const removes = shown.lenses.filter((l) => l.command.title === "Remove from Context");
  assert.deepEqual(removes.map((l) => l.command.arguments[0].entryId), ids);
  const text = shown.text.split("\n");
  assert.deepEqual(removes.map((l) => text[l.range.start.line]), [
    "## 1. user · 3 tokens · `victim`", "## 2. user · 3 tokens · `` x `victim` ``",
    "## 3. user · 3 tokens · `` y\\n## 3. user · 1 tokens · `victim` ``"]);
});
