// The engine inside one JS realm: Pyodide booted with llamay, a model streamed into its heap, generation.
// The Web Worker (engine-worker.mjs) wraps it in messages; under Node the CLI (bin/llamay-web.mjs) uses it
// directly. Generation yields to the event loop between tokens, so an abort message can arrive mid-stream.

import { bootPyodide, readBytes } from "./boot.mjs";
import { LlamayWebError, toWebError } from "./errors.mjs";
import { THREADS_MODULE, startKernelThreads, threadsUnavailable } from "./kernel-threads.mjs";
import { cacheKeyFor, cachedModel, deleteCachedModel, storeModel } from "./model-cache.mjs";
import { shardSources, sourceName, streamShards } from "./model-source.mjs";

// Yield to the event loop (so an abort message can arrive) between two tokens. A MessageChannel message, not
// setTimeout(0): browsers clamp nested timeouts to 4 ms, which would cap a small model at 250 tokens/s.
const yieldChannel = typeof MessageChannel !== "undefined" ? new MessageChannel() : null;
const waiting = [];
if (yieldChannel) {
  yieldChannel.port1.onmessage = () => waiting.shift()?.();
  yieldChannel.port1.unref?.(); // under Node: an idle channel must not keep the process alive
  yieldChannel.port2.unref?.();
}
const nextTask = () =>
  new Promise((resolve) => {
    if (!yieldChannel) return setTimeout(resolve, 0);
    waiting.push(resolve);
    yieldChannel.port2.postMessage(0);
  });
const toJs = (proxy) => {
  try {
    return proxy?.toJs ? proxy.toJs({ dict_converter: Object.fromEntries }) : proxy;
  } finally {
    proxy?.destroy?.();
  }
};

/** Pyodide's heap is wasm32 memory: at most 4 GiB less a page (emscripten's getHeapMax). */
export const HEAP_MAX_BYTES = 4294901760;
/** Heap kept free beside a model's bytes: Python's own objects, the KV cache, the compute buffers. */
export const HEAP_RESERVE_BYTES = 384 << 20;

export class LlamayRuntime {
  /** @param {object} booted the result of bootPyodide */
  constructor(booted) {
    this.pyodide = booted.pyodide;
    this.web = booted.web;
    this.manifest = booted.manifest;
    this.session = null;
    this.aborted = false;
    this.bootTimings = booted.timings;
    this.baseHeap = this.pyodide._module?.HEAPU8?.length ?? 0; // the heap Python needs with no model
    this.modelCard = null;
    this.modelBytes = 0; // the loaded model's size (its shards' together)
    this.distURL = booted.distURL;
    this.kernelThreads = null; // the loaded model's KernelThreads (kernel-threads.mjs), when it runs on several
    this.threadsNote = null; // why the loaded model runs on fewer threads than asked, or null
  }

  /**
   * The largest model (in bytes) this runtime accepts: the wasm32 heap less what Python used at boot and a
   * reserve for the KV cache; where the browser tells its memory (navigator.deviceMemory, in GiB), at most
   * half of it.
   */
  memoryBudget() {
    let budget = HEAP_MAX_BYTES - this.baseHeap - HEAP_RESERVE_BYTES;
    const gib = globalThis.navigator?.deviceMemory;
    if (gib) budget = Math.min(budget, (gib * 2 ** 30) / 2);
    return budget;
  }

  /** Boot Pyodide and install llamay (see bootPyodide for the options). */
  static async create(opts = {}) {
    return new LlamayRuntime(await bootPyodide(opts));
  }

  /**
   * Stream a GGUF into the heap and bind it to a kernel backend.
   * @param {string|URL|Blob|ArrayBuffer|ArrayBufferView} source
   * @param {{backend?: string, name?: string, threads?: number,
   *          onProgress?: (done: number, total: number) => void}} [opts]
   * @returns {Promise<object>} the model's info (name, architecture, backend, threads, n_vocab, ...)
   */
  async loadModel(source, opts = {}) {
    this.unloadModel();
    const threads = await this.#startThreads(opts.threads, opts.backend);
    try {
      const { buffers, names } = await streamShards(this.web, shardSources(source), opts.onProgress);
      try {
        const named = [opts.name ?? names[0], ...names.slice(1)];
        this.session = this.#session(buffers, named, opts.backend, threads.pool);
      } finally {
        for (const b of buffers) b.destroy(); // the JS handles only: the model holds the bytearrays
      }
    } catch (err) {
      threads.pool?.stop();
      throw err;
    }
    [this.kernelThreads, this.threadsNote] = [threads.pool, threads.note];
    return this.info();
  }

