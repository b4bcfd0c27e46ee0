// pi 1.6's reading of each session: its leaf, its name, its labels and the context at the leaf
// (model, thinking level, both layers). Usage: node pi16_session.mjs PACKAGES FILE... ->
// {file: {leafId, name, labels, model, thinkingLevel, agent, llm}}
const [packages, ...files] = process.argv.slice(2);
const { SessionManager, convertToLlm } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const sessions = {};
for (const file of files) {
  const session = SessionManager.open(file);
  const { messages, model, thinkingLevel } = session.buildSessionContext();
  const labels = Object.fromEntries(session.getEntries()
    .filter((entry) => session.getLabel(entry.id))
    .map((entry) => [entry.id, session.getLabel(entry.id)]));
  sessions[file] = { leafId: session.getLeafId() ?? null, name: session.getSessionName() ?? null,
                     labels, model, thinkingLevel, agent: messages, llm: convertToLlm(messages) };
}
process.stdout.write(JSON.stringify(sessions));
