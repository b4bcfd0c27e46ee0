// Rewinding files end to end: activate(), the real server, the local fake Anthropic endpoint.
// Two turns write notes.txt; Branch Here then offers to restore the first turn's files (the
// diff first, the question beside it, never over it), Undo puts them back, and Restore Files to Here… can be declined; Branch Here with
// Summary… offers the restore too.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");
const { eventually, setUp } = require("../testlib/server");
const { activateWithFake } = require("../testlib/activate");
const { textReply, toolReply } = require("../testlib/fake-anthropic");

const { rec, respond } = vscode.__test;
let rig, ws, api, fake, uri, first, second;
const run = (id, ...args) => vscode.commands.executeCommand(id, ...args);
const errors = () => rec.messages.filter((m) => m.kind === "error").map((m) => m.message);
const notes = () => fs.readFileSync(path.join(ws.folder, "notes.txt"), "utf8");

/** One prompt to its end; the id of the reply that ends it. */
async function turn(text, reply) {
  // The reply is written before the turn ends, so wait for its agent_end too.
  let ended = false;
  const { turnId } = await api.pi.call("pi.prompt", { uri, text });
  const listening = api.pi.onTurn((n) => { ended ||= n.turnId === turnId && n.event.type === "agent_end"; });
  await eventually(() => ended, `the end of the turn ${text}`).finally(() => listening.dispose());
  return eventually(async () => {
    const tree = await api.pi.call("pi.getTree", { uri });
    const last = tree.nodes.at(-1);
    return last && last.preview === reply && last.id;
  }, `the reply ${reply}`);
}

setUp(async () => {
  ({ fake, ws, api } = rig = await activateWithFake({ toolApproval: "auto" }));
  uri = (await api.pi.call("pi.newSession", { name: "rewind" })).uri;
  fake.script(
    toolReply({ calls: [["c1", "write", { path: "notes.txt", content: "v1\n" }]] }), textReply("wrote v1"),
    toolReply({ calls: [["c2", "write", { path: "notes.txt", content: "v2\n" }]] }), textReply("wrote v2"));
  first = await turn("write v1", "wrote v1");
  second = await turn("write v2", "wrote v2");
  assert.equal(notes(), "v2\n");
}, () => rig?.stop());

/** What a restore asks: not a modal dialog, which would cover the diff it asks about. */
const question = (lead, entryId) => `${lead}Restore 1 file(s) to entry ${entryId}? The diff shows what changes (- now, + then).`;

test("Branch Here offers to restore the files, shows the diff first, and Undo puts them back", async () => {
  const asked = [];
  respond("showWarningMessage", (message, ...items) => {
    asked.push({ message, items, showing: rec.shown.at(-1)?.uri.scheme });
    return "Restore";
  });
  respond("showInformationMessage", (message) => (message.startsWith("pi: restored") ? "Undo" : undefined));
  const result = await run("piLsp.branch", { uri, entryId: first });
  assert.deepEqual(errors(), []);
  assert.equal(result.fileChanges, 1);
  assert.deepEqual(asked, [{ message: question("1 file(s) differ from this entry. ", first), items: ["Restore", "Cancel"], showing: "pi-files" }]);
  const shown = rec.shown.at(-1);
  assert.equal(shown.uri.scheme, "pi-files");
  assert.match(shown.getText(), /^diff --git a\/notes.txt b\/notes.txt/);
  assert.match(shown.getText(), /^-v2$/m);
  assert.match(shown.getText(), /^\+v1$/m);
  // Restored, then the Undo button of the message after it restores the files before.
  await eventually(() => rec.messages.some((m) => m.message.startsWith("pi: undid the restore")), "the undo");
  assert.equal(notes(), "v2\n");
  assert.ok(rec.messages.some((m) => m.message === `pi: restored 1 file(s) to entry ${first}.`));
  respond("showWarningMessage");
  respond("showInformationMessage");
});

