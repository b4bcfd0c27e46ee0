// Workspace trust end to end: the extension activated in Restricted Mode against the real server
// shows sessions and previews, runs nothing and keeps the folder's .pi/ files out; granting
// trust offers to save it in pi's trust.json; pi: Trust This Folder… writes pi's choices there.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");
const manifest = require("../package.json");
const ext = require("../out/extension.js");
const { eventually, setUp } = require("../testlib/server");
const { activateOn } = require("../testlib/activate");

const { rec, setTrusted, respond } = vscode.__test;
let rig, ws, api, sessionUri;
const run = (id, ...args) => vscode.commands.executeCommand(id, ...args);
const store = () => path.join(ws.agentDir, "trust.json");
const status = async () => (await api.pi.call("pi.trustStatus", {})).folders[0];

setUp(async () => {
  // The folder's own settings would turn summaries off and pick another model.
  const settings = { defaultModel: "claude-opus-4-5", summaryModel: null };
  // The folder was opened in Restricted Mode.
  ({ ws, api } = rig = await activateOn({ settings, configure: () => (setTrusted(false), {}) }));
  sessionUri = (await api.sessions.list())[0].uri;
}, () => rig?.stop());

test("the manifest: limited support in Restricted Mode, no program or key route from a workspace", () => {
  const untrusted = manifest.capabilities.untrustedWorkspaces;
  assert.equal(untrusted.supported, "limited");
  for (const key of ["command", "pythonPath", "toolApproval", "anthropicBaseUrl", "sessionDirs"]) {
    assert.ok(untrusted.restrictedConfigurations.includes(`piLsp.${key}`), key);
  }
  const settings = manifest.contributes.configuration.properties;
  assert.equal(settings["piLsp.command"].scope, "machine");
  assert.equal(settings["piLsp.pythonPath"].scope, "machine");
  // In Restricted Mode a server command inside the workspace (the repository's own program)
  // is not started.
  assert.ok(ext.launchesFromWorkspace([["${workspaceFolder}/bin/pi-lsp"], ""]));
  assert.ok(ext.launchesFromWorkspace([[], "${workspaceFolder}/.venv/bin/python"]));
  assert.ok(!ext.launchesFromWorkspace([[], "/usr/bin/python3"]));
});

test("Restricted Mode: sessions and previews work, turns and summaries are refused", async () => {
  assert.equal(rec.treeProviders.get("piLsp.sessions") !== undefined, true);
  const preview = await api.pi.call("pi.previewContext", { uri: sessionUri });
  assert.ok(preview.messages.length > 0);
  const plan = await api.pi.call("pi.compact", { uri: sessionUri, dryRun: true });
  assert.ok("plan" in plan, "a compaction plan only reads");
  for (const [command, args] of [
    ["pi.prompt", { uri: sessionUri, text: "hi" }],
    ["pi.compact", { uri: sessionUri }],
    ["pi.branchWithSummary", { uri: sessionUri, targetId: "24652ae8" }],
  ]) {
    await assert.rejects(api.pi.call(command, args), /Restricted Mode/, command);
  }
  const state = await status();
  assert.deepEqual([state.trusted, state.decision, state.projectFiles], [false, "restricted", [".pi/settings.json"]]);
  assert.equal((await api.pi.call("pi.listModels", {})).default, "anthropic/claude-opus-5-5", "the folder's settings are not loaded");
  // pi: Trust This Folder… sends the user to VS Code's own trust first.
  respond("showWarningMessage", () => "Manage Workspace Trust");
  await run("piLsp.trust");
  assert.ok(rec.executed.some((e) => e.id === "workbench.trust.manage"));
  assert.ok(!fs.existsSync(store()));
});

test("granting trust sends it to the server and offers to save it in pi's trust.json", async () => {
  const offers = [];
  fs.mkdirSync(path.join(ws.folder, ".pi", "extensions"));
  fs.writeFileSync(path.join(ws.folder, ".pi", "extensions", "evil.ts"), "export default () => {};\n");
  respond("showInformationMessage", (message, ...items) => {
    offers.push(message);
    return items.find((i) => i.startsWith("Save"));
  });
  setTrusted(true);
  await eventually(() => fs.existsSync(store()), "trust.json");
  // It names what pi would load there, its extension too (pi runs it once the folder is trusted).
  assert.match(offers[0], /Trust .* for the pi CLI too\? pi loads its \.pi\/settings\.json and \.pi\/extensions only in trusted folders/);
  const real = fs.realpathSync(ws.folder);
  assert.equal(fs.readFileSync(store(), "utf8"), `${JSON.stringify({ [real]: true }, null, 2)}\n`);
  const state = await status();
  assert.deepEqual([state.trusted, state.decision], [true, "saved"]);
  assert.equal((await api.pi.call("pi.listModels", {})).default, "anthropic/claude-opus-4-5");
});

test("pi: Trust This Folder… saves pi's choices", async () => {
  respond("showQuickPick", (items, options) => {
    assert.match(options.placeHolder, /trusted: saved in pi's trust.json/);
    // Not "Load its .pi/settings.json and .pi/models.json?": trusting lets pi run its extension.
    assert.match(options.placeHolder, /pi and pi-lsp load its \.pi\/settings\.json and \.pi\/extensions only in trusted folders/);
    assert.deepEqual(items.map((i) => i.label), ["Trust", "Trust parent folder", "Do not trust", "Forget the decision"]);
    return items.find((i) => i.label === "Do not trust");
  });
  respond("showInformationMessage", () => undefined);
  const saved = await run("piLsp.trust");
  assert.deepEqual([saved.trusted, saved.decision], [false, "saved"]);
  assert.deepEqual(JSON.parse(fs.readFileSync(store(), "utf8")), { [fs.realpathSync(ws.folder)]: false });
  assert.equal((await api.pi.call("pi.listModels", {})).default, "anthropic/claude-opus-5-5");
  respond("showQuickPick", (items) => items.find((i) => i.label === "Forget the decision"));
  const forgotten = await run("piLsp.trust");
  assert.equal(forgotten.decision, "client", "VS Code's trust decides once pi's store says nothing");
  assert.deepEqual(JSON.parse(fs.readFileSync(store(), "utf8")), {});
});
