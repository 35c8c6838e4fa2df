// The Web Worker that runs llamay: Python never runs on the page's thread, so the page never freezes.
//
// Messages in (each with an `id` the replies carry, except abort):
//   {type: "boot", distURL?, env?, groups?}        boot Pyodide and install llamay
//   {type: "load", source, backend?, name?, threads?}   stream a model (URL string, File/Blob, ArrayBuffer) into the heap
//   {type: "open", source, backend?, name?, cache?, maxBytes?, threads?}   load as a page does: from the Cache API when it
//                                                  holds the model, refused early when not a GGUF / too large;
//                                                  replies {type: "progress", phase, done, total} first
//   {type: "complete", prompt, options?}           generate; streams {type: "piece", text} replies
//   {type: "generate", kind, input, params}        OpenAI-style: kind "chat" (input: messages) or "complete"
//                                                  (input: prompt), params in OpenAI's names; streams
//                                                  {type: "piece", text, tokens, delta} replies
//   {type: "card" | "info" | "embed" (texts) | "tokenize" (text, options) | "detokenize" (ids)}
//   {type: "unload"}
//   {type: "abort", target?}                       stop generation `target` (an id), or the running one
//                                                  (no id, handled at once)
// Messages out: {id, type: "result", value} | {id, type: "error", message, kind, details?}
//   | {id, type: "progress", done, total, phase?} | {id, type: "piece", text, tokens?}
//   | {type: "stdout"|"stderr", text}
//
// Requests run one at a time in arrival order; abort is handled as soon as it arrives (between two tokens, or
// through Pyodide's interrupt buffer when the page is cross-origin isolated and shared memory exists). An abort
// aimed at a request still waiting in the queue makes it return at once, aborted.

import { toWebError } from "./errors.mjs";
import { LlamayRuntime } from "./runtime.mjs";

let runtime = null;
let interrupt = null; // Int32Array over a SharedArrayBuffer, when available
let queue = Promise.resolve();
let running = null; // the id of the request running now
const cancelled = new Set(); // ids of queued generations aborted before they started

const post = (msg) => self.postMessage(msg);

const handlers = {
  async boot(msg) {
    if (runtime) return booted();
    runtime = await LlamayRuntime.create({
      distURL: msg.distURL,
      env: msg.env,
      groups: msg.groups,
      stdout: (text) => post({ type: "stdout", text }),
      stderr: (text) => post({ type: "stderr", text }),
    });
    if (globalThis.crossOriginIsolated && typeof SharedArrayBuffer !== "undefined") {
      interrupt = new Int32Array(new SharedArrayBuffer(4));
      runtime.pyodide.setInterruptBuffer(interrupt);
    }
    afterThis(() => runtime.web.preload(), "preload");
    return booted();
  },

  async open(msg) {
    need();
    const info = await runtime.openModel(msg.source, {
      backend: msg.backend,
      name: msg.name,
      cache: msg.cache,
      maxBytes: msg.maxBytes,
      threads: msg.threads,
      onProgress: (phase, done, total) => post({ id: msg.id, type: "progress", phase, done, total }),
    });
    afterThis(() => runtime.warmUp(), "warm-up"); // the page shows the model while this runs
    return info;
  },

  async generate(msg) {
    need();
    if (cancelled.delete(msg.id)) return { text: "", stats: null, aborted: true, finish_reason: "abort" };
    const piece = (text, tokens, delta) => post({ id: msg.id, type: "piece", text, tokens, delta });
    return runtime.generate(msg.kind, msg.input, msg.params ?? {}, piece);
  },

  async card() {
    need();
    return runtime.card();
  },

  async info() {
    need();
    return runtime.info();
  },

  async embed(msg) {
    need();
    return runtime.embed(msg.texts);
  },

  async tokenize(msg) {
    need();
    return runtime.tokenize(msg.text, msg.options ?? {});
  },

  async detokenize(msg) {
    need();
    return runtime.detokenize(msg.ids);
  },

  async load(msg) {
    need();
    return runtime.loadModel(msg.source, {
      backend: msg.backend,
      name: msg.name,
      threads: msg.threads,
      onProgress: (done, total) => post({ id: msg.id, type: "progress", done, total }),
    });
  },

  async complete(msg) {
    need();
    return runtime.complete(msg.prompt, msg.options ?? {}, (text) => post({ id: msg.id, type: "piece", text }));
  },

  async unload() {
    runtime?.unloadModel();
    return null;
  },
};

/** Run `work` after the request running now has replied, ahead of the requests that arrive later. */
function afterThis(work, name) {
  queue = queue.then(() => {
    try {
      work();
    } catch (err) {
      post({ type: "stderr", text: `${name}: ${err.message ?? err}` });
    }
  });
}

function need() {
  if (!runtime) throw new Error("boot first");
}

function booted() {
  return {
    manifest: runtime.manifest,
    interrupt,
    timings: runtime.bootTimings,
    memoryBudget: runtime.memoryBudget(),
    crossOriginIsolated: !!globalThis.crossOriginIsolated,
  };
}

self.onmessage = (event) => {
  const msg = event.data;
  if (msg.type === "abort") {
    if (msg.target === undefined || msg.target === running) runtime?.abort();
    else cancelled.add(msg.target);
    return;
  }
  const handler = handlers[msg.type];
  if (!handler) {
    post({ id: msg.id, type: "error", message: `unknown request ${msg.type}` });
    return;
  }
  queue = queue.then(async () => {
    if (interrupt) Atomics.store(interrupt, 0, 0); // an abort aimed at an earlier request
    running = msg.id;
    try {
      post({ id: msg.id, type: "result", value: await handler(msg) });
    } catch (err) {
      const e = toWebError(err);
      post({ id: msg.id, type: "error", message: e.message, kind: e.kind, details: e.details });
    } finally {
      running = null;
    }
  });
};
