// VS Code's Workspace Trust turned off (`security.workspace.trust.enabled: false`): VS Code then
// reports every folder trusted, which is no decision. The server is sent none, so pi's own
// decisions and the user's defaultProjectTrust decide; nothing is in Restricted Mode.
"use strict";
require("../testlib/register-vscode-stub");
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");
const ext = require("../out/extension.js");
const { setUp } = require("../testlib/server");
const { activateOn } = require("../testlib/activate");

const { rec, setConfig, respond } = vscode.__test;
let rig, ws, api;
const status = async () => (await api.pi.call("pi.trustStatus", {})).folders[0];
const defaultTrust = (value) =>
  fs.writeFileSync(path.join(ws.agentDir, "settings.json"), JSON.stringify({ defaultProjectTrust: value }));

setUp(async () => {
  // The folder's own settings would pick another model.
  const settings = { defaultModel: "claude-opus-4-5", summaryModel: null };
  ({ ws, api } = rig = await activateOn({
    settings,
    configure: (made) => {
      fs.writeFileSync(path.join(made.agentDir, "settings.json"), JSON.stringify({ defaultProjectTrust: "never" }));
      setConfig("security.workspace.trust.enabled", false);
      return {};
    },
  }));
}, () => {
  setConfig("security.workspace.trust.enabled", undefined);
  return rig?.stop();
});

test("with Workspace Trust off, defaultProjectTrust \"never\" keeps the folder's .pi/ files out", async () => {
  assert.equal(vscode.workspace.isTrusted, true, "VS Code reports every folder trusted");
  const state = await status();
  assert.deepEqual([state.trusted, state.decision], [false, "default"]);
  assert.equal((await api.pi.call("pi.listModels", {})).default, "anthropic/claude-opus-5-5", "the folder's settings are not loaded");
  // Nothing is restricted: Workspace Trust off is not Restricted Mode.
  assert.equal(ext.restrictedReason("pi.prompt", { uri: "file:///x.jsonl", text: "hi" }), undefined);
});

test("Workspace Trust turned on without the restart VS Code asks for: its \"trusted\" is still no decision", async () => {
  // VS Code keeps the trust it decided when the window opened (every folder, trust being off).
  setConfig("security.workspace.trust.enabled", true);
  try {
    await api.pi.sendSettings();
    const state = await status();
    assert.deepEqual([state.trusted, state.decision], [false, "default"]);
  } finally {
    setConfig("security.workspace.trust.enabled", false);
    await api.pi.sendSettings();
  }
});

test("with Workspace Trust off, \"ask\" leaves the folder undecided, and pi: Trust This Folder… decides", async () => {
  defaultTrust("ask");
  assert.deepEqual([(await status()).trusted, (await status()).decision], [false, "undecided"]);
  respond("showQuickPick", (items) => items.find((i) => i.label === "Trust"));
  respond("showInformationMessage", () => undefined);
  const saved = await vscode.commands.executeCommand("piLsp.trust");
  assert.deepEqual([saved.trusted, saved.decision], [true, "saved"]);
  assert.ok(!rec.executed.some((e) => e.id === "workbench.trust.manage"), "no Restricted Mode warning");
  assert.equal((await api.pi.call("pi.listModels", {})).default, "anthropic/claude-opus-4-5");
});
