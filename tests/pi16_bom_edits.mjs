// pi 1.6's edit tool on files with a UTF-8 BOM, for tests/test_editor.py when pi 1.6 is there:
// each case's file text and its edits in (made one call after another), the file's bytes (hex)
// after them out. Made tests/fixtures/pi16-bom-edits.json; run again there when pi 1.6 is
// installed. Usage: node pi16_bom_edits.mjs PACKAGES CASES.json
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [packages, casesFile] = process.argv.slice(2);
const { createEditToolDefinition } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const written = [];
for (const { text, edits } of JSON.parse(readFileSync(casesFile, "utf8"))) {
  const dir = mkdtempSync(join(tmpdir(), "pi16-bom-"));
  try {
    writeFileSync(join(dir, "f.cs"), text);
    for (const [oldText, newText] of edits) {
      await createEditToolDefinition(dir).execute("e", { path: "f.cs", edits: [{ oldText, newText }] });
    }
    written.push(readFileSync(join(dir, "f.cs")).toString("hex"));
  } finally {
    rmSync(dir, { recursive: true });
  }
}
process.stdout.write(JSON.stringify(written));
