// The page's side of the browser runtime: a small client over engine-worker.mjs (load + complete for now;
// the OpenAI-shaped createEngine API builds on it). Every call is a message to the worker; replies carry its id.
//
//   const engine = await Engine.create();                       // boots Pyodide in a Web Worker
//   await engine.load("/models/stories260K-f32.gguf", { backend: "wasm", onProgress });  // or a File
//   for await (const piece of engine.stream("Once upon a time", { maxTokens: 32, temperature: 0 })) ...
//   const { text, stats } = await engine.complete("Once upon a time", { maxTokens: 32 }, onPiece);

export class Engine {
  /** @param {Worker} worker a worker running engine-worker.mjs */
  constructor(worker) {
    this.worker = worker;
    this.nextId = 1;
    this.pending = new Map(); // id -> {resolve, reject, onEvent}
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
    return engine;
  }

  /**
   * Stream a model into the worker's Pyodide heap and bind it to a kernel backend.
   * @param {string|URL|Blob|ArrayBuffer} source a URL, a File (from an <input type=file>), or bytes
   * @param {{backend?: string, name?: string, onProgress?: (done: number, total: number) => void}} [opts]
   * @returns {Promise<object>} the model's info
   */
  load(source, opts = {}) {
    const src = source instanceof URL ? source.href : source;
    return this.#request({ type: "load", source: src, backend: opts.backend, name: opts.name }, (msg) => {
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

  /** Stop the running generation: at once through the interrupt buffer, else before the next token. */
  abort() {
    if (this.interrupt) Atomics.store(this.interrupt, 0, 2); // SIGINT: KeyboardInterrupt inside Python
    this.worker.postMessage({ type: "abort" });
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
      if (msg.type === "result") p.resolve(msg.value);
      else p.reject(new Error(msg.message));
    } else {
      p.onEvent?.(msg);
    }
  }

  #failAll(err) {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}
