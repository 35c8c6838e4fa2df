// Models kept in the browser's Cache API (one cache, "llamay-models-v1"), so a reload reads a model from disk
// instead of downloading it again. Works on a page and in a Web Worker of the same origin (they share it).
//
// Keys are URLs: a model loaded from a URL is kept under that absolute URL; a picked or dropped File under
//   <origin>/llamay-cache/file/<name>?size=<bytes>&mtime=<lastModified>
// Only a model that loaded and bound is stored (a file that is not a GGUF never is), written from the bytes
// already in Pyodide's heap after the load, in 8 MiB chunks. Each entry carries x-llamay-name, x-llamay-size,
// x-llamay-source ("url" | "file") and x-llamay-cached-at headers, which listCachedModels() reads without
// touching the bodies. A stored copy is never revalidated: after a model changes on the server, delete the
// entry (deleteCachedModel) or load it with cache: "reload".

export const CACHE_NAME = "llamay-models-v1";
const FILE_PREFIX = "/llamay-cache/file/";

/** Whether the Cache API can be used here (a secure context: https, or http on localhost / 127.0.0.1). */
export function cacheAvailable() {
  return typeof caches !== "undefined" && globalThis.isSecureContext !== false;
}

/**
 * The cache key of a model source, or null when it cannot be cached (bytes, a Response, a non-http URL).
 * @param {string|URL|Blob} source
 * @param {string} [base] what a relative URL is relative to (default: this realm's location)
 */
export function cacheKeyFor(source, base = globalThis.location?.href) {
  if (typeof Blob !== "undefined" && source instanceof Blob) {
    if (!source.name) return null;
    const query = `size=${source.size}&mtime=${source.lastModified ?? 0}`;
    return new URL(`${FILE_PREFIX}${encodeURIComponent(source.name)}?${query}`, base).href;
  }
  if (typeof source === "string" || source instanceof URL) {
    let url;
    try {
      url = new URL(source, base);
    } catch {
      return null;
    }
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  }
  return null;
}

async function open() {
  return caches.open(CACHE_NAME);
}

/** The cached Response for `key`, or null. */
export async function cachedModel(key) {
  if (!cacheAvailable() || !key) return null;
  return (await (await open()).match(key)) ?? null;
}

/**
 * Store `size` bytes under `key`, read chunk by chunk with readChunk(offset, length) -> Uint8Array (a copy).
 * Returns null when stored, else why not (the quota, or a storage error): storing is best effort.
 * @param {string} key
 * @param {number} size
 * @param {(offset: number, length: number) => Uint8Array} readChunk
 * @param {{name: string, source: string, onProgress?: (done: number, total: number) => void}} meta
 */
export async function storeModel(key, size, readChunk, meta) {
  if (!cacheAvailable()) return "the Cache API is not available here (not a secure context?)";
  const estimate = await globalThis.navigator?.storage?.estimate?.().catch(() => null);
  if (estimate?.quota && estimate.quota - (estimate.usage ?? 0) < size) {
    const free = Math.max(0, estimate.quota - (estimate.usage ?? 0));
    const mb = (n) => `${(n / 1e6).toFixed(0)} MB`;
    return `the browser's storage quota leaves ${mb(free)}, and the model is ${mb(size)}`;
  }
  const CHUNK = 8 << 20;
  let offset = 0;
  const body = new ReadableStream({
    pull(controller) {
      if (offset >= size) {
        controller.close();
        return;
      }
      const n = Math.min(CHUNK, size - offset);
      controller.enqueue(readChunk(offset, n));
      offset += n;
      meta.onProgress?.(offset, size);
    },
  });
  const headers = {
    "content-type": "application/octet-stream",
    "content-length": String(size),
    "x-llamay-name": encodeURIComponent(meta.name),
    "x-llamay-size": String(size),
    "x-llamay-source": meta.source,
    "x-llamay-cached-at": new Date().toISOString(),
  };
  try {
    await (await open()).put(key, new Response(body, { headers }));
    return null;
  } catch (err) {
    await deleteCachedModel(key).catch(() => {});
    return `${err.name ?? "Error"}: ${err.message ?? err}`;
  }
}

/** [{key, name, size, source, cachedAt}] of every cached model. */
export async function listCachedModels() {
  if (!cacheAvailable()) return [];
  const cache = await open();
  const out = [];
  for (const req of await cache.keys()) {
    const res = await cache.match(req);
    if (!res) continue;
    const h = res.headers;
    out.push({
      key: req.url,
      name: decodeURIComponent(h.get("x-llamay-name") ?? req.url.split("/").pop()),
      size: Number(h.get("x-llamay-size") ?? 0),
      source: h.get("x-llamay-source") ?? "url",
      cachedAt: h.get("x-llamay-cached-at") ?? "",
    });
  }
  return out;
}

/** Forget one cached model; true when there was one. */
export async function deleteCachedModel(key) {
  if (!cacheAvailable()) return false;
  return (await open()).delete(key);
}

/** Forget every cached model. */
export async function clearModelCache() {
  if (!cacheAvailable()) return false;
  return caches.delete(CACHE_NAME);
}

/** Whether `key` names a picked file (rather than a URL the model can be fetched from again). */
export function isFileKey(key) {
  try {
    return new URL(key).pathname.startsWith(FILE_PREFIX);
  } catch {
    return false;
  }
}
