// Blocks to HTML for the chat webview. Rendering happens here, in the extension host (marked in
// a worker thread, MarkdownWorker), so the webview script stays a dumb view. Model output is
// untrusted: raw HTML is escaped, only http(s)/mailto links survive, images are not loaded, and
// the webview's CSP forbids scripts.
import { Marked, Tokens } from "marked";
import { Block, Part, ToolRun } from "./chatModel";
import type { MarkdownWorker } from "./markdownWorker";
import { oneLine } from "./plainText";

const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html(token: Tokens.HTML | Tokens.Tag): string {
      return escapeHtml(token.text);
    },
    link(this: { parser: { parseInline(tokens: Tokens.Generic[]): string } }, token: Tokens.Link): string {
      const text = this.parser.parseInline(token.tokens);
      if (!/^(https?:|mailto:)/i.test(token.href)) return text;
      return `<a href="${escapeHtml(token.href)}">${text}</a>`;
    },
    image(token: Tokens.Image): string {
      return `<span class="image">[image: ${escapeHtml(token.text || token.href)}]</span>`;
    },
  },
});

// Text longer than this is shown as it is, not parsed (marked 15 took 21 s on 8,000 characters
// of `[a](`; marked 18 is quadratic in a paragraph's length on `*a_`, 28 s at 49,999, which the
// time limit of MarkdownWorker bounds). Replies are rarely a fifth of this; pasted logs, which
// can be, read as well unformatted.
export const MARKDOWN_LIMIT = 50_000;

/** `text` as HTML: Markdown, or plain text when it is too long for marked or marked fails on it. */
export function markdown(text: string): string {
  if (text.length > MARKDOWN_LIMIT) return plainBlock(text);
  try {
    return marked.parse(text) as string;
  } catch {
    // marked recurses per nesting level: 2,000 nested quotes (`> > > …`) overflow its stack.
    return plainBlock(text);
  }
}

// What one render of a chat may spend in marked; texts after that are shown as plain text.
// MARKDOWN_LIMIT bounds one text, not a chat: 200 texts just under it of marked's slowest input
// (`*a` repeated, 0.6 s each) blocked the extension host 170 s when the chat opened. Replies as
// models write them parse at about 2,000 characters a millisecond: 200 of 3,000 take 0.3 s.
// marked now runs in a worker (MarkdownWorker), so this bounds how long marked works on a chat's
// texts before it shows.
export const RENDER_BUDGET_MS = 300;

/** Text to HTML, as `markdown` does. */
export type Render = (text: string) => string;
/** Text to HTML, as `markdown` does, in a worker. */
export type AsyncRender = (text: string) => Promise<string>;

/** `markdown` in `worker`, and the ms marked spent on it: plain text when it took marked past the worker's time limit. */
async function markdownIn(worker: MarkdownWorker, text: string): Promise<{ html: string; ms: number }> {
  if (text.length > MARKDOWN_LIMIT) return { html: plainBlock(text), ms: 0 };
  const { html, ms } = await worker.render(text);
  return { html: html ?? plainBlock(text), ms };
}

/** `markdown` in `worker` until `ms` have been spent in marked on its texts, plain text after; one per render, newest text first. */
export function budgetedMarkdown(ms: number, worker: MarkdownWorker): AsyncRender {
  // The worker's own times, not the host's clock: the worker is shared by every chat, and a
  // text's wait behind another chat's (0.46 s for 40,000 characters of `*a`) or for the worker
  // to start (0.1 s) would spend this chat's budget and draw its tiny texts plain.
  let spent = 0;
  return async (text) => {
    if (spent >= ms) return plainBlock(text);
    const rendered = await markdownIn(worker, text);
    spent += rendered.ms;
    return rendered.html;
  };
}

// A streaming reply is drawn again at each frame, whole: once a draw of it takes marked longer
// than a frame (50 ms), it is shown as plain text until it ends (its message_end draws it once as
// Markdown). Replies as models write them take 8 ms at 40,000 characters; marked's slowest input
// (`*a`) 17 ms at 10,000, 57 ms at 20,000 and 200 ms at 40,000.
export const STREAM_MARKDOWN_MS = 50;

/** `markdown` in `worker` until a text took marked `ms` or more, plain text after: one per streaming reply. */
export function streamingMarkdown(ms: number, worker: MarkdownWorker): AsyncRender {
  // As budgetedMarkdown, by the worker's times: a draw queued behind a chat that opens, or
  // waiting for a restarted worker, took marked no longer than any other.
  let slow = false;
  return async (text) => {
    if (slow) return plainBlock(text);
    const rendered = await markdownIn(worker, text);
    slow = rendered.ms >= ms;
    return rendered.html;
  };
}

/** `renderBlock` with its texts rendered by `md`, one after another in the order renderBlock asks for them. */
export async function renderBlockAsync(block: Block, tools: ReadonlyMap<string, ToolRun>, md: AsyncRender): Promise<string> {
  const texts: string[] = [];
  renderBlock(block, tools, (text) => (texts.push(text), ""));
  const html = new Map<string, string>();
  for (const text of texts) if (!html.has(text)) html.set(text, await md(text));
  // The block may have changed meanwhile: a text not rendered yet is drawn plain until its next draw.
  return renderBlock(block, tools, (text) => html.get(text) ?? plainBlock(text));
}

function plainBlock(text: string): string {
  return `<pre>${escapeHtml(text)}</pre>`;
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string);
}

