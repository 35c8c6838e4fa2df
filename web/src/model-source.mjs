// Stream a GGUF into ONE buffer in Pyodide's heap, chunk by chunk, with no second full copy:
// a Python bytearray of the file's size is allocated first, then each chunk is written into its memory
// through a PyBuffer view (the heap's own bytes). The wasm kernels later read the weights there in place.
//
// A source is a URL (http(s):, or file: under Node), a path under Node, a File/Blob, a fetch Response (e.g. one
// from the Cache API), or bytes (ArrayBuffer / typed array: copied once into the heap; meant for small models).
//
// Before anything is allocated, the first bytes must be the GGUF magic and the size must fit `maxBytes`: a file
// that is not a model, or one too large for the browser, fails at once with a clear message (LlamayWebError).

import { IS_NODE } from "./boot.mjs";
import { LlamayWebError, toWebError } from "./errors.mjs";

export const CHUNK_BYTES = 8 << 20;
export const GGUF_MAGIC = [0x47, 0x47, 0x55, 0x46]; // "GGUF"

/** The file name of a source: what messages call it. */
export function sourceName(source) {
  if (typeof source === "string") return source.split(/[\\/]/).pop() || source;
  if (source instanceof URL) return source.pathname.split("/").pop();
  if (typeof Blob !== "undefined" && source instanceof Blob) return source.name || "model.gguf";
  if (typeof Response !== "undefined" && source instanceof Response) {
    return decodeURIComponent(new URL(source.url || "http://x/model.gguf").pathname.split("/").pop());
  }
  return "model.gguf";
}

const MB = (n) => (n < 1e5 ? `${(n / 1e3).toFixed(1)} kB` : `${(n / 1e6).toFixed(n < 1e7 ? 1 : 0)} MB`);

/** Throws a "not-gguf" LlamayWebError unless `head` (the first bytes) is the GGUF magic. */
export function checkMagic(head, name) {
  if (GGUF_MAGIC.every((b, i) => head[i] === b)) return;
  const shown = Array.from(head.subarray(0, 4), (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : "."));
  const what = head.length ? `it starts with "${shown.join("")}"` : "it is empty";
  throw new LlamayWebError(
    `${name} is not a GGUF file: ${what}, and a GGUF model starts with "GGUF". ` +
      "Pick a .gguf model file (llama.cpp's format).",
    "not-gguf",
  );
}

export const HEAP_LIMIT_REASON = "WebAssembly's 4 GiB address space, less what Python and the KV cache need";

/** Throws a "too-large" LlamayWebError when `size` exceeds `maxBytes` (what the browser can hold, and why). */
export function checkSize(size, name, maxBytes, reason = HEAP_LIMIT_REASON) {
  if (maxBytes === undefined || maxBytes === null || size <= maxBytes) return;
  throw new LlamayWebError(
    `${name} is ${MB(size)}: too large for this browser's memory, which can hold a model of at most ` +
      `${MB(Math.max(0, maxBytes))} (${reason}). Try a smaller or more strongly quantized model, or run it ` +
      "natively with `llamay serve`.",
    "too-large",
  );
}

/** Calls write(offset, chunk) for every chunk; `size` first. */
class HeapWriter {
  constructor(web, size) {
    this.size = size;
    try {
      this.buffer = web.new_model_buffer(size); // a PyProxy of the bytearray
    } catch (err) {
      throw toWebError(err); // MemoryError, or the heap's growth refused: "too-large"
    }
    this.offset = 0;
  }

  /** A Uint8Array over the bytearray's bytes in the heap: taken anew for each chunk, because a heap
   * growth (any Python allocation) detaches earlier views. */
  view() {
    const pb = this.buffer.getBuffer("u8");
    const data = pb.data;
    pb.release(); // the bytearray itself keeps the memory alive; the view stays valid until the heap grows
    return data;
  }

  write(chunk) {
    if (this.offset + chunk.byteLength > this.size) {
      throw new Error(`the source has more than the ${this.size} bytes it announced`);
    }
    this.view().set(chunk, this.offset);
    this.offset += chunk.byteLength;
  }

  finish() {
    if (this.offset !== this.size) throw new Error(`the source ended after ${this.offset} of ${this.size} bytes`);
    return this.buffer;
  }
}

