// pi 1.6's context at each session's leaf: buildSessionContext's messages (the agent layer) and
// convertToLlm's (the model layer), with the thinking level and model it reads there. Usage:
// node pi16_context.mjs PACKAGES FILE... -> {file: {agent, llm, thinkingLevel, model}}
const [packages, ...files] = process.argv.slice(2);
const { SessionManager, convertToLlm } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const contexts = {};
for (const file of files) {
  const { messages, thinkingLevel, model } = SessionManager.open(file).buildSessionContext();
  contexts[file] = { agent: messages, llm: convertToLlm(messages), thinkingLevel, model };
}
process.stdout.write(JSON.stringify(contexts));
