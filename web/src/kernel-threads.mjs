// Kernel threads in the browser: the threads build of the kernels (wasm/llamay_kernels_threads.wasm: atomics, a
// shared memory import) instantiated once per thread over ONE shared WebAssembly.Memory. Part 0 is the engine
// worker itself (Python under Pyodide calls its exports through wasm/backend_threads.py); parts 1 .. n-1 are
// module workers (kernel-thread.mjs) that sit in llamay_thread_loop, sleeping in memory.atomic.wait32 until part 0
// posts a command list (one a forward pass, at the backend's sync). The weights are copied into that memory once;
// every thread reads them there in place.
//
// Memory layout (addresses of the shared memory):
//   0 .. 64 KiB                 unused (address 0 stays the null pointer)
//   64 KiB + i * REGION         instance i's static data, then its shadow stack (growing down to it)
//   heapBase                    the control block (llamay_ctl_bytes), then the heap Python allocates from

export const MAX_THREADS = 16; // the instances' regions below the heap; more is refused by name (llamay.mjs)
export const THREADS_MODULE = "llamay_kernels_threads.wasm";
const PAGE = 65536;
const REGION = 1 << 20; // one instance: its static data (a few KiB of tables) and a stack of about 1 MiB
const MAX_PAGES = 65535; // what the module's memory import allows (wasm-ld --max-memory=4294901760)
const CTL_NPARTS = 3; // word of the control block (wasm/src/threads.c)

/** Why kernel threads cannot run here (a sentence), or null when they can. */
export function threadsUnavailable() {
  if (typeof SharedArrayBuffer === "undefined") return "SharedArrayBuffer is missing in this browser";
  if (!globalThis.crossOriginIsolated) {
    return "the page is not cross-origin isolated (it needs the COOP/COEP headers) so it cannot share memory";
  }
  if (typeof Worker === "undefined" || typeof WorkerGlobalScope === "undefined") {
    return "kernel threads run in a browser's Web Worker only";
  }
  return null;
}

/** Instance `index` of the threads build on `memory` (its static data and stack in region `index`). */
export function instantiateKernels(module, memory, index) {
  const base = PAGE + index * REGION;
  const g = (value, mutable) => new WebAssembly.Global({ value: "i32", mutable }, value);
  const env = {
    memory,
    __memory_base: g(base, false),
    __table_base: g(0, false),
    __stack_pointer: g(base + REGION - 16, true),
    __indirect_function_table: new WebAssembly.Table({ initial: 0, element: "anyfunc" }),
  };
  const instance = new WebAssembly.Instance(module, { env });
  for (const f of ["__wasm_apply_data_relocs", "__wasm_call_ctors"]) instance.exports[f]?.();
  return instance.exports;
}

/** n kernel threads over one shared memory; what backend_threads.py drives. */
export class KernelThreads {
  constructor(n, memory, exports, workers, ctl, heapBase) {
    this.threads = n;
    this.memory = memory;
    this.exports = exports; // part 0's instance: called on the engine worker's own thread
    this.workers = workers;
    this.ctl = ctl;
    this.heapBase = heapBase;
    this.stopped = false;
  }

  /** Grow the memory to hold `top` bytes (the Python side's bump allocator calls this). */
  ensure(top) {
    const have = this.memory.buffer.byteLength;
    if (top > have) this.memory.grow(Math.ceil((top - have) / PAGE));
  }

  /** End the other threads' loops and the workers; the memory goes with the last reference to it. */
  stop() {
    if (this.stopped) return;
    this.stopped = true;
    this.exports.llamay_stop_threads(this.ctl);
    for (const w of this.workers) w.terminate();
  }
}

/**
 * Start n kernel threads (n >= 2) on the threads build's bytes; resolves when every worker is in its loop.
 * @param {number} n
 * @param {Uint8Array} bytes wasm/llamay_kernels_threads.wasm
 * @returns {Promise<KernelThreads>}
 */
export async function startKernelThreads(n, bytes) {
  if (!WebAssembly.validate(bytes)) throw new Error(`${THREADS_MODULE} does not validate in this browser`);
  const module = await WebAssembly.compile(bytes);
  const heapBase = PAGE + MAX_THREADS * REGION;
  const memory = new WebAssembly.Memory({ initial: heapBase / PAGE + 1, maximum: MAX_PAGES, shared: true });
  const exports = instantiateKernels(module, memory, 0);
  const ctl = heapBase;
  const words = exports.llamay_ctl_bytes() / 4;
  new Int32Array(memory.buffer, ctl, words).fill(0);
  new Int32Array(memory.buffer, ctl, words)[CTL_NPARTS] = n;
  const url = new URL("./kernel-thread.mjs", import.meta.url);
  const workers = [];
  const started = [];
  for (let i = 1; i < n; i++) {
    const w = new Worker(url, { type: "module", name: `llamay kernels ${i}` });
    workers.push(w);
    started.push(
      new Promise((resolve, reject) => {
        w.onmessage = (e) => (e.data?.ready ? resolve() : reject(new Error(e.data?.error ?? "no ready message")));
        w.onerror = (e) => reject(new Error(`kernel thread ${i}: ${e.message ?? "failed to start"}`));
      }),
    );
    w.postMessage({ module, memory, index: i, ctl, gen: 0 }); // gen: the control block's CTL_GEN, still 0
  }
  try {
    await Promise.all(started);
  } catch (err) {
    for (const w of workers) w.terminate();
    throw err;
  }
  const heap = heapBase + Math.ceil(exports.llamay_ctl_bytes() / 64) * 64;
  return new KernelThreads(n, memory, exports, workers, ctl, heap);
}