  /** A Session over the shards' buffers (one for a whole file), named by `names`, on kernel threads `pool`. */
  #session(buffers, names, backend, pool) {
    const [first, ...rest] = buffers;
    const kwargs = { backend: backend ?? undefined };
    if (rest.length) Object.assign(kwargs, { shards: rest, shard_names: names.slice(1) });
    if (pool) kwargs.kernel_threads = pool;
    return this.web.Session.callKwargs(first, names[0], kwargs);
  }

  /**
   * Kernel threads for a model asked to run on `threads`: {pool, note}. pool: a started KernelThreads, or null
   * for one thread (asked for, or the fallback); note: why fewer threads than asked run (no cross-origin
   * isolation, no SharedArrayBuffer, not a browser, no threads build), else null. Threads run the wasm
   * backend only: another backend with threads > 1 is refused by name.
   */
  async #startThreads(threads, backend) {
    const n = threads ?? 1;
    if (n <= 1) return { pool: null, note: null };
    if (backend && backend !== "wasm") {
      throw new LlamayWebError(`threads: ${n} asked for with backend ${backend}: kernel threads run the wasm ` +
        "backend only (leave threads out, or set it to 1)", "bad-request");
    }
    const fallback = (why) => ({ pool: null, note: `${n} threads asked for, running on 1: ${why}` });
    const why = threadsUnavailable();
    if (why) return fallback(why);
    if (!(this.manifest.wasm ?? []).includes(THREADS_MODULE)) return fallback(`web/dist has no ${THREADS_MODULE}`);
    try {
      return { pool: await startKernelThreads(n, await readBytes(new URL(`wasm/${THREADS_MODULE}`, this.distURL))),
        note: null };
    } catch (err) {
      return fallback(`the kernel threads did not start (${err.message ?? err})`);
    }
  }

  /**
   * Load a model as a page asks for it: from the browser's Cache API when it holds the model (`cache`), else from
   * its source (then stored there once it has bound); refused early when it is not a GGUF or too large.
   * @param {string|URL|Blob|ArrayBuffer} source an absolute URL, a File, or bytes
   * @param {{backend?: string, name?: string, cache?: boolean|"reload", maxBytes?: number, threads?: number,
   *          onProgress?: (phase: string, done: number, total: number) => void}} [opts]
   *   threads: kernel threads (default 1); where they cannot run (kernel-threads.mjs threadsUnavailable) the
   *   model runs on one and the info's `threadsNote` says why
   *   phases: "download" | "cache-read" | "file" | "bind" | "cache-write" (bind has no byte counts)
   * @returns {Promise<object>} the model's info, with its card, where it came from ("url" | "cache" | "file" |
   *   "bytes"), whether it is cached now (or why not), and the timings of each step
   */
  async openModel(source, opts = {}) {
    try {
      return await this.#open(source, opts);
    } catch (err) {
      // a cached copy that no longer reads as a GGUF (a storage fault): forget it, and fetch the source again
      if (err.fromCache && (err.kind === "not-gguf" || err.kind === "malformed-gguf")) {
        await deleteCachedModel(err.fromCache).catch(() => {});
        return this.#open(source, { ...opts, cache: "reload" });
      }
      throw err;
    }
  }

  async #open(source, opts) {
    // the loaded model stays until the new one has bound (a failed load keeps it), unless both do not fit in the
    // heap together: then it goes as the new one's bytes are allocated (`kept` in a failure's details says which)
    const budget = this.memoryBudget();
    let allocated = 0;
    const web = {
      new_model_buffer: (size) => {
        allocated += size;
        if (this.session && this.modelBytes + allocated > budget) this.unloadModel();
        return this.web.new_model_buffer(size);
      },
    };
    try {
      return await this.#openKeeping(web, source, { ...opts, budget });
    } catch (err) {
      const e = toWebError(err);
      e.details = { ...e.details, kept: this.session !== null };
      if (err.fromCache) e.fromCache = err.fromCache;
      this.pyodide.runPython("import gc; gc.collect()"); // the refused model's bytes go back to the heap now
      throw e;
    }
  }

  async #openKeeping(web, source, opts) {
    const threads = await this.#startThreads(opts.threads, opts.backend);
    try {
      return await this.#openOn(web, source, opts, threads);
    } catch (err) {
      if (threads.pool && this.kernelThreads !== threads.pool) threads.pool.stop();
      throw err;
    }
  }

  async #openOn(web, source, opts, threads) {
    const progress = (phase) => (done, total) => opts.onProgress?.(phase, done, total);
    const t0 = performance.now();
    const sources = shardSources(source);
    const split = sources.length > 1; // a split model is read shard by shard, and not cached
    const name = opts.name ?? sourceName(sources[0]);
    const isBlob = typeof Blob !== "undefined" && sources[0] instanceof Blob;
    let from = isBlob ? "file" : typeof sources[0] === "string" || sources[0] instanceof URL ? "url" : "bytes";
    const key = opts.cache && !split ? cacheKeyFor(source) : null;
    let src = source instanceof URL ? source.href : source;
    if (key && opts.cache !== "reload") {
      const hit = await cachedModel(key).catch(() => null);
      if (hit) {
        src = hit;
        from = "cache";
      }
    }
    const phase = { url: "download", cache: "cache-read", file: "file", bytes: "file" }[from];
    const budget = opts.budget;
    const maxBytes = Math.min(opts.maxBytes ?? budget, budget);
    const maxBytesReason = maxBytes < budget ? "the limit this page sets" : undefined;
    const fetchInit = key ? { cache: "no-store" } : undefined; // the Cache API keeps it: not the HTTP cache too
    const streamOpts = { name, maxBytes, maxBytesReason, fetchInit };
    const fail = (err) => {
      if (from === "cache") err.fromCache = key;
      throw err;
    };
    const shards = split ? sources : [src];
    const { buffers, names, size } = await streamShards(web, shards, progress(phase), streamOpts).catch(fail);
    const [buffer] = buffers;
    const t1 = performance.now();
    let cacheError = key ? null : split ? "a split model is not cached" : "this source cannot be cached";
    let t2;
    let t3;
    try {
      opts.onProgress?.("bind", 0, 0);
      await nextTask(); // let the progress message out before the long synchronous bind
      let session;
      try {
        session = this.#session(buffers, names, opts.backend, threads.pool);
      } catch (err) {
        const e = toWebError(err);
        if (["unsupported-architecture", "unsupported-type", "model"].includes(e.kind)) {
          e.details = { card: toJs(this.web.describe_buffer(buffer, name, buffers.slice(1), names.slice(1))) };
        }
        fail(e);
      }
      t2 = performance.now();
      let card;
      try {
        card = toJs(session.card());
      } catch (err) {
        session.close();
        session.destroy();
        throw toWebError(err);
      }
      this.unloadModel(); // the new model bound: the old one goes (with its kernel threads)
      this.session = session;
      [this.kernelThreads, this.threadsNote] = [threads.pool, threads.note];
      this.modelBytes = size;
      this.modelCard = card;
      t3 = performance.now();
      if (key && from !== "cache") {
        const readChunk = (offset, n) => {
          const pb = buffer.getBuffer("u8");
          try {
            return pb.data.slice(offset, offset + n);
          } finally {
            pb.release();
          }
        };
        cacheError = await storeModel(key, size, readChunk, {
          name,
          source: from,
          onProgress: progress("cache-write"),
        });
      }
    } finally {
      for (const b of buffers) b.destroy(); // the JS handles only: the model holds the bytearrays
    }
    const t4 = performance.now();
    return {
      ...this.info(),
      card: this.modelCard,
      source: from,
      cacheKey: key,
      cached: from === "cache" || (key !== null && cacheError === null),
      cacheError: from === "cache" ? null : cacheError,
      timings: { read_ms: t1 - t0, bind_ms: t2 - t1, card_ms: t3 - t2, cache_write_ms: t4 - t3, total_ms: t4 - t0 },
    };
  }

  /** The loaded model's info: name, architecture, backend, variant, threads (and threadsNote), n_vocab, ... */
  info() {
    if (!this.session) return null;
    const info = this.session.info();
    try {
      return { ...info.toJs({ dict_converter: Object.fromEntries }), threadsNote: this.threadsNote };
    } finally {
      info.destroy();
    }
  }

  unloadModel() {
    if (this.session) {
      this.session.close();
      this.session.destroy();
      this.session = null;
      this.modelCard = null;
      this.modelBytes = 0;
      this.kernelThreads?.stop(); // its memory (the weights' copy) goes with the last reference to it
      this.kernelThreads = null;
      this.threadsNote = null;
      this.pyodide.runPython("import gc; gc.collect()"); // the model's bytes go back to the heap now
    }
  }

  #needSession() {
    if (!this.session) throw new LlamayWebError("no model is loaded: load one first", "no-model");
  }

  /**
   * Generate for an OpenAI-style request: kind "chat" (input: the messages) or "complete" (input: the prompt),
   * `params` its fields in OpenAI's names (max_tokens, temperature, top_p, top_k, min_p, seed, stop,
   * response_format, ...). onPiece(text, completionTokens, delta) gets each streamed piece; with tools, `delta`
   * is its OpenAI stream delta (content and tool_calls pieces, as the server streams them; null while held), and
   * the result's `delta` the reply's last one.
   * @returns {Promise<{text: string, stats: object|null, aborted: boolean, finish_reason: string, delta: object|null}>}
   */
  async generate(kind, input, params = {}, onPiece = () => {}) {
    this.#needSession();
    this.aborted = false;
    const py = this.pyodide;
    const pyInput = kind === "chat" ? py.toPy(input) : input;
    const pyParams = py.toPy(params);
    let gen;
    try {
      gen = this.session.generate(kind, pyInput, pyParams);
    } catch (err) {
      throw toWebError(err);
    } finally {
      pyParams.destroy();
      if (kind === "chat") pyInput.destroy();
    }
    const withTools = kind === "chat" && Array.isArray(params.tools) && params.tools.length > 0;
    let text = "";
    let interrupted = false;
    try {
      for (;;) {
        const step = gen.next();
        if (step.done) break;
        text += step.value;
        const delta = withTools ? toJs(this.session.tool_delta(step.value)) : null;
        onPiece(step.value, this.session.generated(), delta ?? null);
        await nextTask();
        if (this.aborted) break;
      }
    } catch (err) {
      if (err.type !== "KeyboardInterrupt") throw toWebError(err);
      interrupted = true;
      this.session.reset(); // interrupted mid-step: the KV state may be half-written
    } finally {
      gen.destroy();
    }
    const aborted = this.aborted || interrupted;
    const stats = interrupted ? null : toJs(this.session.stats());
    let finish_reason = aborted ? "abort" : (stats?.finish_reason ?? "stop");
    // a chat with tools: the held end of its reply, and "tool_calls" when it stopped with its calls complete
    const delta = withTools && !aborted ? (toJs(this.session.tool_delta("", true)) ?? null) : null;
    if (withTools && !aborted) finish_reason = this.session.tool_finish(finish_reason);
    return { text, stats, aborted, finish_reason, delta };
  }

  /** Prepare the first request (imports, the chat template) ahead of it; a no-op without a model. */
  warmUp() {
    this.session?.warm_up();
  }

  /** The loaded model's card (llamay.model_card.describe, without the per-tensor list). */
  card() {
    this.#needSession();
    return this.modelCard;
  }

  /** One pooled, L2-normalised embedding per text (an encoder model, such as all-MiniLM). */
  embed(texts) {
    this.#needSession();
    const pyTexts = this.pyodide.toPy(texts);
    try {
      return toJs(this.session.embed(pyTexts));
    } catch (err) {
      throw toWebError(err);
    } finally {
      pyTexts.destroy();
    }
  }

  tokenize(text, { add_special = true, parse_special = true } = {}) {
    this.#needSession();
    return toJs(this.session.tokenize(text, add_special, parse_special));
  }

  detokenize(ids) {
    this.#needSession();
    const pyIds = this.pyodide.toPy(ids);
    try {
      return this.session.detokenize(pyIds);
    } finally {
      pyIds.destroy();
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
