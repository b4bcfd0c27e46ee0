// The status bar: tokens in context / the model's window for the session commands default to.
import * as vscode from "vscode";
import type { PiClient } from "./client";
import { oneLine } from "./plainText";
import { sameSession, Sessions } from "./sessions";

export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 100_000) return `${(n / 1000).toFixed(1).replace(/\.0$/, "")}k`;
  return `${Math.round(n / 1000)}k`;
}

export class StatusBar implements vscode.Disposable {
  readonly item: vscode.StatusBarItem;
  private readonly disposables: vscode.Disposable[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private shown: string | undefined;
  /** Resolves when the pending update has been drawn (tests wait on it). */
  settled: Promise<void> = Promise.resolve();
  private drawn: (() => void) | undefined;

  constructor(private readonly pi: PiClient, private readonly sessions: Sessions) {
    this.item = vscode.window.createStatusBarItem("piLsp.tokens", vscode.StatusBarAlignment.Right, 100);
    this.item.name = "pi context";
    this.item.command = "piLsp.previewContext";
    this.disposables.push(
      this.item,
      sessions.onDidChangeCurrent(() => this.schedule()),
      pi.onSessionsChanged(() => this.schedule()),
      pi.onStarted(() => this.schedule()),
      pi.onSessionChanged((e) => {
        if (this.shown === undefined || sameSession(e.uri, this.shown)) this.schedule();
      }),
    );
  }

  /** Coalesced: a running turn changes the session many times a second. A `settled` already
   *  handed out resolves with the update that replaces its own (it was left pending for ever). */
  schedule(delay = 250): void {
    clearTimeout(this.timer);
    if (!this.drawn) this.settled = new Promise((done) => { this.drawn = done; });
    this.timer = setTimeout(() => {
      const drawn = this.drawn;
      this.drawn = undefined;
      void this.update().finally(drawn);
    }, delay);
  }

  async update(): Promise<void> {
    const uri = await this.sessions.resolve(undefined, { ask: false });
    this.shown = uri;
    if (!uri) {
      this.item.hide();
      return;
    }
    try {
      const [preview, info] = await Promise.all([
        this.pi.call("pi.previewContext", { uri, page: 1 }), // the totals, not the messages
        this.sessions.info(uri).catch(() => undefined),
      ]);
      const share = preview.contextWindow ? preview.totalTokens / preview.contextWindow : 0;
      this.item.text = `$(comment-discussion) ${formatTokens(preview.totalTokens)} / ${formatTokens(preview.contextWindow)}`;
      this.item.tooltip = `${Sessions.title(info, uri)}\n${oneLine(preview.model ?? "no model")} · thinking ${preview.thinkingLevel}\n` +
        `${preview.totalTokens} of ${preview.contextWindow} tokens (${Math.round(share * 100)}%) — click to preview the context`;
      // Warn near the window, where auto-compaction is about to kick in.
      this.item.backgroundColor = share >= 0.8 ? new vscode.ThemeColor("statusBarItem.warningBackground") : undefined;
      this.item.show();
    } catch {
      this.item.hide();
    }
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.drawn?.();
    for (const d of this.disposables) d.dispose();
  }
}
