// Context previews as read-only virtual documents on the `pi-context:` scheme. The text is
// pi.previewContext's markdown, made by the same code that builds the model request: paged, the
// first and last messages (a long context shows its end at once), more on "Show More of the Context".
import * as vscode from "vscode";
import type { PiClient } from "./client";
import { shorten } from "./plainText";
import { Layer, PreviewHeading, SessionMove } from "./protocol";

export const SCHEME = "pi-context";
/** Messages shown from each end of a context at first; each "more" adds as many. */
export const PREVIEW_PAGE = 50;

export interface ContextTarget {
  session: string;
  /** Absent: the session's current leaf (the document follows it). */
  leafId?: string;
  layer: Layer;
}

/** The document's path is only its title; what to show travels in the query. The session wrote
 * the leaf's id: the title shows it on one line and cut (`shorten`). */
export function contextUri(target: ContextTarget, title: string): vscode.Uri {
  const query = new URLSearchParams({ session: target.session, layer: target.layer });
  if (target.leafId) query.set("leaf", target.leafId);
  const name = `${title}${target.leafId ? ` @ ${shorten(target.leafId)}` : ""}${target.layer === "agent" ? "" : ` (${target.layer})`}`;
  return vscode.Uri.from({ scheme: SCHEME, path: `/${name.replace(/[/\\]/g, "-")}.md`, query: query.toString() });
}

/** Open previews whose session moved to a new file (their uri cannot change): that file. */
const followed = new Map<string, string>();

export function parseContextUri(uri: vscode.Uri): ContextTarget {
  const query = new URLSearchParams(uri.query);
  const layer = query.get("layer");
  return {
    session: followed.get(uri.toString()) ?? query.get("session") ?? "",
    leafId: query.get("leaf") ?? undefined,
    layer: layer === "llm" || layer === "request" ? layer : "agent",
  };
}

export class ContextProvider implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [this.changed];
  private readonly pages = new Map<string, number>(); // per document: messages from each end
  private readonly headings = new Map<string, PreviewHeading[]>(); // per document: as last shown

  constructor(private readonly pi: PiClient, onDidMove: vscode.Event<SessionMove>) {
    // Only previews of the current leaf change: an entry's own context never does (append-only).
    this.disposables.push(pi.onSessionChanged((e) => this.refresh(e.uri)), onDidMove((move) => this.follow(move)),
      // A preview opened again starts afresh: on the file cut short it is that file's (a session
      // of its own), and it shows the first page, not the pages the closed one was shown.
      vscode.workspace.onDidCloseTextDocument((doc) => {
        followed.delete(doc.uri.toString());
        this.pages.delete(doc.uri.toString());
        this.headings.delete(doc.uri.toString());
      }));
  }

  /** Previews open on a session that moved to a new file show (and edit) that file from now on. */
  private follow(move: SessionMove): void {
    const from = vscode.Uri.parse(move.from).fsPath;
    for (const doc of vscode.workspace.textDocuments) {
      if (doc.uri.scheme !== SCHEME || vscode.Uri.parse(parseContextUri(doc.uri).session).fsPath !== from) continue;
      followed.set(doc.uri.toString(), move.to);
      this.changed.fire(doc.uri);
    }
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const target = parseContextUri(uri);
    try {
      const preview = await this.pi.call("pi.previewContext", {
        uri: target.session,
        layer: target.layer,
        page: this.pages.get(uri.toString()) ?? PREVIEW_PAGE,
        ...(target.leafId ? { leafId: target.leafId } : {}),
      });
      this.headings.set(uri.toString(), preview.headings ?? []);
      return preview.markdown;
    } catch (error) {
      this.headings.set(uri.toString(), []);
      return `# No preview\n\n${error instanceof Error ? error.message : String(error)}\n`;
    }
  }

  /** Where the server says the messages of a preview document are headed (none before it is shown). */
  headingsOf(uri: vscode.Uri): PreviewHeading[] {
    return this.headings.get(uri.toString()) ?? [];
  }

  /** Show more of a preview: as many messages again from each end. */
  more(uri: vscode.Uri): void {
    this.pages.set(uri.toString(), (this.pages.get(uri.toString()) ?? PREVIEW_PAGE) + PREVIEW_PAGE);
    this.changed.fire(uri);
  }

  refresh(session: string): void {
    const key = vscode.Uri.parse(session).fsPath;
    for (const doc of vscode.workspace.textDocuments) {
      if (doc.uri.scheme !== SCHEME) continue;
      const target = parseContextUri(doc.uri);
      if (!target.leafId && vscode.Uri.parse(target.session).fsPath === key) this.changed.fire(doc.uri);
    }
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
