// Node's fileURLToPath, which pi 1.6 reads a tool's file:// path with (utils/paths.js), on
// each URL: its path, or its error's message. For tests/test_tools.py when Node 22 is there;
// made tests/fixtures/node-file-urls.json.
// Usage: node node_file_urls.mjs URLS.json
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const answers = {};
for (const url of JSON.parse(readFileSync(process.argv[2], "utf8"))) {
  try {
    answers[url] = { path: fileURLToPath(url) };
  } catch (error) {
    answers[url] = { error: error.message };
  }
}
process.stdout.write(JSON.stringify(answers));
