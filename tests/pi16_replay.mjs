// What pi 1.6 itself replays from a session file at its leaf: the system prompt it would send
// and the tools it would declare. Run by tests/test_system_messages.py when pi 1.6 is there.
const [packages, file] = process.argv.slice(2);
const { SessionManager } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const ai = await import(`${packages}/pi-ai/dist/index.js`);
const { messages } = SessionManager.open(file).buildSessionContext();
const head = ai.getCurrentSystemMessage(messages);
const system = head ? ai.getSystemMessageText(head) : "";
process.stdout.write(JSON.stringify({ system, tools: ai.getCurrentTools(messages) }));
