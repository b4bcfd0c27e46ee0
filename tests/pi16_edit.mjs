// pi 1.6 on a session file, for tests/test_context_edits.py when pi 1.6 is there:
// `context` prints the messages it builds at the leaf; `edit <targetId> <replacement JSON>`
// appends the context edit pi itself writes, so its line can be compared with pi-lsp's.
const [packages, file, mode, targetId, replacement] = process.argv.slice(2);
const { SessionManager } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const session = SessionManager.open(file);
if (mode === "edit") session.appendContextEdit(targetId, JSON.parse(replacement));
else process.stdout.write(JSON.stringify(session.buildSessionContext().messages));
