// The trust dialogs: pi: Trust This Folder…, and the offer to save VS Code's trust in pi's store.
// Apart from trust.ts, whose rules the client itself applies (so that module cannot import it).
import * as vscode from "vscode";
import type { PiClient } from "./client";
import type { ArgsOf, TrustState } from "./protocol";
import { describe, isTrusted, MANAGE_TRUST } from "./trust";
import { plain } from "./plainText";

type Choice = vscode.QuickPickItem & { args: Omit<ArgsOf<"pi.setTrust">, "folderUri"> };

function folderPath(uri: string): string {
  return vscode.Uri.parse(uri).fsPath;
}

/** pi: Trust This Folder…: pi's choices (trust, trust the parent, do not trust), saved in pi's
 *  trust.json so the pi CLI decides the same. */
export async function trustFolder(pi: PiClient): Promise<TrustState | undefined> {
  if (!isTrusted()) {
    const manage = "Manage Workspace Trust";
    const choice = await vscode.window.showWarningMessage(
      "pi: VS Code is in Restricted Mode for this workspace; trust it in VS Code first.", manage);
    if (choice === manage) await vscode.commands.executeCommand(MANAGE_TRUST);
    return undefined;
  }
  const { folders } = await pi.call("pi.trustStatus", {});
  const state = folders.length === 1 ? folders[0] : await pickFolder(folders);
  if (!state) return undefined;
  const path = folderPath(state.folderUri);
  const parent = path.replace(/\/[^/]+\/?$/, "") || "/";
  const choices: Choice[] = [
    { label: "Trust", description: path, args: { trusted: true } },
    { label: "Trust parent folder", description: parent, args: { trusted: true, parent: true } },
    { label: "Do not trust", description: path, args: { trusted: false } },
    { label: "Forget the decision", description: "pi's defaultProjectTrust decides", args: { trusted: null } },
  ];
  const picked = await vscode.window.showQuickPick(choices, {
    placeHolder: `pi: ${path} is ${describe(state)}. pi and pi-lsp load ${its([state])} only in trusted folders.`,
  });
  if (!picked) return undefined;
  const saved = await pi.call("pi.setTrust", { folderUri: state.folderUri, ...picked.args });
  void vscode.window.showInformationMessage(plain(`pi: ${path} is ${describe(saved)}.`));
  return saved;
}

/** What trusting the folders lets pi load, named: a decision saved here is pi's too, and pi runs
 *  a folder's extensions and starts its MCP servers once it is trusted. */
function its(folders: TrustState[]): string {
  const files = (f: TrustState) => f.projectFiles.join(" and ") || "own .pi/ files";
  if (folders.length === 1) return `its ${files(folders[0])}`;
  return `their own files (${folders.map((f) => `${folderPath(f.folderUri)}: ${files(f)}`).join("; ")})`;
}

async function pickFolder(folders: TrustState[]): Promise<TrustState | undefined> {
  const picked = await vscode.window.showQuickPick(
    folders.map((f) => ({ label: folderPath(f.folderUri), description: describe(f), state: f })),
    { placeHolder: "pi: which folder?" });
  return picked?.state;
}

/** After the user trusts the workspace in VS Code: offer to save it in pi's store too, so the pi
 *  CLI loads the same .pi/ files. */
export async function offerToSave(pi: PiClient): Promise<void> {
  await pi.sendSettings();
  const { folders } = await pi.call("pi.trustStatus", {});
  const unsaved = folders.filter((f) => f.decision !== "saved" && f.projectFiles.length > 0);
  if (unsaved.length === 0) return;
  const save = "Save in pi's trust.json";
  const choice = await vscode.window.showInformationMessage(
    plain(`pi: the workspace is trusted now. Trust ${unsaved.map((f) => folderPath(f.folderUri)).join(", ")} ` +
    `for the pi CLI too? pi loads ${its(unsaved)} only in trusted folders.`), save, "Not Now");
  if (choice !== save) return;
  for (const folder of unsaved) await pi.call("pi.setTrust", { folderUri: folder.folderUri, trusted: true });
}
