// What pi 1.6's `ignore` package (the one its skills loader uses) ignores, for the JSON given:
// {paths, cases: [patterns, ...]}, as [[ignored path, ...], ...]. Made
// tests/fixtures/pi16-ignore.json, which tests/test_system_messages.py compares with pi-lsp's
// matcher; run again there when pi 1.6 is installed.
import { createRequire } from "node:module";
import { join } from "node:path";

const [packages, input] = process.argv.slice(2);
const ignore = createRequire(join(packages, "pi-coding-agent/package.json"))("ignore");
const { paths, cases } = JSON.parse(input);
process.stdout.write(JSON.stringify(cases.map((patterns) => {
  const rules = ignore().add(patterns);
  return paths.filter((path) => rules.ignores(path));
})));