async function fromNodePath(web, path, onProgress, opts) {
  const { open } = await import("node:fs/promises");
  const fh = await open(path, "r");
  try {
    const { size } = await fh.stat();
    const head = new Uint8Array(4);
    const { bytesRead: got } = await fh.read(head, 0, 4, 0);
    checkMagic(head.subarray(0, got), opts.name);
    checkSize(size, opts.name, opts.maxBytes, opts.maxBytesReason);
    const w = new HeapWriter(web, size);
    while (w.offset < size) {
      // read straight into the heap: the file's bytes are copied once, from the OS into the bytearray
      const n = Math.min(CHUNK_BYTES, size - w.offset);
      const view = w.view().subarray(w.offset, w.offset + n);
      const { bytesRead } = await fh.read(view, 0, n, w.offset);
      if (bytesRead === 0) break;
      w.offset += bytesRead;
      onProgress?.(w.offset, size);
    }
    return w.finish();
  } finally {
    await fh.close();
  }
}

async function fromBlob(web, blob, onProgress, opts) {
  checkMagic(new Uint8Array(await blob.slice(0, 4).arrayBuffer()), opts.name);
  checkSize(blob.size, opts.name, opts.maxBytes, opts.maxBytesReason);
  const w = new HeapWriter(web, blob.size);
  for (let at = 0; at < blob.size; at += CHUNK_BYTES) {
    const part = blob.slice(at, Math.min(at + CHUNK_BYTES, blob.size));
    w.write(new Uint8Array(await part.arrayBuffer()));
    onProgress?.(w.offset, blob.size);
  }
  return w.finish();
}

async function fromURL(web, url, onProgress, opts) {
  let res;
  try {
    res = await fetch(url, opts.fetchInit);
  } catch (err) {
    throw new LlamayWebError(`${url} cannot be fetched: ${err.message ?? err}`, "network");
  }
  if (!res.ok) throw new LlamayWebError(`${url}: HTTP ${res.status} ${res.statusText}`.trim(), "network");
  return fromResponse(web, res, onProgress, opts);
}

/** A Response's body into the heap. Its size comes from x-llamay-size (a cached model) or Content-Length. */
async function fromResponse(web, res, onProgress, opts) {
  const length = Number(res.headers.get("x-llamay-size") || res.headers.get("content-length"));
  const encoded = res.headers.get("content-encoding");
  const reader = res.body.getReader();
  // the first bytes before anything is allocated: a file that is not a GGUF stops here
  const first = [];
  let seen = 0;
  while (seen < 4) {
    const { done, value } = await reader.read();
    if (done) break;
    first.push(value);
    seen += value.byteLength;
  }
  const head = concat(first, Math.min(seen, 4));
  try {
    checkMagic(head, opts.name);
    const known = length && !(encoded && encoded !== "identity");
    if (known) checkSize(length, opts.name, opts.maxBytes, opts.maxBytesReason);
  } catch (err) {
    reader.cancel().catch(() => {});
    throw err;
  }
  if (!length || (encoded && encoded !== "identity")) {
    // no size known up front: gather the chunks, then copy them in once
    const chunks = first;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      seen += value.byteLength;
      checkSize(seen, opts.name, opts.maxBytes, opts.maxBytesReason);
    }
    return fromBytes(web, concat(chunks, seen), onProgress);
  }
  const w = new HeapWriter(web, length);
  for (const chunk of first) w.write(chunk);
  onProgress?.(w.offset, length);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    w.write(value);
    onProgress?.(w.offset, length);
  }
  return w.finish();
}

function concat(chunks, n) {
  if (chunks.length === 1 && chunks[0].byteLength === n) return chunks[0];
  const out = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    const part = c.subarray(0, Math.min(c.byteLength, n - at));
    out.set(part, at);
    at += part.byteLength;
    if (at === n) break;
  }
  return out;
}

function fromBytes(web, bytes, onProgress) {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes.buffer ?? bytes, bytes.byteOffset ?? 0);
  const w = new HeapWriter(web, u8.byteLength);
  for (let at = 0; at < u8.byteLength; at += CHUNK_BYTES) {
    w.write(u8.subarray(at, Math.min(at + CHUNK_BYTES, u8.byteLength)));
    onProgress?.(w.offset, u8.byteLength);
  }
  return w.finish();
}

/**
 * Stream a model into Pyodide's heap.
 * @param {object} web the `llamay_web` helper module (from bootPyodide)
 * @param {string|URL|Blob|Response|ArrayBuffer|ArrayBufferView} source
 * @param {(done: number, total: number) => void} [onProgress]
 * @param {{name?: string, maxBytes?: number, maxBytesReason?: string, fetchInit?: RequestInit}} [opts] the name
 *   errors use (default: the source's file name), the largest size accepted and where that limit comes from,
 *   and fetch's options for a URL
 * @returns {Promise<{buffer: object, name: string, size: number}>} the bytearray (a PyProxy) and a name
 */
