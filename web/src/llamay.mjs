// llamay's JavaScript API: a GGUF model in a Web Worker (Pyodide + WASM SIMD kernels), spoken to in the
// shapes of OpenAI's API. Nothing leaves the page's origin. See docs/web.md.
//
//   import { createEngine } from "./src/llamay.mjs";
//   const engine = await createEngine({ model: "/models/SmolLM2-135M-Instruct.Q4_1.gguf", onProgress });
//   for await (const chunk of engine.chat({ messages: [{ role: "user", content: "Hi" }], stream: true })) {
//     out.textContent += chunk.choices[0]?.delta?.content ?? "";
//   }
//   engine.abort();   // stops the running generation: its stream ends with finish_reason "abort"
//   await engine.unload();

import { Engine } from "./engine.mjs";
import { LlamayWebError } from "./errors.mjs";
import { MAX_THREADS } from "./kernel-threads.mjs";

export { LlamayWebError } from "./errors.mjs";
export { CACHE_NAME, clearModelCache, deleteCachedModel, listCachedModels } from "./model-cache.mjs";

/** The most kernel threads an engine runs (web/src/kernel-threads.mjs); a larger `threads` is refused by name. */
export const THREADS_AVAILABLE = MAX_THREADS;

/** Refuses a `threads` option this build cannot honour (never runs fewer threads than asked silently: where the
 * page cannot share memory it runs on one and says so, in `engine.threadsNote`). */
export function checkThreads(threads) {
  if (threads === undefined || threads === null) return;
  if (!Number.isInteger(threads) || threads < 1) {
    throw new LlamayWebError(`threads: ${JSON.stringify(threads)} is not a positive whole number`, "bad-request");
  }
  if (threads > THREADS_AVAILABLE) {
    throw new LlamayWebError(
      `threads: ${threads} asked for, but this build runs the kernels on at most ${THREADS_AVAILABLE} threads`,
      "bad-request",
    );
  }
}

let nextCompletion = 1;
const completionId = (prefix) => `${prefix}-${Date.now().toString(36)}${(nextCompletion++).toString(36)}`;
const now = () => Math.floor(Date.now() / 1000);

/**
 * Start an engine in a Web Worker and, when `model` is given, load it.
 * @param {object} [opts]
 * @param {string|URL|File|Blob|ArrayBuffer} [opts.model] a URL (relative to the page), a File, or bytes
 * @param {string} [opts.backend] "wasm" (the default where it loads) or "portable"
 * @param {boolean|"reload"} [opts.cache] keep the model in the browser's Cache API and read it from there next
 *   time (default true); "reload" fetches it again and replaces the cached copy
 * @param {number} [opts.maxModelBytes] refuse larger models (default: what the wasm32 heap can hold)
 * @param {(p: {phase: string, done: number, total: number, fraction: number|null}) => void} [opts.onProgress]
 *   phases: "boot", "download", "cache-read", "file", "bind", "cache-write"
 * @param {string|URL} [opts.distURL] where web/dist is served (default: next to this module)
 * @param {string|URL} [opts.workerURL] the engine worker (default: ./engine-worker.mjs next to this module)
 * @param {Record<string,string>} [opts.env] environment variables inside Python (e.g. LLAMAY_BACKEND)
 * @param {number} [opts.threads] kernel threads (default 1, at most THREADS_AVAILABLE): the wasm kernels on that
 *   many threads over shared memory; a page that is not cross-origin isolated runs on one, and
 *   `engine.threadsNote` says why (`engine.threads` is what runs)
 * @returns {Promise<LlamayEngine>}
 */
export async function createEngine(opts = {}) {
  checkThreads(opts.threads);
  opts.onProgress?.({ phase: "boot", done: 0, total: 0, fraction: null });
  const distURL = opts.distURL ? new URL(opts.distURL, globalThis.document?.baseURI).href : undefined;
  const client = await Engine.create({ workerURL: opts.workerURL, distURL, env: opts.env });
  client.onStdout = opts.onStdout ?? client.onStdout;
  client.onStderr = opts.onStderr ?? client.onStderr;
  const engine = new LlamayEngine(client);
  if (opts.model !== undefined && opts.model !== null) {
    try {
      await engine.load(opts.model, opts);
    } catch (err) {
      engine.terminate();
      throw err;
    }
  }
  return engine;
}

