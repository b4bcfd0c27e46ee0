// Workspace trust: VS Code's own (Restricted Mode) and pi's (trust.json, shared with the pi
// CLI). In Restricted Mode the extension shows sessions and previews and runs nothing; the
// server is told (`workspaceTrusted`) and then leaves the folder's .pi/ files out. With VS Code's
// Workspace Trust turned off nothing is restricted, and pi's own decisions decide.
import * as vscode from "vscode";
import type { ArgsOf, CommandName, TrustState } from "./protocol";

/** Server commands that run a model or tools; refused in Restricted Mode. */
const RUNS_SOMETHING: ReadonlySet<CommandName> = new Set<CommandName>([
  "pi.prompt", "pi.branchWithSummary", "pi.compact",
]);

export const MANAGE_TRUST = "workbench.trust.manage";

/** False in Restricted Mode only: with Workspace Trust off VS Code reports every folder trusted. */
export function isTrusted(): boolean {
  return vscode.workspace.isTrusted !== false;
}

/** VS Code's decision for the server (`workspaceTrusted`): false in Restricted Mode, true for a
 *  workspace it trusts, none when Workspace Trust is off (that trusts every folder unasked). */
export function trustDecision(): boolean | undefined {
  const enabled = trustWasEnabled(); // read first: the first reading is the window's
  if (!isTrusted()) return false;
  return enabled ? true : undefined;
}

// VS Code decides a window's trust when it opens, with the setting as it was then: trust turned
// on later counts only after the restart it asks for (the web, code-server, does not even ask),
// and until then every folder is still "trusted" unasked.
let enabledAtStart: boolean | undefined;

/** Whether Workspace Trust was on when the window opened and still is. */
function trustWasEnabled(): boolean {
  // A user setting only (VS Code's scope "application"): read as such, a workspace never weighs.
  const enabled = vscode.workspace.getConfiguration("security.workspace.trust").inspect<boolean>("enabled");
  const now = (enabled?.globalValue ?? enabled?.defaultValue) !== false;
  enabledAtStart ??= now;
  return enabledAtStart && now;
}

/** Why `command` may not run now, or undefined when it may (a compaction plan only reads). */
export function restrictedReason<K extends CommandName>(command: K, args: ArgsOf<K>): string | undefined {
  if (isTrusted() || !RUNS_SOMETHING.has(command)) return undefined;
  if (command === "pi.compact" && (args as ArgsOf<"pi.compact">).dryRun) return undefined;
  return "this workspace is in Restricted Mode, where pi runs no turns, summaries or compaction; " +
    "trust the workspace to run them (pi: Trust This Folder…)";
}

/** A launch setting that points into the workspace runs the repository's own program. */
export function launchesFromWorkspace(values: unknown[]): boolean {
  return values.flat().some((v) => typeof v === "string" && v.includes("${workspaceFolder}"));
}

const DECISION: Record<TrustState["decision"], string> = {
  override: "decided for this process",
  restricted: "VS Code's Restricted Mode",
  session: "decided for this window only",
  saved: "saved in pi's trust.json",
  client: "VS Code trusts the workspace",
  default: "pi's defaultProjectTrust",
  undecided: "not decided yet",
  noProjectFiles: "nothing in .pi/ to load",
  error: "pi's trust.json cannot be read",
};

export function describe(state: TrustState): string {
  const what = state.projectFiles.length ? state.projectFiles.join(", ") : "no .pi/ files";
  const where = state.savedPath ? ` (${state.savedPath})` : "";
  return `${state.trusted ? "trusted" : "not trusted"}: ${DECISION[state.decision]}${where}; ${what}` +
    (state.error ? `. ${state.error}` : "");
}
