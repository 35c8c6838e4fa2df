// Runs a command list from an image on the threads build (wasm/llamay_kernels_threads.wasm) with 1..N kernel
// threads (Node worker_threads over one shared WebAssembly.Memory), and prints the sha256 of the heap after each
// run, and which commands take a barrier before them and which run split, as JSON. Used by tests/wasm/test_threads.py.
//   node --experimental-wasm-relaxed-simd threads_node.mjs MODULE IMAGE HEAP_BASE END CTL LIST COUNT THREADS...
// (the heap from HEAP_BASE to END is hashed)
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
// the browser's own instantiation (each instance's static data and stack in its region of 1 MiB from 64 KiB)
import { instantiateKernels as instantiate } from "../../web/src/kernel-threads.mjs";

if (!isMainThread) {
  const { module, memory, index, ctl, gen } = workerData;
  const ex = instantiate(module, memory, index);
  parentPort.postMessage("ready");
  ex.llamay_thread_loop(ctl, index, gen);
  parentPort.postMessage("stopped");
} else {
  const [modPath, imgPath, heapBase, end, ctl, list, count, ...threads] = process.argv.slice(2);
  const module = new WebAssembly.Module(readFileSync(modPath));
  const image = readFileSync(imgPath);
  const top = Number(heapBase) + image.length;
  const memory = new WebAssembly.Memory({ initial: Math.ceil(top / 65536) + 1, maximum: 65535, shared: true });
  const main = instantiate(module, memory, 0);
  const heap = new Uint8Array(memory.buffer);
  const runs = {};
  for (const n of threads.map(Number)) {
    heap.set(image, Number(heapBase));
    const words = new Int32Array(memory.buffer, Number(ctl), main.llamay_ctl_bytes() / 4);
    words.fill(0);
    words[3] = n; // CTL_NPARTS
    const workers = [];
    for (let i = 1; i < n; i++) {
      const w = new Worker(new URL(import.meta.url), { workerData: { module, memory, index: i, ctl: Number(ctl), gen: 0 } });
      await new Promise((resolve) => w.once("message", resolve));
      workers.push(w);
    }
    const rc = main.llamay_run_list(Number(ctl), Number(list), Number(count));
    const again = main.llamay_run_list(Number(ctl), Number(list), Number(count)); // a second list: the same waits
    main.llamay_stop_threads(Number(ctl));
    await Promise.all(workers.map((w) => new Promise((resolve) => w.once("exit", resolve))));
    const region = heap.slice(Number(heapBase), Number(end)); // the scratch after `end`: a share per thread
    runs[n] = { rc, again, sha256: createHash("sha256").update(region).digest("hex") };
  }
  // how every part runs the list: the commands a barrier comes before, and those split over the parts
  const at = Number(ctl) + main.llamay_ctl_bytes();
  main.llamay_list_plan(Number(list), Number(count), at);
  const plan = [...new Int32Array(memory.buffer, at, Number(count))];
  const where = (bit) => plan.flatMap((how, i) => (how & bit ? [i] : []));
  console.log(JSON.stringify({ runs, barriers: where(1), split: where(2) }));
}
