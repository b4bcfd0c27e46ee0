// Benchmark driver: prints JSON.stringify(buildSessionContext(...)) for a session FILE using pi's own SessionManager.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const file = process.argv[2];
if (!file) {
  process.stderr.write("usage: node pi_context.mjs FILE\n");
  process.exit(2);
}
// dist/core/session-manager.js is not in the package "exports" map, so import it by absolute URL.
const nm = process.env.PI_NODE_MODULES;
// PI_PACKAGE names pi 1.6's package (@earendil-works/pi-coding-agent); 0.73.1's by default.
const pkg = process.env.PI_PACKAGE ?? "@mariozechner/pi-coding-agent";
const url = nm
  ? pathToFileURL(join(nm, pkg, "dist/core/session-manager.js")).href
  : new URL("./core/session-manager.js", import.meta.resolve(pkg)).href;
const { SessionManager, buildSessionContext } = await import(url);

const sm = SessionManager.open(file);
const context = buildSessionContext(sm.getEntries(), sm.getLeafId());
// No process.exit(): let Node drain stdout naturally so large outputs are fully flushed.
process.stdout.write(JSON.stringify(context) + "\n");
