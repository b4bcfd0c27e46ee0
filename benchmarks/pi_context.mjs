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
const url = nm
  ? pathToFileURL(join(nm, "@mariozechner/pi-coding-agent/dist/core/session-manager.js")).href
  : new URL("./core/session-manager.js", import.meta.resolve("@mariozechner/pi-coding-agent")).href;
const { SessionManager, buildSessionContext } = await import(url);

const sm = SessionManager.open(file);
const context = buildSessionContext(sm.getEntries(), sm.getLeafId());
// No process.exit(): let Node drain stdout naturally so large outputs are fully flushed.
process.stdout.write(JSON.stringify(context) + "\n");
