// The extension in a real VS Code: code-server with the packaged pi-lsp.vsix, the real pi-lsp
// server and the fake Anthropic endpoint, driven through headless Chromium by playwright-core.
// Each step waits for concrete text in the page and fails naming what it waited for; the
// screenshots land in e2e/out/ (not committed). PI_E2E_README=1 also copies the ones the README
// shows into e2e/screenshots/, on purpose only. Run by `make test-vscode-e2e` (after install.sh).
"use strict";
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
const { spawn, execFileSync } = require("node:child_process");
const { chromium } = require("playwright-core");
const { FakeAnthropic, textReply, toolReply } = require("../testlib/fake-anthropic");
const { REPO, EXAMPLE, PYTHON } = require("../testlib/server");

const E2E = __dirname;
const VSIX = path.join(E2E, "..", "pi-lsp.vsix");
const CODE_SERVER = path.join(E2E, "node_modules", ".bin", "code-server");
const CHROMIUM = "/usr/bin/chromium"; // Debian's, from install.sh
const SHOTS = path.join(E2E, "out");
/** The screenshots the README shows, committed: a run updates them only with PI_E2E_README=1. */
const README_SHOTS = ["diff-review", "chat-attachment", "rewind", "context-edit"];
const README_DIR = path.join(E2E, "screenshots");
const OVERALL_MS = 420_000;
const STEP_MS = 30_000;

const SESSION_NAME = "Fix slow order listing";
const OLD_NOTE = "# Orders\n\nGET /orders is slow: N+1 queries.\n";
const NOTE = "# Orders\n\nGET /orders now runs one query per page.\n";
const ORDERS = "def list_orders(db, page):\n    return db.query(\n        \"SELECT * FROM orders JOIN customers USING (customer_id) LIMIT 50 OFFSET ?\",\n        (page * 50,))\n";

const state = { procs: [], browser: undefined, root: undefined, fake: undefined, page: undefined };

function log(message) {
  process.stdout.write(`[e2e] ${message}\n`);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function waitFor(check, what, ms = STEP_MS) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > end) throw new Error(`timed out after ${ms / 1000}s waiting for ${what}${last ? ` (last error: ${last.message})` : ""}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A temp workspace (a copy of examples/workspace), VS Code user settings and a clean HOME. The
 * server's Python is a script that waits on a FIFO (the gate) before it runs: the first step
 * sees the view while the server is starting, then opens the gate.
 */
function prepare(fakeUrl) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "pi-vscode-e2e-"));
  const folder = path.join(root, "workspace");
  fs.cpSync(EXAMPLE, folder, { recursive: true });
  // No summary model and no auto compaction: every model call is a scripted one.
  fs.writeFileSync(path.join(folder, "NOTES.md"), OLD_NOTE); // the write below overwrites it
  fs.mkdirSync(path.join(folder, "app"));
  fs.writeFileSync(path.join(folder, "app", "orders.py"), ORDERS); // code sent with a prompt
  const gate = path.join(root, "server-gate");
  execFileSync("mkfifo", [gate]);
  const gatedPython = path.join(root, "gated-python");
  fs.writeFileSync(gatedPython, `#!/bin/sh\nread _ < '${gate}'\nexec '${PYTHON}' "$@"\n`, { mode: 0o755 });
  fs.writeFileSync(path.join(folder, ".pi", "settings.json"), JSON.stringify({ summaryModel: null, compaction: { enabled: false } }));
  const userData = path.join(root, "user-data");
  fs.mkdirSync(path.join(userData, "User"), { recursive: true });
  fs.writeFileSync(path.join(userData, "User", "settings.json"), JSON.stringify({
    "piLsp.pythonPath": gatedPython,
    "piLsp.anthropicBaseUrl": fakeUrl,
    "piLsp.toolApproval": "ask",
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "workbench.welcomePage.walkthroughs.openOnInstall": false,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "chat.commandCenter.enabled": false,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "update.mode": "none",
    "security.workspace.trust.enabled": false,
    "window.commandCenter": false,
    "diffEditor.useInlineViewWhenSpaceIsLimited": false,
    "workbench.tree.enableStickyScroll": false, // a sticky row would cover the ones clicked
    "files.autoSave": "off", // as in desktop VS Code (a web build saves after a delay): edits stay unsaved
  }, null, 2));
  for (const dir of ["home", "agent", "extensions"]) fs.mkdirSync(path.join(root, dir));
  fs.writeFileSync(path.join(root, "config.yaml"), "auth: none\ncert: false\n");
  const sessionFile = path.join(folder, ".pi", "sessions", fs.readdirSync(path.join(folder, ".pi", "sessions"))[0]);
  return { root, folder, userData, sessionFile, gate, extensions: path.join(root, "extensions"), config: path.join(root, "config.yaml") };
}

