// Stream a GGUF into ONE buffer in Pyodide's heap, chunk by chunk, with no second full copy:
// a Python bytearray of the file's size is allocated first, then each chunk is written into its memory
// through a PyBuffer view (the heap's own bytes). The wasm kernels later read the weights there in place.
//
// A source is a URL (http(s):, or file: under Node), a path under Node, a File/Blob, or bytes
// (ArrayBuffer / typed array: copied once into the heap; meant for small models and tests).

import { IS_NODE } from "./boot.mjs";

export const CHUNK_BYTES = 8 << 20;

function describe(source) {
  if (typeof source === "string") return source.split(/[\\/]/).pop() || source;
  if (source instanceof URL) return source.pathname.split("/").pop();
  if (typeof Blob !== "undefined" && source instanceof Blob) return source.name || "model.gguf";
  return "model.gguf";
}

/** Calls write(offset, chunk) for every chunk; `size` first. */
class HeapWriter {
  constructor(web, size) {
    this.size = size;
    this.buffer = web.new_model_buffer(size); // a PyProxy of the bytearray
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

async function fromNodePath(web, path, onProgress) {
  const { open } = await import("node:fs/promises");
  const fh = await open(path, "r");
  try {
    const { size } = await fh.stat();
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

async function fromBlob(web, blob, onProgress) {
  const w = new HeapWriter(web, blob.size);
  for (let at = 0; at < blob.size; at += CHUNK_BYTES) {
    const part = blob.slice(at, Math.min(at + CHUNK_BYTES, blob.size));
    w.write(new Uint8Array(await part.arrayBuffer()));
    onProgress?.(w.offset, blob.size);
  }
  return w.finish();
}

async function fromURL(web, url, onProgress) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  const length = Number(res.headers.get("content-length"));
  const encoded = res.headers.get("content-encoding");
  if (!length || (encoded && encoded !== "identity")) {
    // no size known up front: gather the chunks, then copy them in once
    const bytes = new Uint8Array(await res.arrayBuffer());
    return fromBytes(web, bytes, onProgress);
  }
  const w = new HeapWriter(web, length);
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    w.write(value);
    onProgress?.(w.offset, length);
  }
  return w.finish();
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
 * @param {string|URL|Blob|ArrayBuffer|ArrayBufferView} source
 * @param {(done: number, total: number) => void} [onProgress]
 * @returns {Promise<{buffer: object, name: string, size: number}>} the bytearray (a PyProxy) and a name
 */
export async function streamModel(web, source, onProgress) {
  const name = describe(source);
  let buffer;
  if (typeof Blob !== "undefined" && source instanceof Blob) {
    buffer = await fromBlob(web, source, onProgress);
  } else if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    buffer = fromBytes(web, source, onProgress);
  } else {
    const text = String(source);
    const isURL = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) && !/^[a-z]:\\/i.test(text);
    if (IS_NODE && (!isURL || text.startsWith("file:"))) {
      const { fileURLToPath } = await import("node:url");
      buffer = await fromNodePath(web, text.startsWith("file:") ? fileURLToPath(text) : text, onProgress);
    } else {
      buffer = await fromURL(web, isURL ? text : new URL(text, globalThis.location?.href).href, onProgress);
    }
  }
  return { buffer, name, size: buffer.length };
}
