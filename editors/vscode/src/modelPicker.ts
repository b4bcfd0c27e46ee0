// Which model a session uses: the choices (settings and the server's list) and the picker.
import * as vscode from "vscode";
import type { PiClient } from "./client";
import { oneLine } from "./plainText";
import { ModelChoice, modelChoices, modelList, getter } from "./settings";

/** `piLsp.models`, then every model the server lists; the settings alone if it cannot answer. */
export async function availableModels(pi: PiClient): Promise<ModelChoice[]> {
  const listed = await pi.call("pi.listModels", {}).catch(() => ({ models: [] }));
  return modelList(modelChoices(getter()), listed.models);
}

/** A model as provider/id: the known ones (by name where they have one), the current one, or one typed in. */
export async function pickModel(pi: PiClient, current: string | null): Promise<string | undefined> {
  const models = await availableModels(pi);
  if (current && !models.some((m) => m.id === current)) models.unshift({ id: current });
  const other = "$(edit) Other…";
  type Item = vscode.QuickPickItem & { id?: string };
  const items: Item[] = [
    ...models.map((m) => ({
      // On one line: the current model is the session's (a model_change entry), the others models.json's.
      id: m.id, label: oneLine(m.name ?? m.id),
      description: [m.name ? oneLine(m.id) : "", m.id === current ? "current" : ""].filter(Boolean).join(" · ") || undefined,
    })),
    { label: other },
  ];
  const picked = await vscode.window.showQuickPick(items, { placeHolder: "Model for this session (from the next turn on)", matchOnDescription: true });
  if (!picked) return undefined;
  if (picked.id) return picked.id;
  return vscode.window.showInputBox({ prompt: "Model as provider/id", value: current ?? "anthropic/" });
}