export async function streamModel(web, source, onProgress, opts = {}) {
  const name = opts.name ?? sourceName(source);
  opts = { ...opts, name };
  let buffer;
  if (typeof Blob !== "undefined" && source instanceof Blob) {
    buffer = await fromBlob(web, source, onProgress, opts);
  } else if (typeof Response !== "undefined" && source instanceof Response) {
    buffer = await fromResponse(web, source, onProgress, opts);
  } else if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const u8 = source instanceof Uint8Array ? source : new Uint8Array(source.buffer ?? source, source.byteOffset ?? 0);
    checkMagic(u8.subarray(0, 4), name);
    checkSize(u8.byteLength, name, opts.maxBytes, opts.maxBytesReason);
    buffer = fromBytes(web, source, onProgress);
  } else {
    const text = String(source);
    const isURL = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) && !/^[a-z]:\\/i.test(text);
    if (IS_NODE && (!isURL || text.startsWith("file:"))) {
      const { fileURLToPath } = await import("node:url");
      buffer = await fromNodePath(web, text.startsWith("file:") ? fileURLToPath(text) : text, onProgress, opts);
    } else {
      buffer = await fromURL(web, isURL ? text : new URL(text, globalThis.location?.href).href, onProgress, opts);
    }
  }
  return { buffer, name, size: buffer.length };
}

// llama.cpp's gguf-split naming (llama_split_path): NAME-00001-of-00003.gguf, the shard number from 1
const SPLIT_NAME = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;
const pad5 = (n) => String(n).padStart(5, "0");

/** {prefix, no (from 1), count} of a file name that follows llama.cpp's split naming, else null. */
export function splitName(name) {
  const m = SPLIT_NAME.exec(name);
  return m ? { prefix: m[1], no: Number(m[2]), count: Number(m[3]) } : null;
}

/** `text` (a URL or a path) with its file name replaced by shard `no` (from 1) of `count`. */
function shardOf(text, prefix, no, count) {
  const name = `${prefix}-${pad5(no)}-of-${pad5(count)}.gguf`;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text) && !/^[a-z]:\\/i.test(text)) {
    const url = new URL(text);
    url.pathname = url.pathname.replace(/[^/]*$/, encodeURIComponent(name));
    return url.href;
  }
  return text.replace(/[^\\/]*$/, name);
}

/**
 * The sources of every shard of a model: a URL or path whose file name is the first shard of a split model
 * (NAME-00001-of-0000N.gguf) gives all N, derived by llama.cpp's naming rule; an array (files picked together)
 * gives its items, ordered by name (the shards' names order them); anything else is one whole file.
 */
export function shardSources(source) {
  if (Array.isArray(source)) {
    if (source.length === 0) throw new LlamayWebError("no model file was given", "not-gguf");
    return [...source].sort((a, b) => (sourceName(a) < sourceName(b) ? -1 : sourceName(a) > sourceName(b) ? 1 : 0));
  }
  const text = typeof source === "string" ? source : source instanceof URL ? source.href : null;
  const split = text === null ? null : splitName(decodeURIComponent(sourceName(text.split(/[?#]/)[0])));
  if (!split || split.no !== 1 || split.count < 2) return [source];
  const base = text.split(/[?#]/)[0];
  return Array.from({ length: split.count }, (_, i) => shardOf(base, split.prefix, i + 1, split.count));
}

/**
 * Stream every shard of a model (see shardSources) into the heap, one buffer each, in order. The size limit
 * applies to all of them together; progress counts the bytes of all.
 * @returns {Promise<{buffers: object[], names: string[], size: number}>} the bytearrays (PyProxies) and names
 */
export async function streamShards(web, sources, onProgress, opts = {}) {
  const buffers = [];
  const names = [];
  let loaded = 0;
  try {
    for (const [i, source] of sources.entries()) {
      const name = i === 0 && opts.name ? opts.name : sourceName(source);
      const maxBytes = opts.maxBytes === undefined || opts.maxBytes === null ? opts.maxBytes : opts.maxBytes - loaded;
      const progress = onProgress && ((done, total) => onProgress(loaded + done, loaded + total));
      let r;
      try {
        r = await streamModel(web, source, progress, { ...opts, name, maxBytes });
      } catch (err) {
        if (sources.length > 1 && err instanceof Error) {
          err.message = `shard ${i + 1} of ${sources.length} of a split model: ${err.message}`;
        }
        throw err;
      }
      buffers.push(r.buffer);
      names.push(name);
      loaded += r.size;
    }
  } catch (err) {
    for (const b of buffers) b.destroy();
    throw err;
  }
  return { buffers, names, size: loaded };
}
