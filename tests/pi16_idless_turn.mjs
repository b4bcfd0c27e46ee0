// What pi 1.6 sends and writes for one prompt ("new prompt") at each session's leaf: its own
// createAgentSession on a copy of the file, claude-sonnet-4-5 as the settings' default, anthropic
// at a local server that answers "ok" and records each request's model, thinking and messages.
// The lines written: type, role, thinkingLevel, and parentId ("<previous>": the line before).
// Made tests/fixtures/pi16-idless-turn.json (test_run_cli.py).
// Usage: node pi16_idless_turn.mjs PACKAGES FILE... -> {file: {requests, written}}
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [packages, ...files] = process.argv.slice(2);
const pi = await import(`${packages}/pi-coding-agent/dist/index.js`);

const events = [
  { type: "message_start", message: { id: "m", type: "message", role: "assistant", model: "claude-sonnet-4-5",
    content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 1 } } },
  { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
  { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "ok" } },
  { type: "content_block_stop", index: 0 },
  { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 5 } },
  { type: "message_stop" },
];
const reply = events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");
let requests = [];
const server = createServer((request, response) => {
  let data = "";
  request.on("data", (chunk) => (data += chunk));
  request.on("end", () => {
    const { model, thinking, messages } = JSON.parse(data);
    requests.push({ model, thinking, messages });
    response.writeHead(200, { "content-type": "text/event-stream" });
    response.end(reply);
  });
});
await new Promise((listening) => server.listen(0, "127.0.0.1", listening));

function shown(lines) {
  return lines.map((line, index) => {
    const entry = JSON.parse(line);
    const parent = !("parentId" in entry) ? "<missing>"
      : index > 0 && entry.parentId === JSON.parse(lines[index - 1]).id ? "<previous>" : entry.parentId;
    return { type: entry.type, role: entry.message?.role ?? null, thinkingLevel: entry.thinkingLevel ?? null, parent };
  });
}

const scratch = mkdtempSync(join(tmpdir(), "pi16-idless-"));
const agentDir = join(scratch, "agent");
mkdirSync(agentDir);
writeFileSync(join(agentDir, "models.json"), JSON.stringify({ providers: { anthropic: {
  baseUrl: `http://127.0.0.1:${server.address().port}`, apiKey: "sk-offline" } } }));
const results = {};
for (const file of files) {
  const copy = join(scratch, "s.jsonl");
  copyFileSync(file, copy);
  const before = readFileSync(copy, "utf8").split("\n").filter(Boolean).length;
  const settingsManager = pi.SettingsManager.inMemory({ retry: { enabled: false },
    defaultProvider: "anthropic", defaultModel: "claude-sonnet-4-5" });
  const resourceLoader = new pi.DefaultResourceLoader({ cwd: scratch, agentDir, settingsManager,
    noExtensions: true, noSkills: true, noPromptTemplates: true, noThemes: true, noContextFiles: true });
  await resourceLoader.reload();
  const modelRuntime = await pi.ModelRuntime.create({ authPath: join(agentDir, "auth.json"),
    modelsPath: join(agentDir, "models.json") });
  const { session } = await pi.createAgentSession({ cwd: scratch, agentDir, settingsManager,
    resourceLoader, modelRuntime, sessionManager: pi.SessionManager.open(copy, scratch, scratch) });
  requests = [];
  await session.prompt("new prompt");
  session.dispose();
  results[file] = { requests, written: shown(readFileSync(copy, "utf8").split("\n").filter(Boolean).slice(before)) };
}
server.close();
rmSync(scratch, { recursive: true, force: true });
process.stdout.write(JSON.stringify(results));