/** A plain-text message content (OpenAI allows an array of parts; the text parts are kept). */
function textOf(content) {
  if (Array.isArray(content)) return content.map((p) => (typeof p === "string" ? p : (p?.text ?? ""))).join("");
  return content ?? "";
}

/** The request's fields the worker takes (functions and signals stay on the page). */
function params(request) {
  // one choice per request: the engine runs one sequence (n other than 1 is refused by name, never dropped)
  if (request.n !== undefined && request.n !== null && request.n !== 1) {
    throw new LlamayWebError(`n: the engine gives one choice per request, got ${JSON.stringify(request.n)}`,
      "bad-request");
  }
  const out = {};
  for (const [k, v] of Object.entries(request)) {
    if (["messages", "prompt", "stream", "signal", "stream_options", "model", "n"].includes(k)) continue;
    if (v === undefined || typeof v === "function") continue;
    out[k] = v;
  }
  return out;
}

export class LlamayEngine {
  /** @param {Engine} client the worker client (engine.mjs) */
  constructor(client) {
    this.client = client;
    /** The loaded model: {name, architecture, backend, variant, size, n_vocab, n_ctx_train, source, cached,
     * cacheError, timings, card} or null. */
    this.model = null;
    /** How long booting took: {pyodide_ms, wheels_ms, kernels_ms, total_ms}. */
    this.bootTimings = client.booted?.timings ?? null;
    /** The largest model this engine accepts, in bytes. */
    this.memoryBudget = client.booted?.memoryBudget ?? null;
    this.crossOriginIsolated = client.booted?.crossOriginIsolated ?? false;
    /** The kernel threads the loaded model runs on. */
    this.threads = 1;
    /** Why the model runs on fewer threads than asked (no cross-origin isolation, ...), else null. */
    this.threadsNote = null;
  }

  /** The loaded model's card: architecture, size, tensor types, context, tokenizer, the tensor audit. */
  get card() {
    return this.model?.card ?? null;
  }

  /**
   * Load (or replace) the model. Rejects with a LlamayWebError whose `kind` says why: "not-gguf",
   * "too-large", "unsupported-architecture", "unsupported-type", "malformed-gguf", "network", ... (for the
   * unsupported ones, `details.card` is the model card of the file that was refused). A failed load keeps the
   * model loaded before (`details.kept` is true), unless the two could not fit in memory together.
   * @param {string|URL|File|Blob|ArrayBuffer|File[]} model a split model: its first shard's URL, or its shards
   * @param {{backend?: string, cache?: boolean|"reload", maxModelBytes?: number, name?: string,
   *          threads?: number, onProgress?: Function}} [opts]
   */
  async load(model, opts = {}) {
    checkThreads(opts.threads);
    let source = model;
    if (typeof model === "string" || model instanceof URL) {
      source = new URL(model, globalThis.document?.baseURI ?? globalThis.location?.href).href;
    }
    const before = this.model;
    const msg = {
      type: "open",
      source,
      backend: opts.backend || undefined,
      name: opts.name,
      cache: opts.cache ?? true,
      maxBytes: opts.maxModelBytes,
      threads: opts.threads,
    };
    try {
      this.model = await this.client.request(msg, (m) => {
        if (m.type !== "progress") return;
        const fraction = m.total ? m.done / m.total : null;
        opts.onProgress?.({ phase: m.phase, done: m.done, total: m.total, fraction });
      });
    } catch (err) {
      this.model = err.details?.kept ? before : null;
      this.#threadsOf(this.model);
      throw err;
    }
    this.#threadsOf(this.model);
    return this.model;
  }

