// pi 1.6's summaries of each session: at each leaf the context's token estimates and text, at
// every entry the compaction plan (keepRecentTokens 1, 50, 400, 4000), at each leaf the text its
// compactions (1, 400) send the summary model, and leaving each leaf for each branch point the
// branch collection, its fit (2000 tokens) and the text sent. A fake model answers "S".
// Usage: node pi16_summaries.mjs PACKAGES FILE... -> {file: {contexts, plans, sent, branchPairs}}
const [packages, ...files] = process.argv.slice(2);
const pi = await import(`${packages}/pi-coding-agent/dist/index.js`);
const { prepareCompaction, computeFileLists } =
  await import(`${packages}/pi-coding-agent/dist/core/compaction/index.js`);
const KEEPS = [1, 50, 400, 4000];
const SENT = [1, 400];  // the keeps whose compaction at a leaf is carried out
const model = { id: "m", provider: "p", api: "anthropic-messages", reasoning: false,
                contextWindow: 16384 + 2000, maxTokens: 1000 };
const reply = { role: "assistant", content: [{ type: "text", text: "S" }], api: "anthropic-messages",
  provider: "p", model: "m", stopReason: "stop", timestamp: 0,
  usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2,
           cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } } };

// The conversation in each prompt the summary model is sent (pi-lsp words its prompts itself).
function recorder(sent) {
  return async (_model, context) => {
    const text = context.messages.at(-1).content[0].text;
    sent.push((text.match(/^<conversation>\n([\s\S]*)\n<\/conversation>\n\n/) ??
               text.match(/^# Conversation\n([\s\S]*)\n\n# Instructions\n/))[1]);
    return { result: async () => reply };
  };
}

async function answers(file) {
  const session = pi.SessionManager.open(file);
  const entries = session.getEntries();
  const parents = entries.map((e) => e.parentId);
  const leaves = entries.filter((e) => !parents.includes(e.id)).map((e) => e.id);
  const forks = entries.filter((e) => parents.filter((p) => p === e.id).length > 1).map((e) => e.id);
  const result = { contexts: {}, plans: {}, sent: {}, branchPairs: {} };
  for (const leaf of leaves) {
    const { messages } = pi.buildSessionContext(entries, leaf);
    result.contexts[leaf] = { tokens: messages.map(pi.estimateTokens),
                              serialized: pi.serializeConversation(pi.convertToLlm(messages)) };
  }
  for (const entry of entries) {
    for (const keep of KEEPS) {
      const plan = prepareCompaction(session.getBranch(entry.id),
                                     { enabled: true, reserveTokens: 16384, keepRecentTokens: keep });
      const lists = plan && computeFileLists(plan.fileOps);
      result.plans[`${entry.id}:${keep}`] = plan ? {
        firstKeptEntryId: plan.firstKeptEntryId, isSplitTurn: plan.isSplitTurn,
        tokensBefore: plan.tokensBefore, previousSummary: plan.previousSummary ?? null,
        messagesToSummarize: plan.messagesToSummarize.length,
        turnPrefixMessages: plan.turnPrefixMessages.length, ...lists } : null;
      if (plan && SENT.includes(keep) && leaves.includes(entry.id)) {
        const sent = [];
        const done = await pi.compact(plan, model, "k", undefined, undefined, undefined, "off",
                                      recorder(sent));
        result.sent[`${entry.id}:${keep}`] = { sent, summary: done.summary };
      }
    }
  }
  for (const old of leaves) {
    for (const target of [entries[0].id, ...forks]) {
      const { entries: left, commonAncestorId } = pi.collectEntriesForBranchSummary(session, old, target);
      const fitted = pi.prepareBranchEntries(left, 2000);
      const sent = [];
      const done = await pi.generateBranchSummary(left, { model, apiKey: "k", streamFn: recorder(sent) });
      result.branchPairs[`${old}>${target}`] = {
        entries: left.map((e) => e.id), commonAncestorId, messages: fitted.messages.length,
        totalTokens: fitted.totalTokens, ...computeFileLists(fitted.fileOps), sent, summary: done.summary };
    }
  }
  return result;
}

const out = {};
for (const file of files) out[file] = await answers(file);
process.stdout.write(JSON.stringify(out));
