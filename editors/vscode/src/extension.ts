// Entry point: wires the client, the Sessions view, the chat panels, the context documents,
// the status bar and the commands together. Nothing here knows what a session means.
import * as vscode from "vscode";
import { ANSWER_COMMAND, Approvals, APPROVAL_SCHEME } from "./approval";
import { ChatPanels } from "./chatPanel";
import { PiClient } from "./client";
import { editorDiagnostics } from "./codeContext";
import { API_KEY_SECRET, registerCommands, registerContextCommands } from "./commands";
import { registerContextEdits } from "./contextEdits";
import { ContextProvider, SCHEME } from "./contextProvider";
import { Sessions } from "./sessions";
import { Item, SessionsView } from "./sessionsView";
import { StatusBar } from "./statusBar";
import { offerToSave } from "./trustDialogs";
import { plain } from "./plainText";

/** What activate() returns: for other extensions and for the tests. */
export interface PiApi {
  pi: PiClient;
  sessions: Sessions;
  view: SessionsView;
  treeView: vscode.TreeView<Item>;
  chats: ChatPanels;
  contextProvider: ContextProvider;
  status: StatusBar;
  approvals: Approvals;
}

let api: PiApi | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<PiApi> {
  const pi = new PiClient({ apiKey: () => context.secrets.get(API_KEY_SECRET) });
  let chats: ChatPanels | undefined;
  const sessions = new Sessions(pi, context.workspaceState, () => chats?.activeSession());
  chats = new ChatPanels(pi, sessions, context.extensionUri);
  const panels = chats;
  const approvals = new Approvals(pi, sessions, panels);
  pi.approveToolHandler = (params, token) => approvals.approve(params, token);
  pi.diagnosticsHandler = (params) => editorDiagnostics(params);

  const view = new SessionsView(pi, sessions);
  const treeView = vscode.window.createTreeView("piLsp.sessions", { treeDataProvider: view, showCollapseAll: true });
  // Selecting something in the view makes its session the default for the next command.
  treeView.onDidChangeSelection((e) => {
    const item = e.selection[0];
    if (item) sessions.remember(item.sessionUri);
  });
  const contextProvider = new ContextProvider(pi, sessions.onDidMove);
  const status = new StatusBar(pi, sessions);

  context.subscriptions.push(
    pi, sessions, view, treeView, chats, contextProvider, status,
    vscode.workspace.registerTextDocumentContentProvider(SCHEME, contextProvider),
    vscode.commands.registerCommand("piLsp.showMoreContext", (uri?: vscode.Uri) => {
      const shown = uri ?? vscode.window.activeTextEditor?.document.uri;
      if (shown?.scheme === SCHEME) contextProvider.more(shown);
    }),
    vscode.workspace.registerTextDocumentContentProvider(APPROVAL_SCHEME, approvals.texts),
    vscode.commands.registerCommand(ANSWER_COMMAND, (id: string, choice: string) => approvals.answer(id, choice)),
    ...registerContextCommands(sessions, panels),
    ...registerContextEdits(pi, contextProvider),
    context.secrets.onDidChange((e) => {
      if (e.key === API_KEY_SECRET) pi.settingsChanged();
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => void offerToSave(pi).catch((error: unknown) => {
      void vscode.window.showErrorMessage(plain(`pi: ${error instanceof Error ? error.message : String(error)}`));
    })),
    ...registerCommands({ pi, sessions, view, chats, status, secrets: context.secrets }),
  );
  api = { pi, sessions, view, treeView, chats, contextProvider, status, approvals };

  try {
    await pi.start();
  } catch (error) {
    // Activation still succeeds, so the commands (Restart Server, settings) stay usable.
    void vscode.window
      .showErrorMessage(plain(`pi-lsp: the server did not start (${error instanceof Error ? error.message : String(error)}). ` +
        "Set piLsp.pythonPath or piLsp.command."), "Open Settings")
      .then((choice) => {
        if (choice) void vscode.commands.executeCommand("workbench.action.openSettings", "piLsp");
      });
  }
  return api;
}

export async function deactivate(): Promise<void> {
  await api?.pi.close();
  api = undefined;
}

// Exported for the tests (plain Node with a stand-in `vscode`), which load this bundle.
export { PiClient } from "./client";
export { Transcript } from "./chatModel";
export { MARKDOWN_LIMIT, RENDER_BUDGET_MS, STREAM_MARKDOWN_MS, budgetedMarkdown, streamingMarkdown, renderBlock, markdown } from "./chatRender";
export { MarkdownWorker } from "./markdownWorker";
export { patchTree, TreeShape } from "./treeShape";
export { USER_ONLY_KEYS, getter, modelList, serverLaunch, serverSettings } from "./settings";
export { contextUri, parseContextUri } from "./contextProvider";
export { contextLenses, editActions } from "./contextEdits";
export { sessionOfArgument, sessionKey } from "./sessions";
export { MoreItem } from "./sessionsView";
export { promptWrittenSince } from "./sessionFile";
export { approvalDetail, approvalMessage, decisionOf, notificationText } from "./approval";
export { visible } from "./plainText";
export { toItems } from "./codeContext";
export { FilesDiffProvider, filesUri, leftAlone, restoredMessage } from "./rewind";
export { piCapabilities, syncsDocument } from "./client";
export { describe as describeTrust, launchesFromWorkspace, restrictedReason } from "./trust";
