// The line pi 1.6 appends to each session (appendCustomEntry("test") at its leaf), made on a
// copy. Usage: node pi16_append.mjs PACKAGES FILE... -> {file: line}
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "fs";
import { tmpdir } from "os";
import { join } from "path";
const [packages, ...files] = process.argv.slice(2);
const { SessionManager } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const lines = {};
for (const file of files) {
  const folder = mkdtempSync(join(tmpdir(), "pi16-append-"));
  try {
    const copy = join(folder, "s.jsonl");
    copyFileSync(file, copy);
    SessionManager.open(copy, folder).appendCustomEntry("test");
    lines[file] = readFileSync(copy, "utf8").split("\n").filter(Boolean).at(-1);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}
process.stdout.write(JSON.stringify(lines));
