// pi 1.6's own thinking-level and model changes on a session: its CLI in RPC mode, resumed on
// the file, sent each step (set_thinking_level / set_model) and waited for; offline, with
// placeholder keys (a model switch only checks that a key is there).
// Usage: node pi16_levels.mjs CLI_JS SESSION_FILE CWD AGENT_DIR STEPS_JSON
import { spawn } from "node:child_process";
import fs from "node:fs";

const [cli, file, cwd, agentDir, stepsFile] = process.argv.slice(2);
const steps = JSON.parse(fs.readFileSync(stepsFile, "utf8"));
const pi = spawn(process.execPath, [cli, "--mode", "rpc", "--session", file], {
  cwd,
  env: { ...process.env, PI_CODING_AGENT_DIR: agentDir, PI_OFFLINE: "1",
         ANTHROPIC_API_KEY: "placeholder", OPENAI_API_KEY: "placeholder" },
  stdio: ["pipe", "pipe", "inherit"],
});
const answers = new Map();
let pending = "";
pi.stdout.on("data", (chunk) => {
  pending += chunk;
  for (let end; (end = pending.indexOf("\n")) >= 0; pending = pending.slice(end + 1)) {
    let message;
    try { message = JSON.parse(pending.slice(0, end)); } catch { continue; }
    if (message.type === "response") answers.get(message.id)?.(message);
  }
});
let sent = 0;
function send(command) {
  const id = `step-${++sent}`;
  return new Promise((resolve) => {
    answers.set(id, resolve);
    pi.stdin.write(JSON.stringify({ id, ...command }) + "\n");
  });
}
let failed = false;
for (const [kind, first, second] of steps) {
  const answer = kind === "level"
    ? await send({ type: "set_thinking_level", level: first })
    : await send({ type: "set_model", provider: first, modelId: second });
  if (!answer.success) {
    console.error(`${kind} ${first} ${second ?? ""}: ${answer.error}`);
    failed = true;
  }
}
pi.stdin.end();
pi.kill();
process.exit(failed ? 1 : 0);
