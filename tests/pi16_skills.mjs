// The skills pi 1.6's own resource loader finds, as JSON [[name, path], ...], for the options
// given as JSON: {cwd, agentDir, home, trusted}; settings.json files are read as pi reads them
// (the project's only when trusted). Made tests/fixtures/pi16-skills-*.json, which
// tests/test_system_messages.py compares with pi-lsp's; run again there when pi 1.6 is installed.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [packages, input] = process.argv.slice(2);
const core = (file) => import(pathToFileURL(join(packages, "pi-coding-agent/dist/core", file)).href);
const { cwd, agentDir, home, trusted } = JSON.parse(input);
process.env.HOME = home;
const { DefaultResourceLoader } = await core("resource-loader.js");
const { SettingsManager } = await core("settings-manager.js");
const settingsManager = SettingsManager.create(cwd, agentDir, { projectTrusted: trusted });
const loader = new DefaultResourceLoader({
  cwd, agentDir, settingsManager, noExtensions: true, noPromptTemplates: true, noThemes: true,
});
await loader.reload();
process.stdout.write(JSON.stringify(loader.getSkills().skills.map((s) => [s.name, s.filePath])));
