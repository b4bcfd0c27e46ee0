// The worker thread that runs marked for the extension host (MarkdownWorker): a text in, its
// HTML out, one at a time.
import { parentPort } from "node:worker_threads";
import { markdown } from "./chatRender";

parentPort?.on("message", (text: string) => parentPort?.postMessage(markdown(text)));
