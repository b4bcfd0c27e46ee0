// Messages between the chat panel (extension host) and its webview. Types only: the webview
// bundle imports this file too.
import type { ModelChoice } from "./settings";

export interface ChatState {
  title: string;
  busy: boolean;
  model: string | null;
  models: ModelChoice[];
  thinkingLevel: string;
  thinkingLevels: readonly string[];
  tokens: string;
  /** Code that goes with the next prompt (labels such as `orders.py:4-5`). */
  attachments: string[];
}

export type ToWebview =
  | { type: "reset"; blocks: { id: string; html: string }[]; state: ChatState }
  | { type: "upsert"; id: string; html: string }
  | { type: "state"; state: ChatState }
  /** `notes`: shown after the button of their action (what Accept for Session covers). */
  | { type: "approval"; id: string; message: string; actions: string[]; detail?: string; notes?: Record<string, string> }
  | { type: "approvalDone"; id: string }
  /** `keepDraft`: what is being written stays, after the text. */
  | { type: "setInput"; text: string; keepDraft?: boolean };

export type FromWebview =
  | { type: "ready" }
  | { type: "send"; text: string; delivery: "prompt" | "steer" | "followUp" }
  | { type: "abort" }
  | { type: "setModel"; model: string }
  | { type: "pickModel" }
  | { type: "setThinking"; level: string }
  | { type: "approve"; id: string; choice: string }
  | { type: "previewContext" }
  | { type: "earlier" }
  | { type: "detach"; index: number }
  | { type: "contextEdit"; action: "remove" | "replace" | "undo"; entryId: string };