  /**
   * A chat completion (OpenAI's `chat.completions.create` shape). Fields: messages, max_tokens, temperature,
   * top_p, top_k, min_p, seed, stop, presence_penalty, frequency_penalty, repeat_penalty, logit_bias,
   * response_format ({type: "json_object"} or {type: "json_schema", json_schema: {schema}}), tools, signal (an
   * AbortSignal).
   * With stream: true, returns an async iterable of `chat.completion.chunk` objects: the first delta carries the
   * role, each next one a piece of content, the last one finish_reason ("stop" | "length" | "abort"), `usage`
   * and `timings` (ttft_ms, prompt_ms, predicted_per_second, ...). Without it, a promise of the whole
   * `chat.completion`.
   */
  chat(request) {
    const messages = (request.messages ?? []).map((m) => ({ ...m, content: textOf(m.content) }));
    const chunks = this.#stream("chat", messages, request);
    return request.stream ? chunks : collect(chunks, "chat");
  }

  /**
   * A text completion (OpenAI's legacy `completions.create`): {prompt, max_tokens, ..., stream}. Streams
   * `text_completion` chunks ({choices: [{text}]}), or resolves to the whole completion.
   */
  complete(request) {
    const prompt = Array.isArray(request.prompt) ? request.prompt.join("") : String(request.prompt ?? "");
    const chunks = this.#stream("complete", prompt, request);
    return request.stream ? chunks : collect(chunks, "complete");
  }

  /**
   * Embeddings (OpenAI's `embeddings.create`): {input: string | string[]} or the input itself. Needs an encoder
   * model (e.g. all-MiniLM-L6-v2); vectors are pooled and L2-normalised.
   */
  async embed(request) {
    const input = typeof request === "string" || Array.isArray(request) ? request : request.input;
    const texts = Array.isArray(input) ? input : [input];
    const vectors = await this.client.request({ type: "embed", texts });
    let tokens = 0;
    for (const t of texts) tokens += (await this.client.request({ type: "tokenize", text: t })).length;
    return {
      object: "list",
      model: this.model?.name,
      data: vectors.map((embedding, index) => ({ object: "embedding", index, embedding })),
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    };
  }

  /**
   * Token ids of a text (llama.cpp's /tokenize shape): tokenize("Hi") or tokenize({content, add_special,
   * parse_special}) -> {tokens}.
   */
  async tokenize(request) {
    const r = typeof request === "string" ? { content: request } : request;
    const options = { add_special: r.add_special ?? true, parse_special: r.parse_special ?? true };
    const tokens = await this.client.request({ type: "tokenize", text: r.content ?? r.text ?? "", options });
    return { tokens };
  }

  /** The text of token ids: detokenize([1, 2]) or detokenize({tokens}) -> {content}. */
  async detokenize(request) {
    const ids = Array.isArray(request) ? request : request.tokens;
    return { content: await this.client.request({ type: "detokenize", ids }) };
  }

