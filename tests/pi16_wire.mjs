// The Anthropic request body pi 1.6 sends at each session's leaf (claude-sonnet-4-5), as its agent
// makes it: the context, the thinking level a resumed session gets, convertToLlm, then pi-ai's own
// provider. The body is caught in onPayload, which throws, so nothing is sent.
// Usage: node pi16_wire.mjs PACKAGES FILE... -> {file: body}
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [packages, ...files] = process.argv.slice(2);
const { SessionManager, convertToLlm } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const ai = await import(`${packages}/pi-ai/dist/index.js`);
const { clampThinkingLevel } = await import(`${packages}/pi-ai/dist/models.js`);
const { streamSimple } = await import(`${packages}/pi-ai/dist/api/anthropic-messages.js`);
const catalog = JSON.parse(readFileSync(`${packages}/pi-ai/dist/providers/data/anthropic.json`, "utf8"));
const { type: _kind, ...model } = catalog["anthropic-messages"]["chat:claude-sonnet-4-5"];

class Caught extends Error {}
const scratch = mkdtempSync(join(tmpdir(), "pi16-wire-"));
const bodies = {};
for (const file of files) {
  const copy = join(scratch, "s.jsonl");
  copyFileSync(file, copy);
  const session = SessionManager.open(copy, scratch, "/tmp");
  const context = session.buildSessionContext();
  // As createAgentSession resumes it: no level on the branch takes the default, "medium".
  const set = session.getBranch().some((entry) => entry.type === "thinking_level_change");
  const level = clampThinkingLevel(model, set ? context.thinkingLevel : "medium");
  let body;
  const reply = await streamSimple(model, ai.normalizeContext({ messages: convertToLlm(context.messages) }), {
    apiKey: "offline", reasoning: level === "off" ? undefined : level, sessionId: session.getSessionId(),
    maxRetries: 0,
    onPayload: (params) => {
      body = JSON.parse(JSON.stringify(params));
      throw new Caught();
    },
  }).result();
  if (body === undefined) throw new Error(`${file}: no request body (${reply.errorMessage})`);
  bodies[file] = body;
}
rmSync(scratch, { recursive: true, force: true });
process.stdout.write(JSON.stringify(bodies));
