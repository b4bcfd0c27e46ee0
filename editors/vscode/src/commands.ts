// The piLsp.* commands. Each resolves its session (Sessions.resolve) and, where it needs one,
// its entry (the tree item, else a pick), then makes one server call: the logic is the server's.
import * as vscode from "vscode";
import type { ChatPanels } from "./chatPanel";
import type { PiClient } from "./client";
import { Attachment, fileAttachment, selectionAttachment } from "./codeContext";
import { contextUri } from "./contextProvider";
import { pickModel } from "./modelPicker";
import { BranchResult, Delivery, JobDone, Layer, ThinkingLevel, THINKING_LEVELS, TreeNode } from "./protocol";
import { FILES_SCHEME, FilesDiffProvider, Rewinder } from "./rewind";
import { entryOfArgument, Sessions } from "./sessions";
import type { SessionsView } from "./sessionsView";
import type { StatusBar } from "./statusBar";
import { trustFolder } from "./trustDialogs";
import { oneLine, plain, shorten } from "./plainText";

export const API_KEY_SECRET = "piLsp.anthropicApiKey";

export interface CommandContext {
  pi: PiClient;
  sessions: Sessions;
  view: SessionsView;
  chats: ChatPanels;
  status: StatusBar;
  secrets: vscode.SecretStorage;
}

/** Waits for pi/jobDone; remembers recent ones, since one may come before we ask. */
export class Jobs implements vscode.Disposable {
  private readonly done = new Map<string, JobDone>();
  private readonly waiting = new Map<string, (j: JobDone) => void>();
  private readonly subscription: vscode.Disposable;
  private readonly restarted: vscode.Disposable;

  constructor(pi: PiClient) {
    this.subscription = pi.onJobDone((j) => {
      const waiter = this.waiting.get(j.jobId);
      if (waiter) {
        this.waiting.delete(j.jobId);
        waiter(j);
        return;
      }
      this.done.set(j.jobId, j);
      if (this.done.size > 50) this.done.delete(this.done.keys().next().value as string);
    });
    // A restarted server never finishes the old one's jobs, nor does one stopped for good: their
    // notifications go.
    this.restarted = vscode.Disposable.from(
      pi.onStarted(() => this.fail("the pi-lsp server restarted")),
      pi.onStopped(() => this.fail("the pi-lsp server stopped; run pi: Restart Server")),
    );
  }

  private fail(error: string): void {
    const waiting = [...this.waiting];
    this.waiting.clear();
    for (const [jobId, waiter] of waiting) waiter({ jobId, uri: "", ok: false, error });
  }

  wait(jobId: string): Promise<JobDone> {
    const early = this.done.get(jobId);
    if (early) {
      this.done.delete(jobId);
      return Promise.resolve(early);
    }
    return new Promise((resolve) => this.waiting.set(jobId, resolve));
  }

  dispose(): void {
    this.subscription.dispose();
    this.restarted.dispose();
  }
}