  #threadsOf(model) {
    this.threads = model?.threads ?? 1;
    this.threadsNote = model?.threadsNote ?? null;
  }

  /** Stop the running generation (its stream ends with finish_reason "abort"); a no-op when none runs. */
  abort() {
    this.client.abort();
  }

  /** Free the model (its bytes leave the worker's heap); the engine stays booted for another load(). */
  async unload() {
    this.model = null;
    await this.client.request({ type: "unload" });
  }

  /** Stop the worker: the engine cannot be used afterwards. */
  terminate() {
    this.model = null;
    this.client.terminate();
  }

  async *#stream(kind, input, request) {
    if (!this.model) throw new LlamayWebError("no model is loaded: load one first", "no-model");
    const id = completionId(kind === "chat" ? "chatcmpl" : "cmpl");
    const created = now();
    const model = this.model.name;
    const queue = [];
    let wake = null;
    let finished = false;
    let result = null;
    let error = null;
    const t0 = performance.now();
    let ttft = null;
    const done = this.client
      .request({ type: "generate", kind, input, params: params(request) }, (msg) => {
        if (msg.type !== "piece") return;
        ttft ??= performance.now() - t0;
        queue.push(msg);
        wake?.();
      })
      .then(
        (r) => (result = r),
        (e) => (error = e),
      )
      .finally(() => {
        finished = true;
        wake?.();
      });
    const onAbort = () => this.abort();
    request.signal?.addEventListener("abort", onAbort);
    const choice = (fields) => ({ index: 0, ...fields });
    const chunk = (choices, extra = {}) => ({
      id,
      object: kind === "chat" ? "chat.completion.chunk" : "text_completion",
      created,
      model,
      choices,
      ...extra,
    });
    let first = true;
    const withTools = kind === "chat" && Array.isArray(request.tools) && request.tools.length > 0;
    try {
      while (!finished || queue.length) {
        if (!queue.length) {
          await new Promise((resolve) => (wake = resolve));
          wake = null;
          continue;
        }
        const msg = queue.shift();
        const extra = { llamay: { completion_tokens: msg.tokens } };
        if (withTools) {
          // a reply that may call tools: the worker's deltas, as the server streams them (text that may begin a
          // call is held until it is known)
          if (msg.delta) {
            const delta = first ? { role: "assistant", ...msg.delta } : msg.delta;
            yield chunk([choice({ delta, finish_reason: null })], extra);
            first = false;
          }
          continue;
        }
        if (kind === "chat") {
          const delta = first ? { role: "assistant", content: msg.text } : { content: msg.text };
          yield chunk([choice({ delta, finish_reason: null })], extra);
        } else {
          yield chunk([choice({ text: msg.text, finish_reason: null, logprobs: null })], extra);
        }
        first = false;
      }
      await done;
      if (error) throw error;
      const usage = usageOf(result.stats);
      const timings = timingsOf(result.stats, ttft, performance.now() - t0);
      if (withTools && (result.delta || first)) {
        const delta = { ...(first ? { role: "assistant", content: "" } : {}), ...result.delta };
        yield chunk([choice({ delta, finish_reason: null })]);
      }
      const end = kind === "chat" ? { delta: {} } : { text: "", logprobs: null };
      yield chunk([choice({ ...end, finish_reason: result.finish_reason })], { usage, timings });
    } finally {
      request.signal?.removeEventListener("abort", onAbort);
      if (!finished) this.abort(); // the consumer stopped reading: stop generating too
    }
  }
}

function usageOf(stats) {
  if (!stats) return null;
  const prompt = stats.prompt_tokens;
  const completion = stats.generated_tokens;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: stats.cached_tokens },
  };
}

/** llama.cpp server's `timings` names, plus ttft_ms (request sent to first piece, on the page) and total_ms. */
function timingsOf(stats, ttft, total) {
  const t = { ttft_ms: ttft, total_ms: total };
  if (!stats) return t;
  return {
    ...t,
    cache_n: stats.cached_tokens,
    prompt_n: stats.prompt_tokens - stats.cached_tokens,
    prompt_ms: stats.prompt_seconds * 1000,
    prompt_per_second: stats.prompt_tps,
    predicted_n: stats.generated_tokens,
    predicted_ms: stats.generate_seconds * 1000,
    predicted_per_second: stats.generate_tps,
  };
}

async function collect(chunks, kind) {
  let text = "";
  let last = null;
  let calls = null;
  for await (const c of chunks) {
    const ch = c.choices[0];
    text += kind === "chat" ? (ch.delta.content ?? "") : ch.text;
    for (const { index, ...piece } of ch.delta?.tool_calls ?? []) {
      // as OpenAI's clients join a stream: a call's first delta has its id and name, later ones argument pieces
      calls ??= [];
      if (!calls[index]) calls[index] = { ...piece, function: { ...piece.function } };
      else calls[index].function.arguments += piece.function.arguments;
    }
    last = c;
  }
  const finish_reason = last.choices[0].finish_reason;
  const message = { role: "assistant", content: calls && !text ? null : text };
  if (calls) message.tool_calls = calls;
  const choice =
    kind === "chat" ? { index: 0, message, finish_reason } : { index: 0, text, finish_reason, logprobs: null };
  return {
    id: last.id,
    object: kind === "chat" ? "chat.completion" : "text_completion",
    created: last.created,
    model: last.model,
    choices: [choice],
    usage: last.usage,
    timings: last.timings,
  };
}
