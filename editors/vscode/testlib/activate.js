// The extension activated on a copy of the example workspace, against the real server and a
// local fake Anthropic endpoint: what each end-to-end test file starts from.
"use strict";
const vscode = require("vscode");
const ext = require("../out/extension.js");
const { serverCommand, makeWorkspace, useEnv } = require("./server");
const { makeContext, disposeAll } = require("./context");
const { FakeAnthropic } = require("./fake-anthropic");

async function activateWithFake({ toolApproval }) {
  const fake = new FakeAnthropic();
  await fake.start();
  const ws = makeWorkspace({ settings: { summaryModel: null, compaction: { enabled: false } } });
  const restoreEnv = useEnv(ws.env);
  vscode.workspace.workspaceFolders = [{ uri: vscode.Uri.file(ws.folder), name: "workspace", index: 0 }];
  const { command, args } = serverCommand();
  const { setConfig } = vscode.__test;
  setConfig("piLsp.command", [command, ...args]);
  setConfig("piLsp.anthropicBaseUrl", fake.url);
  setConfig("piLsp.toolApproval", toolApproval);
  const context = makeContext({ "piLsp.anthropicApiKey": "test-key" }); // from SecretStorage
  const api = await ext.activate(context);
  async function stop() {
    await ext.deactivate();
    disposeAll(context);
    await fake.stop();
    restoreEnv();
    ws.cleanup();
  }
  return { fake, ws, context, api, stop };
}

module.exports = { activateWithFake };