export function registerCommands(c: CommandContext): vscode.Disposable[] {
  const { pi, sessions } = c;
  const jobs = new Jobs(pi);
  const rewinder = new Rewinder(pi);

  /** A session, or undefined when the user backed out (then the command does nothing). */
  const session = (arg: unknown) => sessions.resolve(arg);

  async function node(uri: string, id: string): Promise<TreeNode | undefined> {
    return c.view.node(uri, id);
  }

  /** The entry the argument names, else one picked from the session's entries. */
  async function entry(uri: string, arg: unknown, placeHolder: string, only?: (n: TreeNode) => boolean): Promise<string | undefined> {
    const named = entryOfArgument(arg);
    if (named) return named;
    const shape = await c.view.shape(uri);
    type Item = vscode.QuickPickItem & { id: string };
    // The rows the view shows (no usage records or bookkeeping), newest first.
    const shown = [...shape.tree.nodes].sort((a, b) => (b.timestamp ?? "").localeCompare(a.timestamp ?? "")).filter((n) => !only || only(n));
    const items: Item[] = shown.map((n) => ({
      id: n.id,
      label: `${n.onPath ? "$(circle-filled)" : "$(circle-outline)"} ${plain(oneLine(n.preview || n.type))}`,
      description: plain([shorten(n.id), oneLine(n.role ?? n.type), n.label ? `[${shorten(n.label)}]` : "", n.id === shape.tree.leafRow ? "← leaf" : ""].filter(Boolean).join(" ")),
    }));
    return (await vscode.window.showQuickPick(items, { placeHolder, matchOnDescription: true }))?.id;
  }

  /** A background job's notification until pi/jobDone; cancelling it aborts the job. */
  async function runJob(uri: string, title: string, jobId: string): Promise<JobDone> {
    return vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, (_progress, token) => {
      token.onCancellationRequested(() => void pi.call("pi.abort", { uri }).catch((error: unknown) => {
        void vscode.window.showErrorMessage(plain(`pi: ${title} was not stopped: ${error instanceof Error ? error.message : String(error)}`));
      }));
      return jobs.wait(jobId);
    });
  }

  async function openPreview(uri: string, leafId: string | undefined, layer: Layer): Promise<vscode.Uri> {
    const doc = contextUri({ session: uri, leafId, layer }, `Context · ${Sessions.title(await sessions.info(uri).catch(() => undefined), uri)}`);
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(doc), { preview: true });
    return doc;
  }

  async function afterBranch(uri: string, editorText: string | null | undefined): Promise<void> {
    // Moving to a user message hands back its text to edit and send again (pi's behaviour).
    if (editorText) (await c.chats.open(uri)).setInput(editorText);
  }

  /** After Branch Here (with or without a summary): offer the restore when the files differ,
   * counting the paths a restore would leave alone (the diff lists them). Those alone ask
   * nothing: an unchanged file over the snapshot cap or a nested clone would make every branch ask. */
  async function offerRestore(uri: string, result: BranchResult): Promise<void> {
    const changes = result.fileChanges ?? 0;
    const alone = result.leftAlone ?? 0;
    if (changes > 0 && result.leafId) {
      const also = alone > 0 ? `, and a restore leaves ${alone} alone (listed in the diff)` : "";
      await rewinder.offer(uri, result.leafId, `${changes} file(s) differ from this entry${also}. `);
    }
  }

  async function deliver(arg: unknown, delivery: Delivery, prompt: string): Promise<unknown> {
    const uri = await session(arg);
    if (!uri) return;
    const given = arg && typeof arg === "object" && typeof (arg as { text?: unknown }).text === "string" ? (arg as { text: string }).text : undefined;
    const text = given ?? (await vscode.window.showInputBox({ prompt }));
    if (!text) return;
    const panel = await c.chats.open(uri, { reveal: true });
    await panel.send(text, delivery);
    return panel;
  }

  const handlers: Record<string, (arg?: unknown) => Promise<unknown>> = {
    "piLsp.refreshSessions": async () => {
      c.view.refresh();
      c.status.schedule(0);
    },
    "piLsp.newSession": async (arg) => {
      const name = arg && typeof arg === "object" ? (arg as { name?: string }).name : undefined;
      const uri = await sessions.create(name);
      if (uri) await c.chats.open(uri);
      return uri;
    },
    "piLsp.selectSession": async () => {
      const uri = await sessions.pick();
      if (uri) sessions.remember(uri);
      return uri;
    },
    "piLsp.openSessionFile": async (arg) => {
      const uri = await session(arg);
      if (uri) await vscode.window.showTextDocument(vscode.Uri.parse(uri), { preview: true });
      return uri;
    },
    "piLsp.openChat": async (arg) => {
      const uri = await session(arg);
      return uri && c.chats.open(uri);
    },
    "piLsp.prompt": (arg) => deliver(arg, "prompt", "Prompt for pi"),
    "piLsp.steer": (arg) => deliver(arg, "steer", "Steer the running turn (delivered after the current tool)"),
    "piLsp.followUp": (arg) => deliver(arg, "followUp", "Follow-up (delivered when the turn ends)"),
    "piLsp.abort": async (arg) => {
      const uri = await session(arg);
      if (!uri) return;
      const result = await pi.call("pi.abort", { uri });
      if (!result.aborted) void vscode.window.showInformationMessage("pi: nothing is running in this session.");
      return result;
    },
    "piLsp.branch": async (arg) => {
      const uri = await session(arg);
      const target = uri && (await entry(uri, arg, "Branch: move the leaf to…"));
      if (!uri || !target) return;
      const { leafId, leafRow } = (await c.view.shape(uri)).tree;
      const result = await pi.call("pi.branch", { uri, targetId: target });
      // pi's /tree on the leaf moves nothing and says so, as Neovim's tree does.
      if ((target === leafId || target === leafRow) && result.leafId === target && result.editorText == null) {
        void vscode.window.showInformationMessage("pi: already at this point.");
      }
      await afterBranch(uri, result.editorText);
      await offerRestore(uri, result);
      return result;
    },
    "piLsp.restoreFiles": async (arg) => {
      const uri = await session(arg);
      const target = uri && (await entry(uri, arg, "Restore the files as they were at…"));
      if (!uri || !target) return;
      return rewinder.offer(uri, target);
    },
    "piLsp.undoRestoreFiles": async (arg) => {
      const uri = await session(arg);
      return uri && rewinder.undo(uri);
    },
    "piLsp.branchWithSummary": async (arg) => {
      const uri = await session(arg);
      const target = uri && (await entry(uri, arg, "Branch with a summary of the branch left: move to…"));
      if (!uri || !target) return;
      const given = arg && typeof arg === "object" ? (arg as { instructions?: string }).instructions : undefined;
      const instructions = given ?? (await vscode.window.showInputBox({ prompt: "What should the summary focus on? (optional)" }));
      if (instructions === undefined) return;
      const { jobId } = await pi.call("pi.branchWithSummary", { uri, targetId: target, ...(instructions.trim() ? { instructions } : {}) });
      const done = await runJob(uri, "pi: summarizing the branch left behind…", jobId);
      if (!done.ok) throw new Error(`the branch summary failed: ${done.error ?? "unknown error"}`);
      const result = done.result as BranchResult;
      await afterBranch(uri, result.editorText);
      await offerRestore(uri, result);
      return done;
    },
    "piLsp.label": async (arg) => {
      const uri = await session(arg);
      const target = uri && (await entry(uri, arg, "Label which entry?"));
      if (!uri || !target) return;
      // A tree item has a `label` of its own (the text shown): only a plain {label} object sets one.
      const given = arg && typeof arg === "object" && !(arg instanceof vscode.TreeItem) && "label" in arg
        ? (arg as { label: string | null }).label : undefined;
      const text = given !== undefined ? given : await vscode.window.showInputBox({
        prompt: "Label (empty clears it)", value: (await node(uri, target))?.label ?? "",
      });
      if (text === undefined) return;
      return pi.call("pi.label", { uri, targetId: target, label: text && text.trim() ? text.trim() : null });
    },
    "piLsp.fork": async (arg) => {
      const uri = await session(arg);
      if (!uri) return;
      const leafId = entryOfArgument(arg);
      const forked = await pi.call("pi.fork", { uri, ...(leafId ? { leafId } : {}) });
      sessions.remember(forked.uri);
      void vscode.window.showInformationMessage("pi: forked into a new session.", "Open Chat").then((choice) => {
        if (choice) void c.chats.open(forked.uri);
      });
      return forked;
    },
    "piLsp.previewContext": async (arg) => {
      const uri = await session(arg);
      if (!uri) return;
      const layer = arg && typeof arg === "object" ? (arg as { layer?: Layer }).layer : undefined;
      return openPreview(uri, entryOfArgument(arg), layer ?? "agent");
    },
    "piLsp.previewContextLayer": async (arg) => {
      const uri = await session(arg);
      if (!uri) return;
      const layers: (vscode.QuickPickItem & { layer: Layer })[] = [
        { label: "agent", description: "pi's messages, summaries and custom messages", layer: "agent" },
        { label: "llm", description: "the user/assistant/toolResult messages the model sees", layer: "llm" },
        { label: "request", description: "the provider request, as it would be sent", layer: "request" },
      ];
      const picked = await vscode.window.showQuickPick(layers, { placeHolder: "Which layer?" });
      return picked && openPreview(uri, entryOfArgument(arg), picked.layer);
    },
    "piLsp.diffWithCurrent": async (arg) => {
      const uri = await session(arg);
      const target = uri && (await entry(uri, arg, "Compare the context at which entry with the current one?"));
      if (!uri || !target) return;
      // Against the current leaf, which the answer names: no tree fetched for it (that would
      // replace the view the server holds for the Sessions view, which then fetches it again).
      const diff = await pi.call("pi.diffContext", { uri, fromLeafId: target });
      const leaf = diff.toLeafId;
      const title = Sessions.title(await sessions.info(uri).catch(() => undefined), uri);
      const left = contextUri({ session: uri, leafId: target, layer: "agent" }, `Context · ${title}`);
      const right = contextUri({ session: uri, leafId: leaf, layer: "agent" }, `Context · ${title}`);
      await vscode.commands.executeCommand("vscode.diff", left, right,
        `${target} (${diff.fromTokens} tok) ↔ current ${leaf} (${diff.toTokens} tok)`);
      return diff;
    },
    "piLsp.editPrompt": async (arg) => {
      const uri = await session(arg);
      const target = uri && (await entry(uri, arg, "Edit which prompt?", (n) => n.role === "user"));
      if (!uri || !target) return;
      let result = await pi.call("pi.branch", { uri, targetId: target });
      // The leaf's own prompt, which a plain move leaves where it is (as pi does): asked again
      // with `edit`, sent only then, as a server before it refuses it (an older one moves off).
      if (result.editorText == null && result.leafId === target) {
        result = await pi.call("pi.branch", { uri, targetId: target, edit: true });
      }
      // No text is no user message; "" is a prompt of images alone, as pi gives it (an empty input).
      if (result.editorText == null) throw new Error("that entry is not a user message");
      (await c.chats.open(uri)).setInput(result.editorText);
      return result;
    },
    "piLsp.compact": async (arg) => {
      const uri = await session(arg);
      if (!uri) return;
      const { plan, reason } = await pi.call("pi.compact", { uri, dryRun: true });
      if (!plan) {
        void vscode.window.showInformationMessage(plain(`pi: ${reason}`));
        return;
      }
      const go = await vscode.window.showInformationMessage(
        plain(`Compact ${plan.messagesToSummarize} messages (${plan.tokensBefore} tokens), keeping from ${shorten(plan.firstKeptEntryId)}?`),
        { modal: true }, "Compact");
      if (go !== "Compact") return;
      const instructions = await vscode.window.showInputBox({ prompt: "What should the summary keep? (optional)" });
      if (instructions === undefined) return;
      const { jobId } = await pi.call("pi.compact", { uri, ...(instructions.trim() ? { instructions } : {}) });
      if (!jobId) return;
      const done = await runJob(uri, "pi: compacting…", jobId);
      if (!done.ok) throw new Error(`compaction failed: ${done.error ?? "unknown error"}`);
      return done;
    },
    "piLsp.rename": async (arg) => {
      const uri = await session(arg);
      if (!uri) return;
      const given = arg && typeof arg === "object" ? (arg as { name?: string }).name : undefined;
      const name = given ?? (await vscode.window.showInputBox({ prompt: "Session name", value: (await sessions.info(uri))?.name ?? "" }));
      if (!name?.trim()) return;
      return pi.call("pi.setName", { uri, name: name.trim() });
    },
    "piLsp.setModel": async (arg) => {
      const uri = await session(arg);
      if (!uri) return;
      const given = arg && typeof arg === "object" ? (arg as { model?: string }).model : undefined;
      const model = given ?? (await pickModel(pi, (await pi.call("pi.previewContext", { uri, page: 1 })).model));
      if (!model) return;
      const slash = model.indexOf("/");
      if (slash <= 0) throw new Error(`a model is provider/id, not ${model}`);
      return pi.call("pi.setModel", { uri, provider: model.slice(0, slash), modelId: model.slice(slash + 1) });
    },
    "piLsp.setThinkingLevel": async (arg) => {
      const uri = await session(arg);
      if (!uri) return;
      const given = arg && typeof arg === "object" ? (arg as { level?: string }).level : undefined;
      // The levels the session's model offers, as pi's picker shows them.
      const offered = given ? [] : (await pi.call("pi.previewContext", { uri, page: 1 })).thinkingLevels ?? THINKING_LEVELS;
      const level = given ?? (await vscode.window.showQuickPick([...offered], { placeHolder: "Thinking level (from the next turn on)" }));
      if (!level) return;
      const set = await pi.call("pi.setThinkingLevel", { uri, level: level as ThinkingLevel });
      // pi records the model's nearest level: say that one, not the level asked for.
      if (set.queued) {
        void vscode.window.showInformationMessage(`pi: thinking level ${level} from when the running turn ends, or the nearest the model then in force offers.`);
      } else if (set.level !== level) {
        void vscode.window.showInformationMessage(`pi: thinking level ${set.level} (the model offers no ${level}).`);
      }
      return set;
    },
    "piLsp.check": async (arg) => {
      const uri = await session(arg);
      if (!uri) return;
      const { problems } = await pi.call("pi.check", { uri });
      if (problems.length === 0) {
        void vscode.window.showInformationMessage("pi: the session file is sound.");
      } else {
        pi.outputChannel.appendLine(`pi.check ${uri}`);
        for (const p of problems) pi.outputChannel.appendLine(`  ${p.line !== undefined ? `line ${p.line}: ` : ""}${p.kind}: ${p.message}${p.entryId ? ` (${p.entryId})` : ""}`);
        pi.outputChannel.show(true);
        const count = problems.reduce((total, p) => total + (p.more ?? 1), 0);
        void vscode.window.showWarningMessage(`pi: ${count} problem(s) in the session file; see the output.`);
      }
      return problems;
    },
    "piLsp.setApiKey": async () => {
      const key = await vscode.window.showInputBox({ prompt: "Anthropic API key (kept in VS Code's secret storage; empty removes it)", password: true, ignoreFocusOut: true });
      if (key === undefined) return;
      if (key.trim()) await c.secrets.store(API_KEY_SECRET, key.trim());
      else await c.secrets.delete(API_KEY_SECRET);
      await pi.sendSettings();
    },
    "piLsp.trust": () => trustFolder(pi),
    "piLsp.restartServer": () => pi.restart(),
    "piLsp.showOutput": async () => pi.outputChannel.show(),
  };

  const disposables: vscode.Disposable[] = [
    jobs, vscode.workspace.registerTextDocumentContentProvider(FILES_SCHEME, new FilesDiffProvider(pi)),
  ];
  for (const [id, handler] of Object.entries(handlers)) {
    disposables.push(vscode.commands.registerCommand(id, async (arg?: unknown) => {
      try {
        return await handler(arg);
      } catch (error) {
        void vscode.window.showErrorMessage(plain(`pi: ${error instanceof Error ? error.message : String(error)}`));
        return undefined;
      }
    }));
  }
  return disposables;
}

/** *Send Selection to Chat* and *Add Current File to Chat*: attach, then show the chat. */
export function registerContextCommands(sessions: Sessions, chats: ChatPanels): vscode.Disposable[] {
  async function attach(make: (editor: vscode.TextEditor) => Attachment, arg: unknown): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void vscode.window.showErrorMessage("pi: there is no editor in front to take code from.");
      return;
    }
    const uri = await sessions.resolve(arg);
    if (uri) (await chats.open(uri)).attach(make(editor));
  }
  return [
    vscode.commands.registerCommand("piLsp.sendSelection", (arg?: unknown) => attach(selectionAttachment, arg)),
    vscode.commands.registerCommand("piLsp.addFileToChat", (arg?: unknown) => attach((e) => fileAttachment(e.document), arg)),
  ];
}