function serverEnv(ws) {
  const env = { ...process.env, HOME: path.join(ws.root, "home"), PI_CODING_AGENT_DIR: path.join(ws.root, "agent"), ANTHROPIC_API_KEY: "e2e-fake-key" };
  delete env.ANTHROPIC_BASE_URL;
  for (const k of ["XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "VSCODE_IPC_HOOK_CLI"]) delete env[k];
  return env;
}

function installExtension(ws) {
  execFileSync(CODE_SERVER, ["--config", ws.config, "--user-data-dir", ws.userData, "--extensions-dir", ws.extensions,
    "--install-extension", VSIX], { env: serverEnv(ws), stdio: ["ignore", "pipe", "pipe"] });
  const installed = fs.readdirSync(ws.extensions).filter((d) => d.startsWith("pi-lsp.pi-lsp-"));
  if (installed.length !== 1) throw new Error(`--install-extension did not install pi-lsp.vsix into ${ws.extensions}`);
  log(`installed ${installed[0]}`);
}

async function startCodeServer(ws) {
  const port = await freePort();
  const out = fs.openSync(path.join(ws.root, "code-server.log"), "a");
  const proc = spawn(CODE_SERVER, ["--config", ws.config, "--bind-addr", `127.0.0.1:${port}`, "--auth", "none",
    "--user-data-dir", ws.userData, "--extensions-dir", ws.extensions, "--disable-telemetry", "--disable-update-check",
    "--disable-workspace-trust", "--disable-getting-started-override", ws.folder],
  { env: serverEnv(ws), stdio: ["ignore", out, out], detached: true });
  state.procs.push(proc);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => {
    if (proc.exitCode !== null) throw new Error(`code-server exited with ${proc.exitCode}; see ${ws.root}/code-server.log`);
    const res = await fetch(`${url}/healthz`);
    return res.ok;
  }, `code-server to answer on ${url}/healthz`, 60_000);
  log(`code-server on ${url}`);
  return url;
}

async function launchBrowser() {
  // playwright-core gives the browser a fresh profile directory of its own.
  state.browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  const context = await state.browser.newContext({ viewport: { width: 1440, height: 900 } });
  return context.newPage();
}

/** The text of a locator with non-breaking spaces made plain (Monaco renders spaces as nbsp). */
async function textOf(locator) {
  return (await locator.innerText()).replace(/\u00a0/g, " ");
}

/** The text with every run of white space one space: a narrow editor wraps its lines. */
async function flatText(locator) {
  return (await textOf(locator)).replace(/\s+/g, " ");
}

async function shot(page, name) {
  await page.mouse.move(1000, 880); // no hover tooltips in the picture
  fs.mkdirSync(SHOTS, { recursive: true });
  const file = path.join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file });
  log(`screenshot ${path.relative(REPO, file)}`);
}

const SESSIONS_PANE = '.pane:has(.pane-header[aria-label*="Sessions"])';

/** The Sessions view's tree rows. */
function treeRows(page) {
  return page.locator(`${SESSIONS_PANE} .monaco-list-row`);
}

/**
 * The row showing `text`. The list only renders the rows in sight, so while there is none
 * this scrolls on through the view, wrapping round to the top at the end.
 */
async function rowWith(page, text, what) {
  const row = treeRows(page).filter({ hasText: text }).first();
  const list = page.locator(`${SESSIONS_PANE} .monaco-list`).first();
  const offset = () => list.locator(".monaco-list-rows").evaluate((e) => e.style.top);
  await waitFor(async () => {
    if (await row.isVisible()) return true;
    const box = await list.boundingBox();
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    const before = await offset();
    await page.mouse.wheel(0, box.height / 2);
    await page.waitForTimeout(150);
    if ((await offset()) === before) await page.mouse.wheel(0, -1e6);
    return false;
  }, `the Sessions view to show ${what} (a row with "${text}")`);
  return row;
}

