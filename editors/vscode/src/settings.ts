// Settings: which of them start the server, and which the server itself reads.
// The server's Config forbids unknown fields, so only SERVER_KEYS are ever sent to it.
import * as vscode from "vscode";

export const SECTION = "piLsp";

/** The server's `Config` fields (pi_lsp/server/hub.py), all optional. */
export const SERVER_KEYS = [
  "sessionDirs",
  "model",
  "summaryModel",
  "thinkingLevel",
  "toolApproval",
  "durableLeafMoves",
  "autoCompaction",
  "anthropicBaseUrl",
  "diagnosticsFeedback",
] as const;

/** Settings that change how the server process is started (a change restarts it). */
export const LAUNCH_KEYS = ["command", "pythonPath"] as const;

/**
 * Settings that start a program, choose where requests and the key go, widen what runs without
 * asking, or choose where session files are read and written. A cloned repository's
 * .vscode/settings.json must not set them, and VS Code applies workspace values in any workspace
 * it trusts, whatever pi's own trust store says; so they are read from the user's settings only.
 * package.json gives them "scope": "machine" too (a test keeps the two lists equal).
 */
export const USER_ONLY_KEYS: ReadonlySet<string> = new Set([
  ...LAUNCH_KEYS,
  "model",
  "summaryModel",
  "toolApproval",
  "sessionDirs",
  "anthropicBaseUrl",
]);

export type Getter = (key: string) => unknown;

export function getter(scope?: vscode.Uri): Getter {
  const config = vscode.workspace.getConfiguration(SECTION, scope);
  return (key) => {
    if (!USER_ONLY_KEYS.has(key)) return config.get(key);
    // get() merges in workspace and folder values; the scope in package.json alone is only
    // as good as VS Code's handling of it, so a workspace's value is never even looked at.
    const values = config.inspect(key);
    return values?.globalValue ?? values?.defaultValue;
  };
}

/** What goes in initializationOptions and didChangeConfiguration: set values only, and
 *  whether VS Code trusts the workspace (false: Restricted Mode; none: it did not decide). */
export function serverSettings(get: Getter, apiKey?: string, trusted?: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of SERVER_KEYS) {
    const value = get(key);
    // Empty strings and nulls mean "not set": the server then uses its settings files.
    if (value === undefined || value === null || value === "") continue;
    out[key] = value;
  }
  if (apiKey) out.anthropicApiKey = apiKey;
  if (trusted !== undefined) out.workspaceTrusted = trusted;
  return out;
}

export interface Launch {
  command: string;
  args: string[];
}

/** `piLsp.command`, else `PYTHON -P -m pi_lsp.cli serve` with `piLsp.pythonPath`, else `pi-lsp serve`. */
export function serverLaunch(get: Getter, workspaceFolder?: string): Launch {
  const expand = (s: string) => (workspaceFolder ? s.split("${workspaceFolder}").join(workspaceFolder) : s);
  const command = get("command");
  if (Array.isArray(command) && command.length > 0 && command.every((c) => typeof c === "string")) {
    const [head, ...rest] = (command as string[]).map(expand);
    return { command: head, args: rest };
  }
  const python = get("pythonPath");
  if (typeof python === "string" && python.trim()) {
    // -P: `-m` would put the working directory first on sys.path, where a repository's own
    // `pi_lsp/` package would be imported instead of ours.
    return { command: expand(python.trim()), args: ["-P", "-m", "pi_lsp.cli", "serve"] };
  }
  return { command: "pi-lsp", args: ["serve"] };
}

export function modelChoices(get: Getter): string[] {
  const models = get("models");
  return Array.isArray(models) ? models.filter((m): m is string => typeof m === "string") : [];
}

/** A model to offer: `provider/id`, and the name the server knows it by when that says more. */
export interface ModelChoice {
  id: string;
  name?: string;
}

/**
 * The configured models first, then the ones the server lists (built in and from pi's
 * models.json), each once, with models.json's `name` where it has one.
 */
export function modelList(configured: string[], listed: { provider: string; id: string; name?: string }[]): ModelChoice[] {
  const names = new Map(listed.map((m) => [`${m.provider}/${m.id}`, m.name && m.name !== m.id ? m.name : undefined]));
  return [...new Set([...configured, ...names.keys()])].map((id) => {
    const name = names.get(id);
    return name ? { id, name } : { id };
  });
}
