// pi 1.6's declarations of its four built-in tools (pi-ai's toToolDeclaration, as pi records
// them in a session and compares them: by their JSON text), one JSON line each. Made
// tests/fixtures/pi16-tools.jsonl, which tests/test_system_messages.py compares byte for byte
// with pi-lsp's; run again there when pi 1.6 is installed.
// The tools are not in the package's "exports" map: imported by file URL.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [packages] = process.argv.slice(2);
const load = (file) => import(pathToFileURL(join(packages, file)).href);
const { toToolDeclaration } = await load("pi-ai/dist/utils/transcript.js");
for (const name of ["read", "bash", "edit", "write"]) {
  const make = (await load(`pi-coding-agent/dist/core/tools/${name}.js`));
  const create = make[`create${name[0].toUpperCase()}${name.slice(1)}ToolDefinition`];
  process.stdout.write(JSON.stringify(toToolDeclaration(create("/"))) + "\n");
}
