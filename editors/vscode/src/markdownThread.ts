// The worker thread that runs marked for the extension host (MarkdownWorker): a text in, its
// HTML out with the time marked took over it, one at a time.
import { parentPort } from "node:worker_threads";
import { markdown } from "./chatRender";
import type { Rendered } from "./markdownWorker";

parentPort?.on("message", (text: string) => {
  // Timed here, not by the host: the host's clock would count the worker's start-up and the
  // time the text waited behind other chats' texts.
  const start = performance.now();
  const html = markdown(text);
  parentPort?.postMessage({ html, ms: performance.now() - start } satisfies Rendered);
});
