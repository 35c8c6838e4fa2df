// The engine inside one JS realm: Pyodide booted with llamay, a model streamed into its heap, generation.
// The Web Worker (engine-worker.mjs) wraps it in messages; under Node the CLI (bin/llamay-web.mjs) uses it
// directly. Generation yields to the event loop between tokens, so an abort message can arrive mid-stream.

import { bootPyodide } from "./boot.mjs";
import { streamModel } from "./model-source.mjs";

const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

export class LlamayRuntime {
  /** @param {object} booted the result of bootPyodide */
  constructor(booted) {
    this.pyodide = booted.pyodide;
    this.web = booted.web;
    this.manifest = booted.manifest;
    this.session = null;
    this.aborted = false;
  }

  /** Boot Pyodide and install llamay (see bootPyodide for the options). */
  static async create(opts = {}) {
    return new LlamayRuntime(await bootPyodide(opts));
  }

  /**
   * Stream a GGUF into the heap and bind it to a kernel backend.
   * @param {string|URL|Blob|ArrayBuffer|ArrayBufferView} source
   * @param {{backend?: string, name?: string, onProgress?: (done: number, total: number) => void}} [opts]
   * @returns {Promise<object>} the model's info (name, architecture, backend, n_vocab, ...)
   */
  async loadModel(source, opts = {}) {
    this.unloadModel();
    const { buffer, name } = await streamModel(this.web, source, opts.onProgress);
    try {
      this.session = this.web.Session.callKwargs(buffer, opts.name ?? name, { backend: opts.backend ?? undefined });
    } finally {
      buffer.destroy(); // the JS handle only: the model holds the bytearray
    }
    return this.info();
  }

  info() {
    if (!this.session) return null;
    const info = this.session.info();
    try {
      return info.toJs({ dict_converter: Object.fromEntries });
    } finally {
      info.destroy();
    }
  }

  unloadModel() {
    if (this.session) {
      this.session.close();
      this.session.destroy();
      this.session = null;
    }
  }

  abort() {
    this.aborted = true;
  }

  /**
   * Generate a completion of `prompt`, calling onPiece(text) for each streamed piece.
   * @param {string} prompt
   * @param {{maxTokens?: number, temperature?: number, topK?: number, topP?: number, minP?: number,
   *          seed?: number, stop?: string[]}} [opts]
   * @param {(piece: string) => void} [onPiece]
   * @returns {Promise<{text: string, stats: object, aborted: boolean}>}
   */
  async complete(prompt, opts = {}, onPiece = () => {}) {
    if (!this.session) throw new Error("no model loaded");
    this.aborted = false;
    const gen = this.session.complete.callKwargs(prompt, {
      max_tokens: opts.maxTokens ?? 128,
      temperature: opts.temperature ?? 0.8,
      top_k: opts.topK ?? undefined,
      top_p: opts.topP ?? undefined,
      min_p: opts.minP ?? undefined,
      seed: opts.seed ?? undefined,
      stop: opts.stop ?? undefined,
    });
    let text = "";
    let interrupted = false;
    try {
      for (;;) {
        const step = gen.next();
        if (step.done) break;
        text += step.value;
        onPiece(step.value);
        await nextTask();
        if (this.aborted) break;
      }
    } catch (err) {
      // an abort through Pyodide's interrupt buffer (engine-worker.mjs) lands as a KeyboardInterrupt
      if (err.type !== "KeyboardInterrupt") throw err;
      interrupted = true;
      this.session.reset(); // interrupted mid-step: the KV state may be half-written
    } finally {
      gen.destroy();
    }
    const aborted = this.aborted || interrupted;
    if (interrupted) return { text, stats: null, aborted };
    const stats = this.session.stats();
    try {
      return { text, stats: stats.toJs({ dict_converter: Object.fromEntries }), aborted };
    } finally {
      stats.destroy();
    }
  }

  /**
   * Run pytest on the repository's tests inside Pyodide.
   * @param {string[]} args pytest's arguments
   * @param {string} rootdir the repository's root inside Pyodide's file system
   * @returns {{exit: number, counts: Record<string, number>}}
   */
  runPytest(args, rootdir) {
    const result = this.web.run_pytest(this.pyodide.toPy(args), rootdir);
    try {
      return result.toJs({ dict_converter: Object.fromEntries });
    } finally {
      result.destroy();
    }
  }
}
