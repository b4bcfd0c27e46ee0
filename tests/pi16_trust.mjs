// pi 1.6's ProjectTrustStore saving a decision (trusted) for the folder `cwd` in the agent
// folder `agentDir`, whose trust.json the caller has written; prints the file pi leaves. Made
// tests/fixtures/pi16-trust-*.json, which tests/test_untrusted_files.py compares with pi-lsp's.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [packages, agentDir, cwd] = process.argv.slice(2);
const core = (file) => import(pathToFileURL(join(packages, "pi-coding-agent/dist/core", file)).href);
const { ProjectTrustStore } = await core("trust-manager.js");
const store = new ProjectTrustStore(agentDir);
store.set(cwd, true);
process.stdout.write(readFileSync(join(agentDir, "trust.json"), "utf-8"));