test("Restore Files to Here… on an entry does nothing when declined, and restores when confirmed", async () => {
  respond("showWarningMessage", () => undefined);
  assert.equal(await run("piLsp.restoreFiles", { uri, entryId: first }), undefined);
  assert.equal(notes(), "v2\n");
  respond("showWarningMessage", () => "Restore");
  const restored = await run("piLsp.restoreFiles", { uri, entryId: first });
  respond("showWarningMessage");
  assert.deepEqual(errors(), []);
  assert.deepEqual(restored.files.map((f) => [f.path, f.status]), [["notes.txt", "modified"]]);
  assert.equal(notes(), "v1\n");
  const undone = await run("piLsp.undoRestoreFiles", { uri });
  assert.equal(undone.files.length, 1);
  assert.equal(notes(), "v2\n");
});

test("before the first turn the state is the one that turn started from: notes.txt goes", async () => {
  const tree = await api.pi.call("pi.getTree", { uri });
  const asked = [];
  respond("showWarningMessage", (message) => { asked.push(message); return undefined; });
  assert.equal(await run("piLsp.restoreFiles", { uri, entryId: tree.nodes[0].id }), undefined);
  respond("showWarningMessage");
  assert.deepEqual(asked, [question("", tree.nodes[0].id)]);
  assert.match(rec.shown.at(-1).getText(), /^deleted file mode/m, "the diff says the file goes");
  assert.equal(notes(), "v2\n");
});

test("Branch Here with Summary… offers to restore the files as Branch Here does", async () => {
  await api.pi.call("pi.branch", { uri, targetId: second }); // back on the v2 tip, files as they are
  const asked = [];
  respond("showWarningMessage", (message) => { asked.push(message); return "Restore"; });
  const done = await run("piLsp.branchWithSummary", { uri, entryId: first, instructions: "" });
  respond("showWarningMessage");
  assert.deepEqual(errors(), []);
  assert.equal(done.ok, true);
  assert.equal(done.result.fileChanges, 1);
  assert.deepEqual(asked, [question("1 file(s) differ from this entry. ", done.result.leafId)]);
  assert.equal(notes(), "v1\n");
  await run("piLsp.undoRestoreFiles", { uri });
  assert.equal(notes(), "v2\n");
});

test("a session whose turns recorded no files says so instead of restoring", async () => {
  const example = vscode.Uri.file(ws.sessionFile).toString();
  const before = rec.messages.length;
  assert.equal(await run("piLsp.restoreFiles", { uri: example, entryId: "24652ae8" }), undefined);
  const said = rec.messages.slice(before).map((m) => m.message);
  assert.deepEqual(said, ["pi: no files recorded at entry 24652ae8 (no turn recorded the files at or after this entry)."]);
});

