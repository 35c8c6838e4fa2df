// The Web Worker that runs llamay: Python never runs on the page's thread, so the page never freezes.
//
// Messages in (each with an `id` the replies carry, except abort):
//   {type: "boot", distURL?, env?, groups?}        boot Pyodide and install llamay
//   {type: "load", source, backend?, name?}        stream a model (URL string, File/Blob, ArrayBuffer) into the heap
//   {type: "complete", prompt, options?}           generate; streams {type: "piece", text} replies
//   {type: "unload"}
//   {type: "abort"}                                stop the running generation (no id, handled at once)
// Messages out: {id, type: "result", value} | {id, type: "error", message} | {id, type: "progress", done, total}
//   | {id, type: "piece", text} | {type: "stdout"|"stderr", text}
//
// Requests run one at a time in arrival order; abort is handled as soon as it arrives (between two tokens, or
// through Pyodide's interrupt buffer when the page is cross-origin isolated and shared memory exists).

import { LlamayRuntime } from "./runtime.mjs";

let runtime = null;
let interrupt = null; // Int32Array over a SharedArrayBuffer, when available
let queue = Promise.resolve();

const post = (msg) => self.postMessage(msg);

const handlers = {
  async boot(msg) {
    if (runtime) return { manifest: runtime.manifest, interrupt };
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
    return { manifest: runtime.manifest, interrupt };
  },

  async load(msg) {
    need();
    return runtime.loadModel(msg.source, {
      backend: msg.backend,
      name: msg.name,
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

function need() {
  if (!runtime) throw new Error("boot first");
}

self.onmessage = (event) => {
  const msg = event.data;
  if (msg.type === "abort") {
    runtime?.abort();
    return;
  }
  const handler = handlers[msg.type];
  if (!handler) {
    post({ id: msg.id, type: "error", message: `unknown request ${msg.type}` });
    return;
  }
  queue = queue.then(async () => {
    if (interrupt) Atomics.store(interrupt, 0, 0); // an abort aimed at an earlier request
    try {
      post({ id: msg.id, type: "result", value: await handler(msg) });
    } catch (err) {
      post({ id: msg.id, type: "error", message: err.message ?? String(err) });
    }
  });
};
