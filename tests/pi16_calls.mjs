// pi 1.6's built-in tools called as its agent loop calls them (pi-agent-core's runToolCall, so
// a thrown error is the result pi stores), for tests/test_tools.py when pi 1.6 is there: each
// case's tool and arguments in, run in DIR, its result's text, details and isError out.
// A case with `loop` runs through the agent loop itself (runAgentLoop, one scripted reply
// holding the call): `stopReason` ends that reply ("length": cut at the output limit), `block`
// is what beforeToolCall refuses it with, `abort` aborts the run first; its answer adds
// `message`, the toolResult message as pi writes it to the session (timestamps and
// durationMs 0).
// Made tests/fixtures/pi16-calls.json; run again there when pi 1.6 is installed.
// Usage: node pi16_calls.mjs PACKAGES DIR CASES.json
import { readFileSync } from "node:fs";

const [packages, dir, casesFile] = process.argv.slice(2);
const tools = await import(`${packages}/pi-coding-agent/dist/core/tools/index.js`);
const { runToolCall, runAgentLoop } = await import(`${packages}/pi-agent-core/dist/index.js`);
const made = [tools.createReadTool(dir), tools.createBashTool(dir), tools.createEditTool(dir),
  tools.createWriteTool(dir)];

function reply(content, stopReason) {
  return { role: "assistant", content, api: "anthropic-messages", provider: "anthropic",
    model: "m", usage: {}, stopReason, timestamp: 0 };
}

// A stream function answering the first request with `first`, later ones with a plain stop.
function scripted(first) {
  let asked = 0;
  return async () => {
    const message = asked++ === 0 ? first : reply([{ type: "text", text: "ok" }], "stop");
    return { result: async () => message,
      async *[Symbol.asyncIterator]() { yield { type: "done", reason: message.stopReason, message }; } };
  };
}

async function throughLoop(toolCall, { stopReason = "toolUse", block, abort }) {
  const written = [];
  const controller = new AbortController();
  if (abort) controller.abort();
  const config = {
    model: { api: "anthropic-messages", provider: "anthropic", id: "m" },
    convertToLlm: (messages) => messages, toolExecution: "sequential",
    beforeToolCall: async () => (block ? { block: true, reason: block } : undefined),
  };
  await runAgentLoop([{ role: "user", content: "go", timestamp: 0 }],
    { systemPrompt: "", messages: [], tools: made }, config,
    async (event) => {
      if (event.type === "message_end" && event.message.role === "toolResult") written.push(event.message);
    }, controller.signal, scripted(reply([toolCall], stopReason)));
  const message = written[0];
  return { result: message, isError: message.isError,
    message: JSON.stringify({ ...message, timestamp: 0,
      ...("durationMs" in message ? { durationMs: 0 } : {}) }) };
}

const answers = {};
for (const [name, { tool, args, loop }] of Object.entries(JSON.parse(readFileSync(casesFile, "utf8")))) {
  const toolCall = { type: "toolCall", id: "t1", name: tool, arguments: args };
  const { result, isError, message } = loop ? await throughLoop(toolCall, loop) : await runToolCall(
    toolCall,
    { tools: made, assistantMessage: { role: "assistant", content: [] },
      context: { systemPrompt: "", messages: [], tools: made } });
  const text = result.content.map((block) => block.text).join("\n");
  answers[name] = { text, details: result.details ?? null, isError,
    ...(message === undefined ? {} : { message }) };
}
process.stdout.write(JSON.stringify(answers));