test("what a restore leaves alone is listed after the diff, one line each, and counted; not 'already match'", async () => {
  // A file over the snapshot cap, named with a line break, escapes and a command link.
  const big = path.join(ws.folder, "big\n\x1b[31m[run](command:workbench.action.quit)\x07.bin");
  fs.writeFileSync(big, Buffer.alloc(5 * 1024 * 1024 + 1, "x"));
  const line = "left alone (ignored, unreadable, or too large to snapshot): big [31m[run](command:workbench.action.quit) .bin";
  const said = (start) => rec.messages.slice(start).map((m) => m.message).filter((m) => m.startsWith("pi: "));
  try {
    // The state at the second reply is the files now but for the big file: nothing to restore.
    const asked = [];
    respond("showWarningMessage", (message) => { asked.push(message); return "Restore"; });
    let start = rec.messages.length;
    assert.equal(await run("piLsp.restoreFiles", { uri, entryId: second }), undefined);
    assert.deepEqual(asked, [], "nothing to ask about");
    assert.deepEqual(said(start), [`pi: nothing to restore to entry ${second}; 1 file(s) left alone, listed in the diff.`]);
    assert.equal(rec.shown.at(-1).getText(), `${line}\n`);
    // The first reply's: notes.txt is restored, the big file stays, and the messages count it.
    start = rec.messages.length;
    const restored = await run("piLsp.restoreFiles", { uri, entryId: first });
    assert.deepEqual(errors(), []);
    assert.deepEqual(restored.skipped, [path.basename(big)]);
    assert.equal(notes(), "v1\n");
    assert.match(rec.shown.at(-1).getText(), /^-v2\n\+v1\nleft alone \(/m);
    assert.ok(rec.shown.at(-1).getText().endsWith(`\n${line}\n`), rec.shown.at(-1).getText());
    assert.deepEqual(said(start), [`pi: restored 1 file(s) to entry ${first}; 1 left alone, see the diff.`]);
    start = rec.messages.length;
    await run("piLsp.undoRestoreFiles", { uri });
    assert.equal(notes(), "v2\n");
    assert.deepEqual(said(start), ["pi: undid the restore (1 file(s) back as they were; 1 left alone)."]);
    assert.ok(fs.existsSync(big), "the big file stays");
    // Branch Here says so too: to the first reply it asks, counting both; to the second, where
    // only the big file differs, it says nothing (Restore Files to Here… lists it): such a file
    // may not differ at all, and every branch would speak of it.
    asked.length = 0;
    respond("showWarningMessage", (message) => { asked.push(message); return "Cancel"; });
    const branched = await run("piLsp.branch", { uri, entryId: first });
    assert.deepEqual([branched.fileChanges, branched.leftAlone], [1, 1]);
    assert.deepEqual(asked, [question("1 file(s) differ from this entry, and a restore leaves 1 alone (listed in the diff). ", first)]);
    assert.equal(notes(), "v2\n");
    asked.length = 0;
    start = rec.messages.length;
    const shown = rec.shown.length;
    await run("piLsp.branch", { uri, entryId: second });
    assert.deepEqual(asked, [], "nothing to ask about");
    assert.deepEqual(said(start), [], "nothing to say with no file to restore");
    assert.equal(rec.shown.length, shown, "no diff shown");
    // Without it nothing differs and nothing is left alone: only then do the files match.
    fs.rmSync(big);
    start = rec.messages.length;
    assert.equal(await run("piLsp.restoreFiles", { uri, entryId: second }), undefined);
    assert.deepEqual(said(start), [`pi: the files already match entry ${second}.`]);
  } finally {
    respond("showWarningMessage");
    fs.rmSync(big, { force: true });
  }
});

test("a restore stopped part-way keeps the undo id its error carries, so Undo undoes the part done", async () => {
  // The server answers a restore stopped part-way (an editor refusing a change after a file was
  // written on disk) with an error whose data carries the undo id; its message stays the words.
  // The restore here runs for real, so the id is real; only its answer is turned into that error.
  const { ResponseError } = require("vscode-languageclient/node");
  const call = api.pi.call;
  let message;
  api.pi.call = async (command, args) => {
    const result = await call.call(api.pi, command, args);
    if (command !== "pi.restoreFiles" || !args.entryId) return result;
    message = "other.txt was not restored: the editor did not apply the change; but the restore had " +
      `changed notes.txt already: restore the undo snapshot ${result.undoId} to undo that`;
    throw new ResponseError(-32011, message, { undoId: result.undoId });
  };
  respond("showWarningMessage", () => "Restore");
  try {
    assert.equal(notes(), "v2\n");
    assert.equal(await run("piLsp.restoreFiles", { uri, entryId: first }), undefined);
  } finally {
    api.pi.call = call;
    respond("showWarningMessage");
  }
  assert.deepEqual(errors().at(-1), `pi: ${message}`);
  assert.equal(notes(), "v1\n");
  const undone = await run("piLsp.undoRestoreFiles", { uri });
  assert.deepEqual(undone.files.map((f) => f.path), ["notes.txt"]);
  assert.equal(notes(), "v2\n");
});
