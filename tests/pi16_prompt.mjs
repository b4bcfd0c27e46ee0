// pi 1.6's system prompt for pi-lsp's tools (pi's defaults) and the options given as JSON:
// {cwd, contextFiles: [{path, content}], customPrompt?, appendSystemPrompt?}, or {cwd, load:
// {agentDir, trusted, home?}} to have pi's own resource loader find the context files, SYSTEM.md
// and APPEND_SYSTEM.md for a project so trusted, and its skills too when `home` (HOME, for
// ~/.agents/skills) is given. Made
// tests/fixtures/pi16-prompt*.json, which tests/test_system_messages.py compares with pi-lsp's;
// run again there when pi 1.6 is installed.
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

// What pi's loader gives its session (agent-session.js, _rebuildSystemPrompt).
async function loaded(cwd, { agentDir, trusted, home }) {
  if (home) process.env.HOME = home;
  const { DefaultResourceLoader } = await core("resource-loader.js");
  const { SettingsManager } = await core("settings-manager.js");
  const settingsManager = SettingsManager.inMemory();
  settingsManager.setProjectTrusted(trusted);
  const loader = new DefaultResourceLoader({
    cwd, agentDir, settingsManager, noExtensions: true, noSkills: !home, noPromptTemplates: true,
    noThemes: true,
  });
  await loader.reload();
  return {
    customPrompt: loader.getSystemPrompt(),
    appendSystemPrompt: loader.getAppendSystemPrompt().join("\n\n"),
    contextFiles: loader.getAgentsFiles().agentsFiles,
    skills: loader.getSkills().skills,
  };
}

const { load, ...given } = JSON.parse(input);
const options = {
  ...given,
  ...(load ? await loaded(given.cwd, load) : {}),
  selectedTools: Object.keys(tools),
  toolSnippets: Object.fromEntries(Object.entries(tools).map(([name, t]) => [name, t.snippet])),
  toolGuidelines: Object.fromEntries(Object.entries(tools).map(([name, t]) => [name, t.guidelines])),
};
process.stdout.write(JSON.stringify({
  sections: buildSystemPromptSections(options),
  text: buildSystemPrompt(options),
}));
