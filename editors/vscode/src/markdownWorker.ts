// marked in a worker thread, with a time limit. Session files are hostile input, and marked is
// quadratic in a paragraph's length on some of it: 49,999 characters of `*a_` took it 28 s, all
// that time blocking the extension host. In a worker the host goes on; past the limit the text
// is shown as plain text and the worker, which would go on parsing, is replaced.
import * as path from "node:path";
import { Worker } from "node:worker_threads";

/** The worker's script: the bundle built beside the extension's. */
export const WORKER_SCRIPT = path.join(__dirname, "markdownThread.js");

// The longest marked may take over one text. The slowest text of models' kind known to it
// (`*a` repeated, 49,999 characters) takes it 0.6 s, up to 1.2 s on a busy machine.
export const MARKDOWN_TIME_LIMIT_MS = 2_000;

/** What the thread posts once marked is loaded and warm, before it answers any text. */
export const THREAD_READY = "ready";

/** A text's HTML (undefined when marked took past the limit or the worker died) and the ms spent on it. */
export interface Rendered {
  html: string | undefined;
  ms: number;
}

/** The clock the time limit runs on (tests move their own). */
export interface Clock {
  now(): number;
  /** Calls `fn` in `ms`; returns what cancels that. */
  after(ms: number, fn: () => void): () => void;
}

const REAL_CLOCK: Clock = {
  now: () => performance.now(),
  after: (ms, fn) => {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
};

/** A worker thread, and when it is ready for texts. */
interface Thread {
  worker: Worker;
  ready: Promise<void>;
}

export class MarkdownWorker {
  private thread: Thread | undefined;
  /** The texts asked for, in order: the worker parses one at a time. */
  private queue: Promise<unknown> = Promise.resolve();
  /** Whether a worker thread is running (tests wait for it to end). */
  alive = false;
  private disposed = false;

  constructor(
    private readonly limitMs = MARKDOWN_TIME_LIMIT_MS,
    private readonly script = WORKER_SCRIPT,
    /** The clock its time limit runs on: tests give the chats' shared worker one of their own. */
    public clock = REAL_CLOCK,
  ) {}

  /** `text` as marked renders it, with the time marked took over it alone (not its wait in the queue). */
  render(text: string): Promise<Rendered> {
    const html = this.queue.then(() => this.parse(text));
    this.queue = html.catch(() => undefined); // one failure must not fail every text after it
    return html;
  }

  dispose(): void {
    this.disposed = true;
    this.stop();
  }

  private parse(text: string): Promise<Rendered> {
    // A chat's render still queued when the extension ends must not start a worker again.
    if (this.disposed) return Promise.resolve({ html: undefined, ms: 0 });
    const { worker, ready } = this.thread ??= this.spawn();
    return new Promise((resolve) => {
      let started: number | undefined;
      let cancel = (): void => undefined;
      let settled = false;
      const answer = (message: Rendered | typeof THREAD_READY) => message === THREAD_READY || done(message);
      const done = (rendered: Rendered) => {
        settled = true;
        cancel();
        worker.off("message", answer).off("exit", failed);
        resolve(rendered);
      };
      // The worker cannot report the time it took on a text it did not finish: charge the time since it was ready for it.
      const failed = () => done({ html: undefined, ms: started === undefined ? 0 : this.clock.now() - started });
      // The limit runs once the thread is ready: its start-up (0.2 s, over 2 s on a busy machine)
      // is not marked's time over this text, and drew a chat's first text plain.
      void ready.then(() => {
        if (settled) return;
        started = this.clock.now();
        cancel = this.clock.after(this.limitMs, () => {
          this.stop();
          failed();
        });
      });
      worker.on("message", answer).on("exit", failed);
      worker.postMessage(text);
    });
  }

  private stop(): void {
    void this.thread?.worker.terminate();
    this.thread = undefined;
  }

  private spawn(): Thread {
    const worker = new Worker(this.script);
    worker.unref(); // the host's exit never waits for it
    worker.on("error", () => undefined); // a crash: its exit answers the text it was parsing
    const thread = { worker, ready: readiness(worker) };
    worker.on("exit", () => {
      if (this.thread === thread) this.thread = undefined;
      this.alive = this.thread !== undefined;
    });
    this.alive = true;
    return thread;
  }
}

/** Resolves when `worker` posts THREAD_READY. */
function readiness(worker: Worker): Promise<void> {
  return new Promise((resolve) => {
    const ready = (message: unknown) => {
      if (message !== THREAD_READY) return;
      worker.off("message", ready);
      resolve();
    };
    worker.on("message", ready);
  });
}
