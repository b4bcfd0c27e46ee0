// pi 1.6's summarizer input for runtime messages: serializeConversation(convertToLlm(messages)).
// Usage: node pi16_serialize.mjs PACKAGES < [message, ...] -> the text, as JSON
import { readFileSync } from "node:fs";

const [packages] = process.argv.slice(2);
const { convertToLlm, serializeConversation } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const messages = JSON.parse(readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(serializeConversation(convertToLlm(messages))));
