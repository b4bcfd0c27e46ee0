// `require("vscode")` resolves to the stand-in, for the language client and the bundle alike.
"use strict";
const Module = require("node:module");
const path = require("node:path");
const original = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === "vscode") return path.join(__dirname, "vscode-stub.js");
  return original.call(this, request, ...rest);
};
