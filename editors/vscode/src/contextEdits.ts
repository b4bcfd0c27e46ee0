// Editing the context (pi 1.6's context_edit): Remove from Context, Replace in Context… and Undo
// Context Edit on a message of a context preview (code lenses on its headings) or of the chat.
// The server writes the edit on the session's current branch; both views reload on the change.
import * as vscode from "vscode";
import type { PiClient } from "./client";
import { type ContextProvider, parseContextUri, SCHEME } from "./contextProvider";
import type { AgentMessage, PreviewHeading } from "./protocol";
import { plain, shorten } from "./plainText";

/** What a command acts on: the session and the entry whose message is edited. */
export interface EditTarget {
  uri: string;
  entryId: string;
}

export type LensState = "kept" | "replaced" | "removed";

export interface ContextLens {
  line: number;
  entryId: string;
  state: LensState;
}

const EDITABLE = new Set(["user", "assistant", "toolResult", "custom"]);

/** The messages of a preview that can be edited, from the headings the server sent with it: an
 * id read back from the markdown could be part of another (a backtick or line break in it). */
export function contextLenses(headings: PreviewHeading[]): ContextLens[] {
  return headings.flatMap(({ line, entryId, role, state }) =>
    typeof entryId === "string" && EDITABLE.has(role) ? [{ line, entryId, state }] : []);
}

/** The actions one message offers, as titles and the commands they run. */
export function editActions(state: LensState): { title: string; command: string }[] {
  const remove = { title: "Remove from Context", command: "piLsp.removeFromContext" };
  const replace = { title: "Replace in Context…", command: "piLsp.replaceInContext" };
  const undo = { title: "Undo Context Edit", command: "piLsp.undoContextEdit" };
  return state === "kept" ? [remove, replace] : state === "replaced" ? [replace, undo] : [undo];
}

class ContextLensProvider implements vscode.CodeLensProvider {
  constructor(private readonly previews: ContextProvider) {}

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    const session = parseContextUri(document.uri).session;
    return contextLenses(this.previews.headingsOf(document.uri)).flatMap((lens) => {
      const range = new vscode.Range(new vscode.Position(lens.line, 0), new vscode.Position(lens.line, 0));
      return editActions(lens.state).map((a) => new vscode.CodeLens(range, {
        title: a.title, command: a.command, arguments: [{ uri: session, entryId: lens.entryId }],
      }));
    });
  }
}

/** The longest text offered for editing in place; a longer one (a huge output) starts empty. */
const PREFILL_CHARS = 2000;

/** The text a message says (its thinking and tool calls left out): what a replacement starts from. */
function textOf(content: AgentMessage["content"] | undefined): string {
  if (content === undefined) return "";
  if (typeof content === "string") return content;
  return content.filter((b) => b.type === "text").map((b) => b.text ?? "").join("\n");
}

function target(arg: unknown): EditTarget {
  const t = arg as Partial<EditTarget> | undefined;
  if (!t || typeof t.uri !== "string" || typeof t.entryId !== "string") {
    throw new Error("use this on a message of a context preview or of the chat");
  }
  return { uri: t.uri, entryId: t.entryId };
}

export function registerContextEdits(pi: PiClient, previews: ContextProvider): vscode.Disposable[] {
  const commands: Record<string, (arg: unknown) => Promise<unknown>> = {
    "piLsp.removeFromContext": async (arg) => {
      const { uri, entryId } = target(arg);
      return pi.call("pi.editContext", { uri, targetId: entryId, replacement: null });
    },
    "piLsp.replaceInContext": async (arg) => {
      const { uri, entryId } = target(arg);
      const given = (arg as { text?: unknown }).text;
      let text = typeof given === "string" ? given : undefined;
      if (text === undefined) {
        const page = await pi.call("pi.previewContext", { uri, page: 1, entryId });
        const current = textOf(page.pages?.[0]?.messages[0]?.message.content);
        text = await vscode.window.showInputBox({
          prompt: `What the model sees instead of ${shorten(entryId)} from now on (the session keeps the original)`,
          value: current.length <= PREFILL_CHARS ? current : "",
          placeHolder: "[output left out: …]",
        });
      }
      if (text === undefined) return;
      return pi.call("pi.editContext", { uri, targetId: entryId, replacement: { content: text } });
    },
    "piLsp.undoContextEdit": async (arg) => {
      const { uri, entryId } = target(arg);
      return pi.call("pi.undoContextEdit", { uri, targetId: entryId });
    },
  };
  return [
    vscode.languages.registerCodeLensProvider({ scheme: SCHEME }, new ContextLensProvider(previews)),
    ...Object.entries(commands).map(([id, handler]) => vscode.commands.registerCommand(id, async (arg?: unknown) => {
      try {
        return await handler(arg);
      } catch (error) {
        void vscode.window.showErrorMessage(plain(`pi: ${error instanceof Error ? error.message : String(error)}`));
        return undefined;
      }
    })),
  ];
}
