// A fake vscode.ExtensionContext: mementos and secret storage in memory.
"use strict";
const path = require("node:path");
const vscode = require("vscode");

function memento() {
  const m = new Map();
  return { get: (k, d) => (m.has(k) ? m.get(k) : d), update: async (k, v) => { m.set(k, v); }, keys: () => [...m.keys()] };
}

function makeContext(secrets = {}) {
  const store = new Map(Object.entries(secrets));
  const changed = new vscode.EventEmitter();
  const root = path.resolve(__dirname, "..");
  return {
    subscriptions: [],
    workspaceState: memento(),
    globalState: memento(),
    extensionPath: root,
    extensionUri: vscode.Uri.file(root),
    secrets: {
      get: async (k) => store.get(k),
      store: async (k, v) => { store.set(k, v); changed.fire({ key: k }); },
      delete: async (k) => { store.delete(k); changed.fire({ key: k }); },
      onDidChange: changed.event,
    },
  };
}

function disposeAll(context) {
  for (const d of context.subscriptions.splice(0).reverse()) {
    try { d.dispose(); } catch { /* already gone */ }
  }
}

module.exports = { makeContext, disposeAll };
