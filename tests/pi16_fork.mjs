// pi 1.6's fork of each session at its leaf (createBranchedSession), written into a scratch
// folder. Usage: node pi16_fork.mjs PACKAGES FILE... -> {file: [the fork's entry lines]}
import { mkdtempSync, readFileSync, rmSync } from "fs";
import { tmpdir } from "os";
import { join } from "path";
const [packages, ...files] = process.argv.slice(2);
const { SessionManager } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const forks = {};
for (const file of files) {
  const folder = mkdtempSync(join(tmpdir(), "pi16-fork-"));
  try {
    const session = SessionManager.open(file, folder);
    const fork = session.createBranchedSession(session.getLeafId());
    forks[file] = readFileSync(fork, "utf8").split("\n").filter(Boolean).slice(1);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}
process.stdout.write(JSON.stringify(forks));
