// pi 1.6's system prompt for pi-lsp's tools (pi's defaults) and the cwd and context files given
// as JSON: {cwd, contextFiles: [{path, content}]}. Made tests/fixtures/pi16-prompt.json, which
// tests/test_system_messages.py compares with pi-lsp's; run again there when pi 1.6 is installed.
// system-prompt.js and the tools are not in the package's "exports" map: imported by file URL.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [packages, input] = process.argv.slice(2);
const core = (file) => import(pathToFileURL(join(packages, "pi-coding-agent/dist/core", file)).href);
const { buildSystemPrompt, buildSystemPromptSections } = await core("system-prompt.js");
const tools = {};
for (const name of ["read", "bash", "edit", "write"]) {
  tools[name] = (await core(`tools/${name}.js`))[`${name}ToolSystemPromptContribution`];
}
const options = {
  ...JSON.parse(input),
  selectedTools: Object.keys(tools),
  toolSnippets: Object.fromEntries(Object.entries(tools).map(([name, t]) => [name, t.snippet])),
  toolGuidelines: Object.fromEntries(Object.entries(tools).map(([name, t]) => [name, t.guidelines])),
};
process.stdout.write(JSON.stringify({
  sections: buildSystemPromptSections(options),
  text: buildSystemPrompt(options),
}));
