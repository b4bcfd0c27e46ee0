// The `compat` pi 1.6 gives each model a models.json describes, once its levels (a provider's,
// a model's, a modelOverrides entry's) are merged as pi's ModelRuntime merges them.
// Usage: node pi16_compat.mjs PACKAGES MODELS_JSON PROVIDER/ID...  -> {"PROVIDER/ID": compat}
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [packages, modelsPath, ...names] = process.argv.slice(2);
const pi = await import(`${packages}/pi-coding-agent/dist/index.js`);
const scratch = mkdtempSync(join(tmpdir(), "pi16-compat-"));
const runtime = await pi.ModelRuntime.create({ authPath: join(scratch, "auth.json"), modelsPath });
if (runtime.getError()) throw new Error(runtime.getError());
const results = {};
for (const name of names) {
  const slash = name.indexOf("/");
  results[name] = runtime.getModel(name.slice(0, slash), name.slice(slash + 1))?.compat ?? null;
}
rmSync(scratch, { recursive: true, force: true });
process.stdout.write(JSON.stringify(results));
