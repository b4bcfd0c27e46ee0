// pi 1.6's token estimate (estimateTokens, as its compaction and context size count) of each
// message of each session's context at its leaf. Usage:
// node pi16_estimates.mjs PACKAGES FILE... -> {file: [tokens, ...]}
const [packages, ...files] = process.argv.slice(2);
const { SessionManager, estimateTokens } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const estimates = {};
for (const file of files) {
  estimates[file] = SessionManager.open(file).buildSessionContext().messages.map(estimateTokens);
}
process.stdout.write(JSON.stringify(estimates));
