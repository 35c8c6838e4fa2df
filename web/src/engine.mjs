// The page's side of the browser runtime: a small client over engine-worker.mjs (the OpenAI-shaped
// createEngine API of llamay.mjs builds on it). Every call is a message to the worker; replies carry its id.
//
//   const engine = await Engine.create();                       // boots Pyodide in a Web Worker
//   await engine.load("/models/stories260K-f32.gguf", { backend: "wasm", onProgress });  // or a File
//   for await (const piece of engine.stream("Once upon a time", { maxTokens: 32, temperature: 0 })) ...
//   const { text, stats } = await engine.complete("Once upon a time", { maxTokens: 32 }, onPiece);

import { LlamayWebError } from "./errors.mjs";

/** How long abort() waits for the worker to stop between two tokens before it interrupts Python mid-step. */
export const ABORT_GRACE_MS = 250;
const GENERATIONS = new Set(["complete", "generate"]);

export class Engine {
  /** @param {Worker} worker a worker running engine-worker.mjs */
  constructor(worker) {
    this.worker = worker;
    this.nextId = 1;
    this.pending = new Map(); // id -> {resolve, reject, onEvent}
    this.generations = new Set(); // ids of the generation requests not answered yet
    this.interrupt = null;
    this.onStdout = (text) => console.log(text);
    this.onStderr = (text) => console.warn(text);
    worker.onmessage = (event) => this.#receive(event.data);
    worker.onerror = (event) => this.#failAll(new Error(event.message ?? "the engine worker failed"));
  }

  /**
   * Start the worker and boot Pyodide in it.
   * @param {{workerURL?: URL|string, distURL?: URL|string, env?: Record<string,string>, groups?: string[]}} [opts]
   */
  static async create(opts = {}) {
    const url = opts.workerURL ?? new URL("./engine-worker.mjs", import.meta.url);
    const engine = new Engine(new Worker(url, { type: "module" }));
    const distURL = opts.distURL ? new URL(opts.distURL, globalThis.location?.href).href : undefined;
    const booted = await engine.#request({ type: "boot", distURL, env: opts.env, groups: opts.groups });
    engine.interrupt = booted.interrupt;
    engine.manifest = booted.manifest;
    engine.booted = booted; // {timings, memoryBudget, crossOriginIsolated, ...}
    return engine;
  }

  /**
   * Stream a model into the worker's Pyodide heap and bind it to a kernel backend.
   * @param {string|URL|Blob|ArrayBuffer} source a URL, a File (from an <input type=file>), or bytes
   * @param {{backend?: string, name?: string, threads?: number,
   *          onProgress?: (done: number, total: number) => void}} [opts] threads: kernel threads (default 1)
   * @returns {Promise<object>} the model's info
   */
  load(source, opts = {}) {
    const src = source instanceof URL ? source.href : source;
    const req = { type: "load", source: src, backend: opts.backend, name: opts.name, threads: opts.threads };
    return this.#request(req, (msg) => {
      if (msg.type === "progress") opts.onProgress?.(msg.done, msg.total);
    });
  }

  /**
   * Complete a prompt; onPiece gets each streamed piece of text.
   * @param {string} prompt
   * @param {{maxTokens?: number, temperature?: number, topK?: number, topP?: number, minP?: number,
   *          seed?: number, stop?: string[]}} [options]
   * @returns {Promise<{text: string, stats: object, aborted: boolean}>}
   */
  complete(prompt, options = {}, onPiece = () => {}) {
    return this.#request({ type: "complete", prompt, options }, (msg) => {
      if (msg.type === "piece") onPiece(msg.text);
    });
  }

  /** The completion as an async iterator of text pieces. */
  async *stream(prompt, options = {}) {
    const pieces = [];
    let wake = null;
    let finished = false;
    const done = this.complete(prompt, options, (text) => {
      pieces.push(text);
      wake?.();
    }).finally(() => {
      finished = true;
      wake?.();
    });
    while (!finished || pieces.length) {
      if (pieces.length) {
        yield pieces.shift();
      } else {
        await new Promise((resolve) => (wake = resolve));
        wake = null;
      }
    }
    await done; // rethrows a generation error
  }

  /**
   * Stop the generations asked for and not finished: the worker stops before the next token (the KV state
   * stays valid, the next turn reuses it); one still running after ABORT_GRACE_MS (a long prompt being read) is
   * interrupted mid-step through the interrupt buffer, when the page is cross-origin isolated.
   */
  abort() {
    const ids = [...this.generations];
    if (!ids.length) {
      this.worker.postMessage({ type: "abort" });
      return;
    }
    for (const target of ids) this.worker.postMessage({ type: "abort", target });
    if (this.interrupt) {
      setTimeout(() => {
        // SIGINT: KeyboardInterrupt inside Python, if the first of them is still running
        if (this.generations.has(ids[0])) Atomics.store(this.interrupt, 0, 2);
      }, ABORT_GRACE_MS);
    }
  }

  /**
   * Send any request of the worker protocol (engine-worker.mjs); onEvent gets its progress and piece replies.
   * @returns {Promise<any>} the result's value; an error reply rejects with a LlamayWebError (message, kind)
   */
  request(msg, onEvent) {
    return this.#request(msg, onEvent);
  }

  unload() {
    return this.#request({ type: "unload" });
  }

  terminate() {
    this.worker.terminate();
    this.#failAll(new Error("the engine was terminated"));
  }

  #request(msg, onEvent) {
    const id = this.nextId++;
    if (GENERATIONS.has(msg.type)) this.generations.add(id);
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onEvent });
      this.worker.postMessage({ ...msg, id });
    });
  }

  #receive(msg) {
    if (msg.type === "stdout") return this.onStdout(msg.text);
    if (msg.type === "stderr") return this.onStderr(msg.text);
    const p = this.pending.get(msg.id);
    if (!p) return;
    if (msg.type === "result" || msg.type === "error") {
      this.pending.delete(msg.id);
      this.generations.delete(msg.id);
      if (msg.type === "result") p.resolve(msg.value);
      else p.reject(new LlamayWebError(msg.message, msg.kind, msg.details));
    } else {
      p.onEvent?.(msg);
    }
  }

  #failAll(err) {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    this.generations.clear();
  }
}
