// The worker thread that runs marked for the extension host (MarkdownWorker): a text in, its
// HTML out with the time marked took over it, one at a time.
import { parentPort } from "node:worker_threads";
import { markdown } from "./chatRender";
import { THREAD_READY, type Rendered } from "./markdownWorker";

// marked's first text compiles its code: 56 ms for 20 characters (116 ms on a busy machine), which
// a chat's first text, or a streaming reply's first frame (a 50 ms limit), would be charged.
markdown("# a\n\n**b** *c* `d` [e](https://f.org)\n\n- g\n\n> h\n\n```\ni\n```\n\n| j |\n|---|\n| k |");

parentPort?.on("message", (text: string) => {
  // Timed here, not by the host: the host's clock would count the worker's start-up and the
  // time the text waited behind other chats' texts.
  const start = performance.now();
  const html = markdown(text);
  parentPort?.postMessage({ html, ms: performance.now() - start } satisfies Rendered);
});
parentPort?.postMessage(THREAD_READY);
