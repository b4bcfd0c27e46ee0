// The request body pi 1.6 sends at each session's leaf, as its agent makes it: the context, the
// thinking level a resumed session gets, convertToLlm, then pi-ai's own provider for API
// (claude-sonnet-4-5 for anthropic-messages, gpt-5 for the OpenAI ones). The body is caught in
// onPayload, which throws, so nothing is sent; null where pi makes no body. With --text-only
// the model's input is ["text"]: pi-ai turns the images it is not sent into notes; --compat
// lays a models.json `compat` object over the model's, --fields other fields of the model
// (samplingParams).
// Usage: node pi16_wire.mjs PACKAGES API [--provider NAME] [--model ID] [--compat JSON]
//   [--fields JSON] [--text-only] FILE...
//   -> {file: body | null}
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [packages, api, ...options] = process.argv.slice(2);
// --provider NAME: another provider of pi's catalog (with --model, one of its models).
const named = options[0] === "--provider" ? options[1] : undefined;
const args = named === undefined ? options : options.slice(2);
// --model ID: another model of the API's provider (pi's catalog facts for it).
const chosen = args[0] === "--model" ? args[1] : undefined;
const more = chosen === undefined ? args : args.slice(2);
const laid = more[0] === "--compat" ? JSON.parse(more[1]) : undefined;
const after = laid === undefined ? more : more.slice(2);
const fields = after[0] === "--fields" ? JSON.parse(after[1]) : {};
const rest = after[0] === "--fields" ? after.slice(2) : after;
const textOnly = rest[0] === "--text-only";
const files = textOnly ? rest.slice(1) : rest;
const { SessionManager, convertToLlm } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const compat = await import(`${packages}/pi-ai/dist/compat.js`);
const { normalizeContext } = await import(`${packages}/pi-ai/dist/utils/transcript.js`);
const [standardProvider, standard] = api === "anthropic-messages" ? ["anthropic", "claude-sonnet-4-5"] : ["openai", "gpt-5"];
const provider = named ?? standardProvider;
const id = chosen ?? standard;
const known = compat.getModel(provider, id);
const model = { ...known, api, ...(textOnly ? { input: ["text"] } : {}),
  ...(laid ? { compat: { ...known.compat, ...laid } } : {}), ...fields };

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
  // (An entry without a level leaves it undefined: the default too; null is clamped.)
  const kept = set ? context.thinkingLevel : undefined;
  const level = compat.clampThinkingLevel(model, kept === undefined ? "medium" : kept);
  let body = null;
  await compat.streamSimple(model, normalizeContext({ messages: convertToLlm(context.messages) }), {
    apiKey: "sk-offline", reasoning: level === "off" ? undefined : level, sessionId: session.getSessionId(),
    maxRetries: 0,
    onPayload: (params) => {
      body = structuredClone(params);
      throw new Caught();
    },
  }).result();
  bodies[file] = body;
}
rmSync(scratch, { recursive: true, force: true });
process.stdout.write(JSON.stringify(bodies));
