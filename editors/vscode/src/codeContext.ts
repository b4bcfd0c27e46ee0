// Code sent with a prompt: the selection or the whole file, with the editor's (unsaved) text,
// and the editor's diagnostics for the files a turn changed (answers `pi/diagnostics`).
import * as vscode from "vscode";
import { CodeContext, DiagnosticItem, DiagnosticsParams, DiagnosticsResult } from "./protocol";

export interface Attachment {
  context: CodeContext;
  label: string;
}

/** The selection (whole lines when it is empty: the current line) of an editor. */
export function selectionAttachment(editor: vscode.TextEditor): Attachment {
  const doc = editor.document;
  const sel = editor.selection;
  const range = sel.isEmpty ? doc.lineAt(sel.active.line).range : new vscode.Range(sel.start, sel.end);
  const lastLine = range.end.character === 0 && range.end.line > range.start.line ? range.end.line - 1 : range.end.line;
  const lines = range.start.line === lastLine ? `${range.start.line + 1}` : `${range.start.line + 1}-${lastLine + 1}`;
  return {
    context: {
      uri: doc.uri.toString(), text: doc.getText(range), languageId: doc.languageId,
      range: { start: { line: range.start.line, character: range.start.character }, end: { line: range.end.line, character: range.end.character } },
    },
    label: `${vscode.workspace.asRelativePath(doc.uri)}:${lines}`,
  };
}

/** The whole document, as the editor has it (saved or not). */
export function fileAttachment(doc: vscode.TextDocument): Attachment {
  return {
    context: { uri: doc.uri.toString(), text: doc.getText(), languageId: doc.languageId },
    label: vscode.workspace.asRelativePath(doc.uri),
  };
}

/** vscode's severities count from Error = 0; LSP's from Error = 1. */
export function toItems(diagnostics: readonly vscode.Diagnostic[]): DiagnosticItem[] {
  return diagnostics.map((d) => ({
    range: { start: { line: d.range.start.line, character: d.range.start.character }, end: { line: d.range.end.line, character: d.range.end.character } },
    severity: d.severity + 1,
    message: d.message,
    ...(d.source ? { source: d.source } : {}),
  }));
}

/**
 * The diagnostics of the files. Language servers check a change a moment after it lands, so
 * when one of the files is open this waits (at most `settleMs`) for news about it first.
 */
export async function editorDiagnostics(params: DiagnosticsParams, settleMs = 1000): Promise<DiagnosticsResult> {
  const uris = params.uris.map((u) => vscode.Uri.parse(u));
  const wanted = new Set(uris.map((u) => u.toString()));
  const open = vscode.workspace.textDocuments.some((d) => wanted.has(d.uri.toString()));
  if (open) await new Promise<void>((done) => {
    const timer = setTimeout(finish, settleMs);
    const listener = vscode.languages.onDidChangeDiagnostics((e) => {
      if (e.uris.some((u) => wanted.has(u.toString()))) {
        clearTimeout(timer);
        setTimeout(finish, 100); // the rest of a burst
      }
    });
    let finished = false;
    function finish(): void {
      if (finished) return;
      finished = true;
      listener.dispose();
      done();
    }
  });
  return { diagnostics: uris.map((u) => ({ uri: u.toString(), items: toItems(vscode.languages.getDiagnostics(u)) })) };
}
