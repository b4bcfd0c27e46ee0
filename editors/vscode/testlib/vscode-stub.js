// A stand-in for the `vscode` module, enough for vscode-languageclient/node and this extension
// to run in plain Node (reference/stack.md §8.2). What the extension creates (commands, tree
// views, webviews, documents, messages) is recorded in `__test` for the tests to inspect, and
// user answers (quick picks, input boxes, message buttons) are scripted with `__test.respond`.
// Unknown members fall back to a permissive proxy, because the language client touches many.
"use strict";
const fs = require("node:fs");
const { EventEmitter: NodeEE } = require("node:events");
const { URI, Utils } = require("vscode-uri");

function deep(name) {
  const fn = function () { return deep(name + "()"); };
  return new Proxy(fn, {
    get(t, p) {
      if (p === "then") return undefined; // not a thenable
      if (p === Symbol.toPrimitive) return () => name;
      if (p === "dispose") return () => {};
      if (!(p in t)) t[p] = deep(name + "." + String(p));
      return t[p];
    },
    construct() { return deep("new " + name); },
    apply() { return deep(name + "()"); },
  });
}

class Disposable {
  constructor(fn) { this._fn = fn; }
  static from(...d) { return new Disposable(() => d.forEach((x) => x && x.dispose && x.dispose())); }
  dispose() { if (this._fn) this._fn(); this._fn = undefined; }
}
class EventEmitter {
  constructor() {
    this._e = new NodeEE();
    this._e.setMaxListeners(100);
    this.event = (listener, thisArg) => {
      const l = thisArg ? listener.bind(thisArg) : listener;
      this._e.on("x", l);
      return new Disposable(() => this._e.off("x", l));
    };
  }
  fire(v) { this._e.emit("x", v); }
  dispose() { this._e.removeAllListeners(); }
}
class CancellationTokenSource {
  constructor() { this.token = { isCancellationRequested: false, onCancellationRequested: () => new Disposable() }; }
  cancel() { this.token.isCancellationRequested = true; }
  dispose() {}
}
class TreeItem { constructor(label, collapsibleState = 0) { this.label = label; this.collapsibleState = collapsibleState; } }
class ThemeIcon { constructor(id, color) { this.id = id; this.color = color; } }
class ThemeColor { constructor(id) { this.id = id; } }
class MarkdownString {
  constructor(value = "") { this.value = value; }
  appendMarkdown(s) { this.value += s; return this; }
  appendText(s) { this.value += s; return this; }
}
class Position {
  constructor(line, character) { this.line = line; this.character = character; }
}
class Range {
  constructor(start, end) { this.start = start; this.end = end; }
  get isEmpty() { return this.start.line === this.end.line && this.start.character === this.end.character; }
}
class CodeLens {
  constructor(range, command) { this.range = range; this.command = command; }
}
class Selection extends Range {
  constructor(anchor, active) { super(anchor, active); this.anchor = anchor; this.active = active; }
}
// vscode-uri is VS Code's own URI code; joinPath lives in Utils there.
const Uri = URI;
Uri.joinPath = (base, ...parts) => Utils.joinPath(base, ...parts);

const noopEvent = () => new Disposable();
const rec = {
  output: [],
  messages: [], // {kind, message, items}
  commands: new Map(),
  executed: [], // {id, args} for built-in commands (vscode.diff, ...)
  treeViews: new Map(),
  treeProviders: new Map(),
  contentProviders: new Map(),
  panels: [],
  statusItems: [],
  shown: [], // documents passed to showTextDocument
  progress: [], // {options, done, reports}: withProgress calls, done once their task has settled
  config: new Map(), // "piLsp.key" -> value, in the user's settings
  workspaceConfig: new Map(), // "piLsp.key" -> value, in the workspace's .vscode/settings.json
  responders: new Map(), // "showQuickPick" -> fn
  codeLensProviders: [], // {selector, provider}
};

function respond(kind, items, ...rest) {
  const fn = rec.responders.get(kind);
  return Promise.resolve(fn ? fn(items, ...rest) : undefined);
}

const configEmitter = new EventEmitter();
const diagnostics = new Map(); // uri string -> vscode.Diagnostic-like objects
const diagnosticsEmitter = new EventEmitter();
const activeEditorEmitter = new EventEmitter();
const trustEmitter = new EventEmitter();
const closeEmitter = new EventEmitter();