/** A notification toast on screen whose text has `text`. */
function toast(page, text) {
  return page.locator(".notification-toast", { hasText: text });
}

/** The same notification in the notification center (shown or not). */
function centerItem(page, text) {
  return page.locator(".notifications-center .notification-list-item", { hasText: text });
}

/** The chat webview's document: webviews are an iframe holding the content iframe. */
function chatFrame(page) {
  return page.frameLocator("iframe.webview.ready").frameLocator("#active-frame");
}

async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible" });
  await input.fill(`>${title}`);
  const item = page.locator(".quick-input-widget .monaco-list-row", { hasText: title }).first();
  await waitFor(() => item.isVisible(), `the command palette to offer "${title}"`);
  await page.keyboard.press("Enter");
}

/** The fake model was called once per reply scripted for the step (script() starts the count). */
function expectCalls(fake, n) {
  if (fake.requests.length !== n) throw new Error(`the fake model was called ${fake.requests.length} times, expected ${n} (one per scripted reply)`);
}

const steps = [];
function step(name, fn) {
  steps.push({ name, fn });
}

step("the pi view says the server is starting until it answers, then shows the session", async ({ page, url, ws }) => {
  await page.goto(`${url}/?folder=${encodeURIComponent(ws.folder)}`);
  await waitFor(() => page.locator(".monaco-workbench").isVisible(), "the VS Code workbench", 60_000);
  const icon = page.locator('.activitybar .action-item a[aria-label^="pi"]').first();
  await waitFor(() => icon.isVisible(), "the π icon in the activity bar (the extension's view container)", 60_000);
  await icon.click();
  // The server waits at the gate: the view must say it is starting, not that there are no sessions.
  const pane = page.locator(SESSIONS_PANE);
  await waitFor(async () => (await textOf(pane)).includes("Starting the pi-lsp server…"), "the view to say the server is starting");
  if ((await textOf(pane)).includes("No pi sessions")) throw new Error("the view claims there are no sessions before the server answered");
  await shot(page, "starting");
  const gate = await fs.promises.open(ws.gate, "w"); // waits for the server's start to read it
  await gate.write("open\n");
  await gate.close();
  await rowWith(page, SESSION_NAME, "the example session");
  // A wider side bar, so entry texts and their ids fit: drag the sash on its right edge.
  const bar = await page.locator(".part.sidebar").boundingBox();
  await page.mouse.move(bar.x + bar.width, bar.y + bar.height / 2);
  await page.mouse.down();
  await page.mouse.move(480, bar.y + bar.height / 2, { steps: 5 });
  await page.mouse.up();
});

step("the session expands into its entry tree, current path and leaf marked", async ({ page }) => {
  await (await rowWith(page, SESSION_NAME, "the example session")).click();
  await rowWith(page, "GET /orders is really slow", "the first user message");
  await rowWith(page, "data-layer-question", "the labelled fork into the abandoned branch");
  await rowWith(page, "← leaf", "the leaf marker");
  await shot(page, "tree");
});

step("a click on an entry previews the context the model gets there", async ({ page }) => {
  await (await rowWith(page, "data-layer-question", "the fork's first entry")).click();
  const tab = page.locator(".tabs-container .tab", { hasText: "@ e1afef94" });
  await waitFor(() => tab.isVisible(), "an editor tab for the context preview at e1afef94");
  const lines = page.locator(".editor-instance .monaco-editor .view-lines").first();
  await waitFor(async () => (await textOf(lines)).includes("# Context at `e1afef94`"), "the preview to start with \"# Context at `e1afef94`\"");
});

/** Page through an editor until `line` is in sight (only the lines in sight are rendered). */
async function pageTo(page, lines, line, what) {
  let seen = "";
  await waitFor(async () => {
    if (await line.isVisible()) return true;
    const now = await textOf(lines);
    await page.keyboard.press(now === seen ? "Control+Home" : "PageDown"); // at the end: from the top
    seen = now;
    return false;
  }, what);
}

