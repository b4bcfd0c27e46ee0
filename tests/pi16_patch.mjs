// pi 1.6's edit tool on each case, for tests/test_tools.py when pi 1.6 is there: each case's
// file text and edits in, its result's details (diff, patch, firstChangedLine) or error out.
// Made tests/fixtures/pi16-edit-patches.json; run again there when pi 1.6 is installed.
// Usage: node pi16_patch.mjs PACKAGES CASES.json
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [packages, casesFile] = process.argv.slice(2);
const { createEditToolDefinition } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const answers = [];
for (const { text, edits } of JSON.parse(readFileSync(casesFile, "utf8"))) {
  const dir = mkdtempSync(join(tmpdir(), "pi16-patch-"));
  try {
    writeFileSync(join(dir, "f.txt"), text);
    const { details } = await createEditToolDefinition(dir).execute("e", { path: "f.txt", edits });
    answers.push(details);
  } catch (error) {
    answers.push({ error: String(error.message) });
  } finally {
    rmSync(dir, { recursive: true });
  }
}
process.stdout.write(JSON.stringify(answers));
