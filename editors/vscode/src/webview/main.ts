// The chat webview: a dumb view. Blocks arrive as HTML rendered by the extension host; this
// script only places them, keeps the user's open/closed choice on <details>, and sends input.
import type { ChatState, FromWebview, ToWebview } from "../chatMessages";
import { oneLine } from "../plainText";

declare function acquireVsCodeApi(): { postMessage(message: FromWebview): void };
const vscode = acquireVsCodeApi();

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const transcript = $<HTMLElement>("transcript");
const input = $<HTMLTextAreaElement>("input");
const model = $<HTMLSelectElement>("model");
const thinking = $<HTMLSelectElement>("thinking");
const approvals = $<HTMLElement>("approvals");
/** <details> the user opened or closed, by data-key, so a redraw keeps them that way. */
const openState = new Map<string, boolean>();
let busy = false;
const OTHER = "__other__";
/** Whether the transcript keeps its newest message in view: until the user scrolls up. */
let following = true;

function send(message: FromWebview): void {
  vscode.postMessage(message);
}

function toBottom(): void {
  transcript.scrollTop = transcript.scrollHeight;
}

function place(id: string, html: string): void {
  const template = document.createElement("template");
  template.innerHTML = html.trim();
  const node = template.content.firstElementChild ?? document.createElement("div");
  node.setAttribute("data-id", id);
  for (const d of Array.from(node.querySelectorAll<HTMLDetailsElement>("details[data-key]"))) {
    const open = openState.get(d.dataset.key ?? "");
    if (open !== undefined) d.open = open;
  }
  const old = transcript.querySelector(`[data-id="${CSS.escape(id)}"]`);
  if (old) old.replaceWith(node);
  else transcript.appendChild(node);
  if (following) toBottom(); // follow the stream unless scrolled up
}

function setState(state: ChatState): void {
  busy = state.busy;
  $("title").textContent = state.title;
  $("tokens").textContent = state.tokens;
  document.body.classList.toggle("busy", busy);
  const models = [...state.models];
  if (state.model && !models.some((m) => m.id === state.model)) models.unshift({ id: state.model });
  model.replaceChildren(...models.map((m) => {
    // The session's model is session text (a model_change's provider): shown on one line.
    const option = new Option(oneLine(m.name ?? m.id), m.id, false, m.id === state.model);
    option.title = oneLine(m.id);
    return option;
  }), new Option("Other…", OTHER));
  model.title = `Model: ${oneLine(state.model ?? "default")}`;
  thinking.replaceChildren(...state.thinkingLevels.map((l) => new Option(`thinking: ${l}`, l, false, l === state.thinkingLevel)));
  $("attachments").replaceChildren(...state.attachments.map((label, index) => {
    const chip = document.createElement("span");
    chip.className = "attachment";
    chip.textContent = label;
    const remove = document.createElement("button");
    remove.textContent = "×";
    remove.title = "Do not send this";
    remove.addEventListener("click", () => send({ type: "detach", index }));
    chip.appendChild(remove);
    return chip;
  }));
}

function submit(delivery: "prompt" | "steer" | "followUp"): void {
  const text = input.value;
  if (!text.trim()) return;
  send({ type: "send", text, delivery });
  input.value = "";
}

window.addEventListener("message", (event: MessageEvent<ToWebview>) => {
  const m = event.data;
  switch (m.type) {
    case "reset":
      transcript.replaceChildren();
      for (const b of m.blocks) place(b.id, b.html);
      setState(m.state);
      following = true;
      toBottom();
      break;
    case "upsert":
      place(m.id, m.html);
      break;
    case "state":
      setState(m.state);
      break;
    case "approval": {
      const card = document.createElement("div");
      card.className = "approval";
      card.dataset.id = m.id;
      const text = document.createElement("div");
      text.textContent = m.message;
      card.appendChild(text);
      if (m.detail) {
        const detail = document.createElement("pre");
        detail.textContent = m.detail;
        card.appendChild(detail);
      }
      for (const action of m.actions) {
        const button = document.createElement("button");
        button.textContent = action;
        button.addEventListener("click", () => send({ type: "approve", id: m.id, choice: action }));
        card.appendChild(button);
        const note = m.notes?.[action];
        if (note) {
          const span = document.createElement("span");
          span.className = "note";
          span.textContent = note;
          card.appendChild(span);
        }
      }
      approvals.appendChild(card);
      break;
    }
    case "approvalDone":
      approvals.querySelector(`[data-id="${CSS.escape(m.id)}"]`)?.remove();
      break;
    case "setInput":
      input.value = m.keepDraft && input.value.trim() ? `${m.text}\n\n${input.value}` : m.text;
      input.focus();
      break;
  }
});

// Only the user scrolls up (following the stream scrolls down, and a scroll event may come
// after more has been added): scrolling up stops the following, back at the end resumes it.
let lastTop = 0;
transcript.addEventListener("scroll", () => {
  if (transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 40) following = true;
  else if (transcript.scrollTop < lastTop) following = false;
  lastTop = transcript.scrollTop;
});
// An approval card, the attachment chips or a resized window change the transcript's height:
// the newest message stays in view.
new ResizeObserver(() => {
  if (following) toBottom();
}).observe(transcript);

// Remove / Replace / Undo on a message: the buttons are in the blocks the extension renders.
transcript.addEventListener("click", (event) => {
  if ((event.target as HTMLElement).closest("button[data-earlier]")) {
    event.preventDefault();
    send({ type: "earlier" });
    return;
  }
  const button = (event.target as HTMLElement).closest<HTMLButtonElement>("button[data-ctx]");
  if (!button) return;
  event.preventDefault();
  const action = button.dataset.ctx as "remove" | "replace" | "undo";
  send({ type: "contextEdit", action, entryId: button.dataset.entry ?? "" });
});

transcript.addEventListener("toggle", (event) => {
  const d = event.target as HTMLDetailsElement;
  if (d.dataset?.key) openState.set(d.dataset.key, d.open);
}, true);

input.addEventListener("keydown", (event) => {
  if (event.key !== "Enter" || event.shiftKey) return;
  event.preventDefault();
  // As in pi: while a turn runs, Enter steers and Alt+Enter queues a follow-up.
  submit(!busy ? "prompt" : event.altKey ? "followUp" : "steer");
});
$("send").addEventListener("click", () => submit(busy ? "steer" : "prompt"));
$("steer").addEventListener("click", () => submit("steer"));
$("followUp").addEventListener("click", () => submit("followUp"));
$("abort").addEventListener("click", () => send({ type: "abort" }));
$("tokens").addEventListener("click", () => send({ type: "previewContext" }));
model.addEventListener("change", () => {
  if (model.value === OTHER) send({ type: "pickModel" });
  else send({ type: "setModel", model: model.value });
});
thinking.addEventListener("change", () => send({ type: "setThinking", level: thinking.value }));

send({ type: "ready" });