step("Remove from Context on a tool output in the preview at the leaf: struck through in its place, the total estimated again", async ({ page }) => {
  // An edit holds on the current branch from the leaf on: the preview at the leaf shows it.
  await runCommand(page, "View: Close All Editor Groups");
  await runCommand(page, "pi: Preview Context");
  const editor = page.locator(".editor-instance .monaco-editor").first();
  const lines = editor.locator(".view-lines").first();
  await waitFor(async () => (await textOf(lines)).includes("# Context at"), "the preview at the leaf");
  // Monaco draws spaces as no-break spaces, which \s matches.
  const heading = lines.locator(".view-line", { hasText: /^##\s\d+\.\stoolResult\s·\s/ }).first();
  await editor.locator(".view-lines").first().click();
  await pageTo(page, lines, heading, "a tool output's heading in the preview");
  // A heading's code lenses sit on the line above it: the nearest Remove above this heading.
  const top = (await heading.boundingBox()).y;
  const removes = editor.locator(".codelens-decoration a", { hasText: "Remove from Context" });
  let nearest;
  let gap = Infinity;
  for (const lens of await removes.all()) {
    const box = await lens.boundingBox();
    if (box && box.y < top && top - box.y < gap) [nearest, gap] = [lens, top - box.y];
  }
  if (!nearest) throw new Error("no Remove from Context code lens above the tool output's heading");
  await nearest.click();
  const struck = lines.locator(".view-line", { hasText: /^##\s~~toolResult~~\s·\s/ }).first();
  await pageTo(page, lines, struck, "the tool output's heading struck through, in its place");
  // Its code lens now offers the undo (VS Code asks for the lenses again a moment after a change).
  await waitFor(async () => {
    const at = (await struck.boundingBox())?.y ?? 0;
    for (const lens of await editor.locator(".codelens-decoration a", { hasText: "Undo Context Edit" }).all()) {
      const box = await lens.boundingBox();
      if (box && box.y < at && at - box.y < 40) return true;
    }
    return false;
  }, "Undo Context Edit above the removed message");
  await shot(page, "context-edit");
  await page.keyboard.press("Control+Home");
  await waitFor(async () => /removed/.test(await textOf(lines)), "the preview's total to say what the edit removed");
});

step("a write opens as a diff to review; answered in the chat card, its notification goes too; the reply streams", async ({ page, ws, fake }) => {
  fake.script(
    { ...toolReply({ text: "I'll put a short note in NOTES.md.", calls: [["toolu_e2e_1", "write", { path: "NOTES.md", content: NOTE }]] }), delay: 30 },
    { ...textReply("Done: NOTES.md ", "now says that ", "GET /orders runs ", "one query per page."), delay: 500 },
  );
  await runCommand(page, "View: Close All Editor Groups");
  await runCommand(page, "pi: Open Chat");
  const chat = chatFrame(page);
  const input = chat.locator("#input");
  await waitFor(() => input.isVisible(), "the chat webview's input box");
  await waitFor(async () => (await textOf(chat.locator("#transcript"))).includes("All green: 14 passed"), "the chat transcript to show the session's last reply");
  await input.fill("Write a short note about the fix to NOTES.md.");
  await input.press("Enter");
  // The proposed write opens as a diff (the file as it is, what pi would write) and VS Code asks,
  // in a notification that has the answers as links and no close button.
  const question = toast(page, "wants to overwrite NOTES.md");
  await waitFor(() => question.isVisible(), "VS Code's notification asking to accept overwriting NOTES.md");
  const links = (await question.locator(".notification-list-item-message a").allInnerTexts()).map((t) => t.trim());
  if (links.join("|") !== "Accept|Accept for Session|Reject") throw new Error(`the notification's answers are ${JSON.stringify(links)}`);
  if (await question.locator(".codicon-notifications-clear").count()) throw new Error("the question's notification can be closed (×)");
  const tab = page.locator(".tabs-container .tab", { hasText: "NOTES.md: current ↔ proposed" });
  await waitFor(() => tab.isVisible(), "an editor tab with the diff of the proposed write (NOTES.md: current ↔ proposed)");
  const diff = page.locator(".monaco-diff-editor").first();
  await waitFor(async () => (await flatText(diff.locator(".editor.original .view-lines"))).includes("is slow: N+1 queries."),
    "the diff's left side to show NOTES.md as it is");
  await waitFor(async () => (await flatText(diff.locator(".editor.modified .view-lines"))).includes("now runs one query per"),
    "the diff's right side to show what the write would put there");
  // The chat panel (behind the diff, in the same group) asks the same question.
  const approval = chat.locator("#approvals .approval");
  await waitFor(async () => (await approval.count()) === 1 && (await approval.textContent()).includes("wants to overwrite NOTES.md"),
    "the same question as a card in the chat panel");
  await shot(page, "diff-review");
  await approval.locator("button", { hasText: /^Accept$/ }).click();
  await waitFor(async () => (await approval.count()) === 0, "the chat's approval card to go once answered");
  await waitFor(async () => !(await question.isVisible()), "the notification to go once the question was answered in the chat card");
  await waitFor(async () => (await tab.count()) === 0, "the diff of the proposed write to close once answered");
  const transcript = chat.locator("#transcript");
  // Streamed: the first pieces show before the last has arrived.
  const partial = await waitFor(async () => {
    const text = await textOf(transcript);
    return text.includes("Done: NOTES.md") && text;
  }, "the reply's first streamed words");
  if (partial.includes("one query per page.")) throw new Error("the reply appeared all at once, not streamed");
  await waitFor(async () => (await textOf(transcript)).includes("Done: NOTES.md now says that GET /orders runs one query per page."), "the whole streamed reply");
  const written = fs.readFileSync(path.join(ws.folder, "NOTES.md"), "utf8");
  if (written !== NOTE) throw new Error(`NOTES.md holds ${JSON.stringify(written)}, not the approved content`);
  await waitFor(async () => !(await chat.locator("body.busy").count()), "the turn to end (the panel leaves its busy state)");
  await shot(page, "chat");
  expectCalls(fake, 2);
  const result = JSON.stringify(fake.requests[1].body.messages.at(-1));
  if (!result.includes('"tool_use_id":"toolu_e2e_1"') || !result.includes("Successfully wrote to NOTES.md")) {
    throw new Error(`the second model request does not end with the write's result: ${result.slice(0, 300)}`);
  }
});

step("code sent with a prompt: chips above the input, a question hidden from view stays open, the code shows as a titled block", async ({ page, fake }) => {
  fake.script(
    toolReply({ text: "Let me look at the query.", calls: [["toolu_e2e_2", "bash", { command: "grep -n JOIN app/orders.py" }]] }),
    textReply("The JOIN is fine; the OFFSET makes deep pages slow. Use keyset pagination on `order_id`."),
  );
  // Open app/orders.py (quick open), select its first four lines, send them to the chat.
  await page.keyboard.press("F1");
  const quick = page.locator(".quick-input-widget input");
  await quick.waitFor({ state: "visible" });
  await quick.fill("app/orders.py");
  await waitFor(() => page.locator(".quick-input-widget .monaco-list-row", { hasText: "orders.py" }).first().isVisible(), "quick open to find app/orders.py");
  await page.keyboard.press("Enter");
  const editor = page.locator(".editor-instance .monaco-editor .view-lines").first();
  await waitFor(async () => (await textOf(editor)).includes("def list_orders"), "app/orders.py in the editor");
  // It opened over the chat (the one group left): beside it, both stay in view.
  await runCommand(page, "View: Move Editor into Right Group");
  await waitFor(() => page.locator(".editor-group-container").nth(1).locator(".tab", { hasText: "orders.py" }).isVisible(), "app/orders.py in a group right of the chat");
  await editor.click();
  await page.keyboard.press("Control+Home");
  for (let i = 0; i < 4; i++) await page.keyboard.press("Shift+ArrowDown");
  await runCommand(page, "pi: Send Selection to Chat");
  const chat = chatFrame(page);
  const chip = chat.locator("#attachments .attachment", { hasText: "app/orders.py:1-4" });
  await waitFor(() => chip.isVisible(), "the attachment chip app/orders.py:1-4");
  const input = chat.locator("#input");
  const [chipBox, inputBox] = [await chip.boundingBox(), await input.boundingBox()];
  if (chipBox.y + chipBox.height > inputBox.y) throw new Error(`the chip sits beside the input, not above it (${JSON.stringify({ chipBox, inputBox })})`);
  if (!(await chat.locator("#title").evaluate((e) => e.scrollWidth <= e.clientWidth))) throw new Error("the chat's title is cut");
  await input.fill("Is this query why deep pages are slow?");
  await input.press("Enter");
  const question = toast(page, "wants to run bash: grep -n JOIN app/orders.py");
  await waitFor(() => question.isVisible(), "the notification asking to run grep");
  const card = chat.locator("#approvals .approval", { hasText: "grep -n JOIN app/orders.py" });
  await waitFor(() => card.isVisible(), "the question as a card in the chat");
  // The newest message stays in view above the card.
  await waitFor(async () => (await chat.locator("#transcript").evaluate((e) => e.scrollHeight - e.scrollTop - e.clientHeight)) < 2,
    "the transcript to keep its newest message in view under the approval card");
  // Hidden (Escape, with the editor in front), the question is not answered: it waits in the
  // chat card and in the notification center, whose link answers it.
  await editor.click();
  await page.keyboard.press("Escape");
  await waitFor(async () => !(await question.isVisible()), "Escape to hide the notification");
  if (!(await card.isVisible())) throw new Error("hiding the notification took the question away");
  await runCommand(page, "Notifications: Show Notifications");
  const listed = centerItem(page, "wants to run bash: grep -n JOIN app/orders.py");
  await waitFor(() => listed.isVisible(), "the question in the notification center");
  await listed.locator(".notification-list-item-message a", { hasText: /^Accept$/ }).click();
  await waitFor(async () => !(await card.count()), "the chat card to go once answered in the notification");
  await waitFor(async () => !(await listed.count()), "the answered question to leave the notification center");
  await page.keyboard.press("Escape");
  const transcript = chat.locator("#transcript");
  await waitFor(async () => (await textOf(transcript)).includes("Use keyset pagination"), "the reply after the approved grep");
  await waitFor(async () => !(await chat.locator("body.busy").count()), "the turn to end");
  // The prompt's code: a titled block, not <file …> markup.
  const block = chat.locator(".msg.user .file", { hasText: "app/orders.py:1-4" });
  await waitFor(() => block.isVisible(), "the sent code as a titled block in the prompt");
  if ((await textOf(transcript)).includes("<file path=")) throw new Error("the prompt shows <file …> markup");
  // (The transcript is drawn again from the server once the turn ends: retried until it holds still.)
  await waitFor(async () => {
    await block.scrollIntoViewIfNeeded({ timeout: 1000 });
    return block.isVisible();
  }, "the titled block scrolled into view");
  await shot(page, "chat-attachment");
  expectCalls(fake, 2);
  const sent = JSON.stringify(fake.requests[0].body.messages.at(-1));
  if (!sent.includes('<file path=\\"app/orders.py\\" lines=\\"1-4\\"')) throw new Error(`the model did not get the code as <file> markup: ${sent.slice(0, 300)}`);
});

step("Restore Files to Here puts back the files as they were at an entry, and Undo undoes it", async ({ page, ws }) => {
  const prompt = await rowWith(page, "Write a short note about the fix", "the prompt of the turn that wrote NOTES.md");
  const entryId = (await textOf(prompt)).match(/\b[0-9a-f]{8}\b/)?.[0];
  if (!entryId) throw new Error(`no entry id in the prompt's row: ${await textOf(prompt)}`);
  await prompt.click({ button: "right" });
  const item = page.locator(".context-view .monaco-menu .action-label", { hasText: /^Restore Files to Here…$/ });
  await waitFor(() => item.isVisible(), "the entry's context menu to offer Restore Files to Here…");
  await item.click();
  const lines = page.locator(".editor-group-container.active .monaco-editor .view-lines").first();
  await waitFor(async () => {
    const text = await textOf(lines);
    return text.includes("-GET /orders now runs one query per page.") && text.includes("+GET /orders is slow: N+1 queries.");
  }, "the files diff: NOTES.md going back from the written text to the old one");
  // The question beside the diff, not a dialog over it.
  const ask = toast(page, `Restore 1 file(s) to entry ${entryId}?`);
  await waitFor(() => ask.isVisible(), `the question whether to restore 1 file to entry ${entryId}`);
  if (await page.locator(".monaco-dialog-box").count()) throw new Error("a dialog covers the diff");
  await shot(page, "rewind");
  await ask.locator(".monaco-button", { hasText: /^Restore$/ }).click();
  const done = page.locator(".notification-toast", { hasText: "restored 1 file(s)" });
  await waitFor(() => done.isVisible(), "the notification that 1 file was restored");
  const notes = () => fs.readFileSync(path.join(ws.folder, "NOTES.md"), "utf8");
  if (notes() !== OLD_NOTE) throw new Error(`NOTES.md holds ${JSON.stringify(notes())} after the restore, not the text from before the turn`);
  // The notification's Undo puts back what the restore replaced.
  await done.locator(".monaco-button", { hasText: /^Undo$/ }).click();
  await waitFor(() => page.locator(".notification-toast", { hasText: "undid the restore" }).isVisible(), "the notification that the restore was undone");
  if (notes() !== NOTE) throw new Error(`NOTES.md holds ${JSON.stringify(notes())} after Undo, not the text the turn wrote`);
});

step("Branch Here from the tree's context menu moves the leaf", async ({ page, ws }) => {
  // The fork's abandoned branch: expand its head, then branch to its last assistant entry.
  const head = await rowWith(page, "data-layer-question", "the fork's first entry");
  await head.locator(".monaco-tl-twistie").click();
  const target = await rowWith(page, "orm-dead-end", "the abandoned branch's labelled entry");
  await target.click({ button: "right" });
  const item = page.locator(".context-view .monaco-menu .action-label", { hasText: /^Branch Here$/ });
  await waitFor(() => item.isVisible(), "the entry's context menu to offer Branch Here");
  await item.click();
  await waitFor(async () => /orm-dead-end.*← leaf|← leaf.*orm-dead-end/s.test(await textOf(await rowWith(page, "orm-dead-end", "the branched-to entry"))),
    "the leaf marker on the orm-dead-end entry");
  const lines = fs.readFileSync(ws.sessionFile, "utf8").trim().split("\n");
  const last = JSON.parse(lines.at(-1));
  // A durable leaf move is a `custom` entry pi reads as the leaf and leaves out of the context.
  if (last.type !== "custom" || last.customType !== "pi-lsp.leaf" || last.data?.targetId !== "28511eec" || last.parentId !== "28511eec") throw new Error(`the session file's last entry is not a durable leaf move to 28511eec: ${lines.at(-1)}`);
  await shot(page, "branch");
});

step("a turn that edits an open file leaves it unsaved; Restore Files to Here puts the buffer back, undoably", async ({ page, ws, fake }) => {
  fake.script(
    toolReply({ text: "Keyset pagination, then.", calls: [["toolu_e2e_3", "edit", { path: "app/orders.py", oldText: "LIMIT 50 OFFSET ?", newText: "WHERE order_id > ? LIMIT 50" }]] }),
    textReply("Done: app/orders.py pages by order_id."),
  );
  const chat = chatFrame(page);
  const input = chat.locator("#input");
  await input.fill("Switch app/orders.py to keyset pagination.");
  await input.press("Enter");
  const card = chat.locator("#approvals .approval", { hasText: "app/orders.py" });
  await waitFor(() => card.isVisible(), "the question whether to edit app/orders.py, as a card in the chat");
  await card.locator("button", { hasText: /^Accept$/ }).click();
  await waitFor(async () => (await textOf(chat.locator("#transcript"))).includes("pages by order_id."), "the reply after the edit");
  await waitFor(async () => !(await chat.locator("body.busy").count()), "the turn to end");
  // The edit went to the open editor (workspace/applyEdit): it shows there, unsaved.
  const tab = page.locator(".tabs-container .tab", { hasText: "orders.py" }).first();
  const code = page.locator(".editor-group-container.active .monaco-editor .view-lines").first();
  const showOrders = async () => {
    await tab.click(); // in front again: a files diff may have opened over it
    return flatText(code);
  };
  await waitFor(async () => (await showOrders()).includes("WHERE order_id > ? LIMIT 50"), "the edit in the open app/orders.py");
  await waitFor(async () => /\bdirty\b/.test(await tab.getAttribute("class")), "app/orders.py marked unsaved");
  const orders = () => fs.readFileSync(path.join(ws.folder, "app", "orders.py"), "utf8");
  if (orders() !== ORDERS) throw new Error("the edit of an open file reached the disk before a save");
  // Restore Files to Here… on the prompt: the diff is against the buffer, the restore an edit there.
  const prompt = await rowWith(page, "Switch app/orders.py to keyset", "the prompt of the turn that edited app/orders.py");
  const entryId = (await textOf(prompt)).match(/\b[0-9a-f]{8}\b/)?.[0];
  if (!entryId) throw new Error(`no entry id in the prompt's row: ${await textOf(prompt)}`);
  await prompt.click({ button: "right" });
  const item = page.locator(".context-view .monaco-menu .action-label", { hasText: /^Restore Files to Here…$/ });
  await waitFor(() => item.isVisible(), "the entry's context menu to offer Restore Files to Here…");
  await item.click();
  const lines = page.locator(".editor-group-container.active .monaco-editor .view-lines").first();
  await waitFor(async () => {
    const text = await textOf(lines);
    return /^-.*WHERE order_id > \? LIMIT 50/m.test(text) && /^\+.*LIMIT 50 OFFSET \?/m.test(text);
  }, "the files diff: app/orders.py going back from the buffer's text to the one before the turn");
  const ask = toast(page, `Restore 1 file(s) to entry ${entryId}?`);
  await waitFor(() => ask.isVisible(), `the question whether to restore 1 file to entry ${entryId}`);
  await ask.locator(".monaco-button", { hasText: /^Restore$/ }).click();
  const done = toast(page, "1 open in the editor, not saved");
  await waitFor(() => done.isVisible(), "the notification that the file was restored in its editor");
  await waitFor(async () => (await showOrders()).includes("LIMIT 50 OFFSET ?"), "app/orders.py back as it was before the turn, in its editor");
  if (orders() !== ORDERS) throw new Error("the restore of an open file wrote the disk");
  // An edit in the editor's own history: Undo there takes the restore back.
  await code.click();
  await page.keyboard.press("Control+z");
  await waitFor(async () => (await showOrders()).includes("WHERE order_id > ? LIMIT 50"), "Ctrl+Z in the editor to undo the restore");
  await shot(page, "rewind-open-file");
  expectCalls(fake, 2);
});

async function cleanup() {
  await state.browser?.close().catch(() => {});
  for (const proc of state.procs) {
    try {
      process.kill(-proc.pid, "SIGTERM"); // code-server, its extension host and pi-lsp serve
    } catch {
      // already gone
    }
  }
  await state.fake?.stop().catch(() => {});
  if (state.root && !process.env.PI_E2E_KEEP) fs.rmSync(state.root, { recursive: true, force: true });
}

async function main() {
  for (const [file, hint] of [[CODE_SERVER, "run editors/vscode/e2e/install.sh"], [VSIX, "run npm run package in editors/vscode"], [CHROMIUM, "apt-get install chromium"], [PYTHON, "make .venv/.installed"]]) {
    if (!fs.existsSync(file)) throw new Error(`${file} is missing: ${hint}`);
  }
  const fake = (state.fake = new FakeAnthropic());
  await fake.start();
  const ws = prepare(fake.url);
  state.root = ws.root;
  installExtension(ws);
  const url = await startCodeServer(ws);
  const page = (state.page = await launchBrowser());
  const started = Date.now();
  for (const { name, fn } of steps) {
    const t = Date.now();
    try {
      await fn({ page, url, ws, fake });
    } catch (error) {
      await shot(page, "failure").catch(() => {});
      throw new Error(`step "${name}" failed: ${error.message}`);
    }
    log(`ok  ${name} (${((Date.now() - t) / 1000).toFixed(1)}s)`);
  }
  log(`all ${steps.length} steps passed in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  if (process.env.PI_E2E_README) {
    for (const name of README_SHOTS) fs.copyFileSync(path.join(SHOTS, `${name}.png`), path.join(README_DIR, `${name}.png`));
    log(`README screenshots updated in ${path.relative(REPO, README_DIR)}: ${README_SHOTS.join(", ")}`);
  }
}

const timer = setTimeout(() => {
  process.stderr.write(`[e2e] FAIL: the whole run took longer than ${OVERALL_MS / 1000}s\n`);
  void cleanup().finally(() => process.exit(1));
}, OVERALL_MS);

main().then(
  async () => {
    clearTimeout(timer);
    await cleanup();
  },
  async (error) => {
    clearTimeout(timer);
    process.stderr.write(`[e2e] FAIL: ${error.message}\n`);
    if (state.root) process.stderr.write(`[e2e] code-server log: ${path.join(state.root, "code-server.log")} (kept)\n`);
    process.env.PI_E2E_KEEP = "1";
    await cleanup();
    process.exitCode = 1;
  },
);
