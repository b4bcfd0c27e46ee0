// Where the real server is and a throwaway workspace for it.
//   PI_PYTHON  the interpreter with pi_lsp installed (default: the repository's .venv)
//   PI_SERVER  a whole command line instead, e.g. "pi-lsp serve" (wins over PI_PYTHON)
// The server always gets PI_CODING_AGENT_DIR and XDG_STATE_HOME set to temporary folders, so
// the user's ~/.pi/agent (settings, keys, sessions, trust) and state never leak into a test.
"use strict";
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { before, after } = require("node:test");

const REPO = path.resolve(__dirname, "../../..");
const EXAMPLE = path.join(REPO, "examples", "workspace");
const PYTHON = process.env.PI_PYTHON || path.join(REPO, ".venv", "bin", "python");

function serverCommand() {
  if (process.env.PI_SERVER) {
    const [command, ...args] = process.env.PI_SERVER.trim().split(/\s+/);
    return { command, args };
  }
  return { command: PYTHON, args: ["-P", "-m", "pi_lsp.cli", "serve"] };
}

/** A tmp copy of examples/workspace, a tmp agent dir, and env for the server. */
function makeWorkspace({ settings } = {}) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "pi-vscode-"));
  const folder = path.join(root, "workspace");
  fs.cpSync(EXAMPLE, folder, { recursive: true });
  const agentDir = path.join(root, "agent");
  fs.mkdirSync(agentDir);
  if (settings) fs.writeFileSync(path.join(folder, ".pi", "settings.json"), JSON.stringify(settings));
  const sessionsDir = path.join(folder, ".pi", "sessions");
  const sessionFile = path.join(sessionsDir, fs.readdirSync(sessionsDir).find((f) => f.endsWith(".jsonl")));
  // Snapshot stores go to the state folder: a throwaway one too.
  const env = { ...process.env, PI_CODING_AGENT_DIR: agentDir, XDG_STATE_HOME: path.join(root, "state") };
  delete env.ANTHROPIC_API_KEY; // nothing in a test may reach a real model
  delete env.ANTHROPIC_BASE_URL;
  return {
    root, folder, agentDir, sessionsDir, sessionFile, env,
    cleanup: () => fs.rmSync(root, { recursive: true, force: true }),
  };
}

/** Sets the process env the extension's client passes to the server it spawns. */
function useEnv(env) {
  const saved = { ...process.env };
  for (const k of Object.keys(process.env)) if (!(k in env)) delete process.env[k];
  Object.assign(process.env, env);
  return () => {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  };
}

// The one ceiling of every wait: only a real hang reaches it (other test suites may be loading
// this machine's 2 cores, making anything slow by seconds). node --test's own limit is above it.
const CEILING_MS = 60000;
// A whole server's start: Python's start and imports took over 60 s at a load average of 15.
const PROCESS_CEILING_MS = 240000;

/** Polls until `check()` is truthy (returns it); fails at `ceilingMs`, naming `what`. */
async function eventually(check, what = "condition", ceilingMs = CEILING_MS) {
  const end = Date.now() + ceilingMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * A file's `before(start)` and `after(stop)`, `stop` waiting for `start` to end: when a filter
 * leaves the file no test, Node 22 runs `after` at once, so what `start` went on to launch (a
 * server) was never stopped and the run never ended.
 */
function setUp(start, stop) {
  let started;
  before(() => (started = start()));
  after(async () => {
    await started?.catch(() => {}); // its failure is before's to report
    await stop();
  });
}

module.exports = { REPO, EXAMPLE, PYTHON, PROCESS_CEILING_MS, serverCommand, makeWorkspace, useEnv, eventually, setUp };
