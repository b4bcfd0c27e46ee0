// pi 1.6's built-in tools called as its agent loop calls them (pi-agent-core's runToolCall, so
// a thrown error is the result pi stores), for tests/test_tools.py when pi 1.6 is there: each
// case's tool and arguments in, run in DIR, its result's text, details and isError out.
// Made tests/fixtures/pi16-calls.json; run again there when pi 1.6 is installed.
// Usage: node pi16_calls.mjs PACKAGES DIR CASES.json
import { readFileSync } from "node:fs";

const [packages, dir, casesFile] = process.argv.slice(2);
const tools = await import(`${packages}/pi-coding-agent/dist/core/tools/index.js`);
const { runToolCall } = await import(`${packages}/pi-agent-core/dist/index.js`);
const made = [tools.createReadTool(dir), tools.createBashTool(dir), tools.createEditTool(dir),
  tools.createWriteTool(dir)];
const answers = {};
for (const [name, { tool, args }] of Object.entries(JSON.parse(readFileSync(casesFile, "utf8")))) {
  const { result, isError } = await runToolCall(
    { type: "toolCall", id: "t1", name: tool, arguments: args },
    { tools: made, assistantMessage: { role: "assistant", content: [] },
      context: { systemPrompt: "", messages: [], tools: made } });
  const text = result.content.map((block) => block.text).join("\n");
  answers[name] = { text, details: result.details ?? null, isError };
}
process.stdout.write(JSON.stringify(answers));