// Settings not set by a test have the defaults the extension's package.json declares. As in
// VS Code, get() gives the workspace's value over the user's; unlike VS Code it ignores a
// setting's scope, so a test shows the extension itself ignores a workspace's value.
const declared = require("../package.json").contributes.configuration.properties;
// VS Code's own settings that the extension reads, with VS Code's defaults.
const builtIn = { "security.workspace.trust.enabled": { default: true } };

function getConfiguration(section) {
  const full = (key) => (section ? `${section}.${key}` : key);
  const defaultValue = (key) => (declared[full(key)] ?? builtIn[full(key)])?.default;
  return {
    get: (key, dflt) => {
      for (const values of [rec.workspaceConfig, rec.config]) if (values.has(full(key))) return values.get(full(key));
      const d = defaultValue(key);
      return d !== undefined && d !== null ? d : dflt;
    },
    has: (key) => rec.workspaceConfig.has(full(key)) || rec.config.has(full(key)),
    inspect: (key) => ({
      key: full(key),
      defaultValue: defaultValue(key),
      globalValue: rec.config.get(full(key)),
      workspaceValue: rec.workspaceConfig.get(full(key)),
    }),
    update: async (key, value) => setConfig(full(key), value),
  };
}
/** A user setting, or with `target` "workspace" the workspace's; undefined removes it. */
function setConfig(key, value, target = "global") {
  const values = target === "workspace" ? rec.workspaceConfig : rec.config;
  if (value === undefined) values.delete(key);
  else values.set(key, value);
  configEmitter.fire({ affectsConfiguration: (s) => key === s || key.startsWith(s + ".") });
}

const textDocuments = [];
function makeDocument(uri, text) {
  const lines = text.split("\n");
  const offset = (p) => lines.slice(0, p.line).reduce((n, l) => n + l.length + 1, 0) + p.character;
  return {
    uri, languageId: uri.path.endsWith(".md") ? "markdown" : uri.path.endsWith(".py") ? "python" : "plaintext", isClosed: false, lineCount: lines.length,
    getText: (range) => (range ? text.slice(offset(range.start), offset(range.end)) : text),
    lineAt: (line) => ({ text: lines[line], range: new Range(new Position(line, 0), new Position(line, lines[line].length)) }),
  };
}
async function openTextDocument(uriOrPath) {
  const uri = typeof uriOrPath === "string" ? Uri.file(uriOrPath) : uriOrPath;
  const provider = rec.contentProviders.get(uri.scheme);
  const text = provider ? await provider.provideTextDocumentContent(uri, new CancellationTokenSource().token) : fs.readFileSync(uri.fsPath, "utf8");
  const doc = makeDocument(uri, text);
  const i = textDocuments.findIndex((d) => d.uri.toString() === uri.toString());
  if (i >= 0) textDocuments.splice(i, 1, doc);
  else textDocuments.push(doc);
  return doc;
}

function createWebviewPanel(viewType, title, column, options) {
  const received = new EventEmitter();
  const disposed = new EventEmitter();
  const viewState = new EventEmitter();
  // Beside opens a new column right of the last one; a number is that column.
  const viewColumn = column === -2 ? Math.max(1, ...rec.panels.filter((p) => !p.disposed).map((p) => p.viewColumn)) + 1 : column;
  const panel = {
    viewType, title, options, active: true, visible: true, iconPath: undefined, viewColumn,
    posted: [],
    webview: {
      html: "", options, cspSource: "vscode-resource:",
      asWebviewUri: (u) => u,
      postMessage: async (m) => { panel.posted.push(m); return true; },
      onDidReceiveMessage: received.event,
    },
    reveal(col) { panel.active = true; if (col !== undefined) panel.viewColumn = col; },
    onDidDispose: disposed.event,
    onDidChangeViewState: viewState.event,
    dispose() { disposed.fire(); panel.disposed = true; },
    // Test side: what the webview script would send.
    __receive: (m) => received.fire(m),
    /** Test side: the user brings the panel to the front (or another one covers it). */
    __setActive: (active) => { panel.active = active; viewState.fire({ webviewPanel: panel }); },
  };
  rec.panels.push(panel);
  return panel;
}

function message(kind, api) {
  return async (msg, ...items) => {
    rec.messages.push({ kind, message: msg, items });
    rec.output.push(`${kind.toUpperCase()} ${msg}`);
    return respond(api, msg, ...items);
  };
}

