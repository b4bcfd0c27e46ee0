// Three bundles: the extension (Node, `vscode` left external), the worker thread it runs marked
// in, and the chat webview (browser).
// `--production` minifies and drops source maps, for `npm run package`.
import * as esbuild from "esbuild";

const production = process.argv.includes("--production");
const common = { bundle: true, minify: production, sourcemap: !production, logLevel: "warning" };

await Promise.all([
  esbuild.build({
    ...common,
    entryPoints: ["src/extension.ts"],
    outfile: "out/extension.js",
    platform: "node",
    format: "cjs",
    target: "node20",
    external: ["vscode"],
  }),
  esbuild.build({
    ...common,
    entryPoints: ["src/markdownThread.ts"],
    outfile: "out/markdownThread.js",
    platform: "node",
    format: "cjs",
    target: "node20",
  }),
  esbuild.build({
    ...common,
    entryPoints: ["src/webview/main.ts"],
    outfile: "out/webview.js",
    platform: "browser",
    format: "iife",
    target: "es2022",
  }),
]);
