// pi 1.6's reply (pi-ai's streamSimple, the assistant message it would write) to each stream the
// fake server at its URL serves in turn, one per API named; {thrown} where pi-ai itself throws.
// The model is a local one (provider "ollama", pi-lsp's tests' `local`) for "chat" and
// "responses", claude-sonnet-4-5 for "anthropic"; the context is one user message, one tool.
// Usage: node pi16_turns.mjs PACKAGES API URL [API URL]... -> [message | {thrown}]
const [packages, ...pairs] = process.argv.slice(2);
const compat = await import(`${packages}/pi-ai/dist/compat.js`);
const context = { systemPrompt: "sys", messages: [{ role: "user", content: "q", timestamp: 1 }],
  tools: [{ name: "read", description: "Read a file",
    parameters: { type: "object", properties: { path: { type: "string" } } } }] };
const replies = [];
for (let at = 0; at < pairs.length; at += 2) {
  const [api, url] = pairs.slice(at, at + 2);
  const model = api === "anthropic"
    ? { ...compat.getModel("anthropic", "claude-sonnet-4-5"), baseUrl: url }
    : { id: "qwen2.5-coder:7b", name: "qwen", provider: "ollama", baseUrl: `${url}/v1`,
      api: api === "chat" ? "openai-completions" : "openai-responses", reasoning: false,
      input: ["text"], cost: { input: 1, output: 4, cacheRead: 0.5, cacheWrite: 0 },
      contextWindow: 32000, maxTokens: 8192 };
  try {
    replies.push(await compat.streamSimple(model, context, { apiKey: "k", maxRetries: 0 }).result());
  } catch (error) {
    replies.push({ thrown: String(error) });
  }
}
process.stdout.write(JSON.stringify(replies));