const base = {
  Disposable, EventEmitter, CancellationTokenSource, TreeItem, ThemeIcon, ThemeColor, MarkdownString, Uri, Position, Range, Selection, CodeLens,
  DiagnosticSeverity: { Error: 0, Warning: 1, Information: 2, Hint: 3 },
  TreeItemCollapsibleState: { None: 0, Collapsed: 1, Expanded: 2 },
  StatusBarAlignment: { Left: 1, Right: 2 },
  ViewColumn: { Active: -1, Beside: -2, One: 1, Two: 2 },
  ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
  version: "1.90.0",
  env: { language: "en", appName: "fake-vscode", machineId: "x", sessionId: "y", uiKind: 1, openExternal: async () => true },
  workspace: {
    workspaceFolders: undefined, textDocuments, notebookDocuments: [],
    // A window VS Code trusts (every one while security.workspace.trust.enabled is false);
    // `__test.setTrusted(false)` is Restricted Mode.
    isTrusted: true,
    onDidGrantWorkspaceTrust: trustEmitter.event,
    getConfiguration,
    onDidChangeConfiguration: configEmitter.event,
    registerTextDocumentContentProvider: (scheme, provider) => {
      rec.contentProviders.set(scheme, provider);
      return new Disposable(() => rec.contentProviders.delete(scheme));
    },
    openTextDocument,
    asRelativePath: (u) => {
      const p = typeof u === "string" ? u : u.fsPath;
      const folder = (base.workspace.workspaceFolders ?? []).find((f) => p.startsWith(f.uri.fsPath + "/"));
      return folder ? p.slice(folder.uri.fsPath.length + 1) : p;
    },
    onDidOpenTextDocument: noopEvent, onDidCloseTextDocument: closeEmitter.event,
    onDidChangeTextDocument: noopEvent, onDidSaveTextDocument: noopEvent, onWillSaveTextDocument: noopEvent,
    onDidChangeWorkspaceFolders: noopEvent, onDidCreateFiles: noopEvent, onDidRenameFiles: noopEvent, onDidDeleteFiles: noopEvent,
    onWillCreateFiles: noopEvent, onWillRenameFiles: noopEvent, onWillDeleteFiles: noopEvent,
    onDidOpenNotebookDocument: noopEvent, onDidCloseNotebookDocument: noopEvent, onDidChangeNotebookDocument: noopEvent, onDidSaveNotebookDocument: noopEvent,
    createFileSystemWatcher: () => ({ onDidCreate: noopEvent, onDidChange: noopEvent, onDidDelete: noopEvent, dispose() {} }),
  },
  window: {
    createOutputChannel: (name) => ({
      name, append: (s) => rec.output.push(s), appendLine: (s) => rec.output.push(s), replace() {}, clear() {}, show() {}, hide() {}, dispose() {},
      trace() {}, debug() {}, info: (s) => rec.output.push(s), warn: (s) => rec.output.push(s), error: (s) => rec.output.push(s), logLevel: 2, onDidChangeLogLevel: noopEvent,
    }),
    showInformationMessage: message("info", "showInformationMessage"),
    showWarningMessage: message("warning", "showWarningMessage"),
    showErrorMessage: message("error", "showErrorMessage"),
    showQuickPick: async (items, options) => respond("showQuickPick", await items, options),
    showInputBox: async (options) => respond("showInputBox", options),
    showTextDocument: async (docOrUri, options) => {
      const doc = docOrUri && docOrUri.getText ? docOrUri : await openTextDocument(docOrUri);
      rec.shown.push(doc);
      return { document: doc, options };
    },
    withProgress: async (opts, task) => {
      const entry = { options: opts, done: false, reports: [] };
      rec.progress.push(entry);
      try {
        return await task({ report: (value) => entry.reports.push(value) }, new CancellationTokenSource().token);
      } finally {
        entry.done = true; // VS Code closes a progress notification when its task settles
      }
    },
    createTreeView: (id, options) => {
      const selection = new EventEmitter();
      const view = { id, options, selection: [], onDidChangeSelection: selection.event, onDidExpandElement: noopEvent, onDidCollapseElement: noopEvent,
        onDidChangeVisibility: noopEvent, reveal: async () => {}, dispose() {}, __select: (items) => { view.selection = items; selection.fire({ selection: items }); } };
      rec.treeViews.set(id, view);
      rec.treeProviders.set(id, options.treeDataProvider);
      return view;
    },
    registerTreeDataProvider: (id, provider) => { rec.treeProviders.set(id, provider); return new Disposable(() => rec.treeProviders.delete(id)); },
    createStatusBarItem: (id, alignment, priority) => {
      const item = { id, alignment, priority, text: "", tooltip: undefined, visible: false, show() { item.visible = true; }, hide() { item.visible = false; }, dispose() {} };
      rec.statusItems.push(item);
      return item;
    },
    createWebviewPanel,
    activeTextEditor: undefined, visibleTextEditors: [], visibleNotebookEditors: [], tabGroups: { all: [], close: async () => true },
    onDidChangeActiveTextEditor: activeEditorEmitter.event, onDidChangeVisibleTextEditors: noopEvent, onDidChangeVisibleNotebookEditors: noopEvent,
    onDidChangeTextEditorSelection: noopEvent, onDidChangeWindowState: noopEvent,
  },
  languages: new Proxy({
    getDiagnostics: (uri) => diagnostics.get(uri.toString()) ?? [],
    registerCodeLensProvider: (selector, provider) => {
      const entry = { selector, provider };
      rec.codeLensProviders.push(entry);
      return new Disposable(() => rec.codeLensProviders.splice(rec.codeLensProviders.indexOf(entry), 1));
    },
    onDidChangeDiagnostics: diagnosticsEmitter.event,
  }, { get: (t, p) => (p in t ? t[p] : p === "match" ? () => 0 : p === "createDiagnosticCollection" ? () => ({ set() {}, delete() {}, clear() {}, dispose() {}, forEach() {} }) : () => new Disposable()) }),
  commands: {
    registerCommand: (id, fn) => {
      if (rec.commands.has(id)) throw new Error(`command '${id}' already exists`);
      rec.commands.set(id, fn);
      return new Disposable(() => rec.commands.delete(id));
    },
    executeCommand: async (id, ...args) => {
      const fn = rec.commands.get(id);
      if (fn) return fn(...args);
      rec.executed.push({ id, args });
      return undefined;
    },
    getCommands: async () => [...rec.commands.keys()],
  },
  extensions: { getExtension: () => undefined, all: [], onDidChange: noopEvent },
  __test: {
    ...rec,
    rec,
    setConfig,
    respond: (kind, fn) => (fn ? rec.responders.set(kind, fn) : rec.responders.delete(kind)),
    /** An editor in front: its text (unsaved, as typed) and selection [line, char, line, char]. */
    setActiveEditor: (uri, text = "", sel = [0, 0, 0, 0]) => {
      const selection = new Selection(new Position(sel[0], sel[1]), new Position(sel[2], sel[3]));
      base.window.activeTextEditor = uri ? { document: makeDocument(uri, text), selection } : undefined;
      activeEditorEmitter.fire(base.window.activeTextEditor);
    },
    /** What a language server reports for a file, as VS Code would announce it. */
    setDiagnostics: (uri, items) => {
      diagnostics.set(uri.toString(), items);
      diagnosticsEmitter.fire({ uris: [uri] });
    },
    /** The links of a notification's text, found as VS Code's notifications find them. */
    links: (text) => [...text.matchAll(/\[([^\]]+)\]\(((?:https?:\/\/|command:|file:)[^)\s]+)(?: (["'])(.+?)(\3))?\)/gi)]
      .map((m) => ({ text: m[1], href: m[2] })),
    /** A click on a `command:` link: the command runs with the JSON arguments in its query. */
    click: (href) => {
      const [, id, query] = /^command:([^?]+)(?:\?(.*))?$/.exec(href);
      const args = query ? JSON.parse(decodeURIComponent(query)) : [];
      return base.commands.executeCommand(id, ...(Array.isArray(args) ? args : [args]));
    },
    /** The user closes a document (its last editor): it leaves textDocuments, then onDidCloseTextDocument. */
    closeDocument: (uri) => {
      const i = textDocuments.findIndex((d) => d.uri.toString() === uri.toString());
      const [doc] = textDocuments.splice(i, 1);
      doc.isClosed = true;
      closeEmitter.fire(doc);
    },
    /** Restricted Mode (false), or the user granting trust (true: onDidGrantWorkspaceTrust). */
    setTrusted: (trusted) => {
      base.workspace.isTrusted = trusted;
      if (trusted) trustEmitter.fire();
    },
    /** Clears what was recorded (not the registrations). */
    reset: () => { rec.output.length = 0; rec.messages.length = 0; rec.executed.length = 0; rec.shown.length = 0; rec.responders.clear(); },
  },
};
module.exports = new Proxy(base, { get: (t, p) => (p in t ? t[p] : (t[p] = deep("vscode." + String(p)))) });
