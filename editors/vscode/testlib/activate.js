// The extension activated on a copy of the example workspace against the real server: what each
// end-to-end test file starts from, with or without a local fake Anthropic endpoint.
"use strict";
const vscode = require("vscode");
const ext = require("../out/extension.js");
const { serverCommand, makeWorkspace, useEnv } = require("./server");
const { makeContext, disposeAll } = require("./context");
const { FakeAnthropic } = require("./fake-anthropic");

/** `configure` runs after the workspace is made and before activate() (config, trust, secrets). */
async function activateOn({ settings, configure = () => ({}) }) {
  const ws = makeWorkspace({ settings });
  const restoreEnv = useEnv(ws.env);
  vscode.workspace.workspaceFolders = [{ uri: vscode.Uri.file(ws.folder), name: "workspace", index: 0 }];
  const { command, args } = serverCommand();
  vscode.__test.setConfig("piLsp.command", [command, ...args]);
  const context = makeContext(configure(ws));
  const api = await ext.activate(context);
  async function stop() {
    await ext.deactivate();
    disposeAll(context);
    restoreEnv();
    ws.cleanup();
  }
  return { ws, context, api, stop };
}

/** `settings`: the workspace's .pi/settings.json (by default: no summary model, no compaction). */
async function activateWithFake({ toolApproval, settings = { summaryModel: null, compaction: { enabled: false } } }) {
  const fake = new FakeAnthropic();
  await fake.start();
  const rig = await activateOn({
    settings,
    configure: () => {
      vscode.__test.setConfig("piLsp.anthropicBaseUrl", fake.url);
      vscode.__test.setConfig("piLsp.toolApproval", toolApproval);
      return { "piLsp.anthropicApiKey": "test-key" }; // from SecretStorage
    },
  });
  async function stop() {
    await rig.stop();
    await fake.stop();
  }
  return { ...rig, fake, stop };
}

module.exports = { activateOn, activateWithFake };