export function renderBlock(block: Block, tools: ReadonlyMap<string, ToolRun>, md: Render = markdown): string {
  const id = escapeHtml(block.id);
  switch (block.kind) {
    case "user":
      return `<div class="msg user" data-id="${id}"><div class="role">You${contextActions(block.id, block.edited)}</div>${renderParts(block.id, block.parts, tools, false, md)}</div>`;
    case "assistant": {
      const body = renderParts(block.id, block.parts, tools, block.streaming, md);
      const error = block.error ? `<div class="error">${escapeHtml(block.error)}</div>` : "";
      const cursor = block.streaming ? `<span class="cursor">▍</span>` : "";
      const actions = block.streaming ? "" : contextActions(block.id, block.edited);
      return `<div class="msg assistant${block.streaming ? " streaming" : ""}" data-id="${id}"><div class="role">pi${block.model ? ` · ${escapeHtml(oneLine(block.model))}` : ""}${actions}</div>${body}${cursor}${error}</div>`;
    }
    case "removed": {
      const tokens = block.tokens === undefined ? "" : ` · ${block.tokens.toLocaleString("en")} tokens`;
      const undo = block.entryId === undefined ? "" : contextButton(block.entryId, "undo", "Undo context edit");
      return `<div class="msg removed" data-id="${id}"><div class="role">${escapeHtml(oneLine(block.role))} removed from the context${tokens}` +
        `${undo}</div><div class="text">${escapeHtml(block.text)}</div></div>`;
    }
    case "retry": {
      if (block.over) return `<div class="hidden" data-id="${id}"></div>`;
      // As pi 1.6's status line, with the chat's Abort button for its Esc.
      const seconds = Math.max(0, Math.ceil((block.until - Date.now()) / 1000));
      return `<div class="notice info retry" data-id="${id}">↻ Retrying (${block.attempt}/${block.maxAttempts}) in ${seconds}s… (Abort to cancel)</div>`;
    }
    case "summary":
      return `<div class="msg summary" data-id="${id}"><details data-key="${id}:s"><summary>${escapeHtml(oneLine(block.title))}</summary>${md(block.text)}</details></div>`;
    case "notice":
      return `<div class="notice ${block.level}" data-id="${id}">${escapeHtml(block.text)}</div>`;
  }
}

/** The parts' HTML in their order, rendered in the order a budgeted `md` should spend on them:
 *  what is in view (reply text) before folded thinking, each newest first. */
function renderParts(blockId: string, parts: Part[], tools: ReadonlyMap<string, ToolRun>, streaming: boolean, md: Render): string {
  const html: string[] = [];
  const order = parts.map((_, i) => i).reverse();
  const folded = (i: number): boolean => parts[i].type === "thinking";
  for (const i of [...order.filter((i) => !folded(i)), ...order.filter(folded)]) {
    html[i] = renderPart(blockId, parts[i], i, tools, streaming, md);
  }
  return html.join("");
}

function renderPart(blockId: string, part: Part, index: number, tools: ReadonlyMap<string, ToolRun>, streaming: boolean,
  md: Render): string {
  const key = escapeHtml(`${blockId}:${index}`);
  switch (part.type) {
    case "text":
      return `<div class="text">${md(part.text)}</div>`;
    case "thinking":
      // Thinking stays folded unless the user opens it; the webview keeps that choice per key.
      return `<details class="thinking" data-key="${key}"><summary>Thinking${streaming ? "…" : ""}</summary><div class="thinking-body">${md(part.text)}</div></details>`;
    case "toolCall": {
      const run = tools.get(part.id);
      const state = !run ? (streaming ? "…" : "") : run.running ? " · running…" : run.isError ? " · failed" : " · done";
      const actions = run?.entryId ? contextActions(run.entryId, run.edited) : "";
      const result = run && (run.text || !run.running)
        ? `<div class="tool-result${run.isError ? " failed" : ""}">${actions}<pre>${escapeHtml(run.text || "(no output)")}</pre></div>` : "";
      // Name and brief are session text: on one line, a U+202E in them cannot reverse the state after them.
      return `<details class="tool${run?.isError ? " failed" : ""}" data-key="${key}"><summary>${escapeHtml(oneLine(part.name) || "tool")}${part.brief ? ` <code>${escapeHtml(oneLine(part.brief))}</code>` : ""}${escapeHtml(state)}</summary>` +
        `<pre class="tool-args">${escapeHtml(part.args)}</pre>${result}</details>`;
    }
    case "image":
      return `<div class="image">[${escapeHtml(part.mimeType)}]</div>`;
    case "file":
      return `<div class="file"><div class="file-title">${escapeHtml(part.title)}</div>` +
        `<pre><code${part.language ? ` class="language-${escapeHtml(part.language)}"` : ""}>${escapeHtml(part.text)}</code></pre></div>`;
  }
}

/** Remove / Replace / Undo on a message that is an entry of the session (not one being streamed). */
function contextActions(entryId: string, edited: boolean | undefined): string {
  if (!entryId || entryId.startsWith("local-")) return "";
  return `<span class="ctx-actions">${edited ? '<span class="edited">✎ edited in context</span>' : ""}` +
    contextButton(entryId, "remove", "Remove from context") + contextButton(entryId, "replace", "Replace in context…") +
    (edited ? contextButton(entryId, "undo", "Undo context edit") : "") + "</span>";
}

function contextButton(entryId: string, action: "remove" | "replace" | "undo", title: string): string {
  return `<button class="ctx" data-ctx="${action}" data-entry="${escapeHtml(entryId)}">${title}</button>`;
}
