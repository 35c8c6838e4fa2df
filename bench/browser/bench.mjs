// The page side of bench/browser_vs_wllama.py: both engines in one page, driven from Playwright through
// window.bench. wllama (llama.cpp compiled to WebAssembly, npm @wllama/wllama@2.4.0) runs in its own worker,
// forced to its single-thread build (only that build's path is given, and n_threads: 1), and its multi-thread
// build on --threads threads; llamay runs in llamay-worker.mjs (Pyodide + the wasm kernel backend), once on one
// thread and once on --threads kernel threads (web/src/kernel-threads.mjs), each in its own worker.

import { Wllama } from "/bench/node_modules/@wllama/wllama/esm/index.js";

const WLLAMA_ST = "/bench/node_modules/@wllama/wllama/esm/single-thread/wllama.wasm";
const quiet = { debug: () => {}, log: () => {}, warn: console.warn, error: console.error };

// -- wllama -------------------------------------------------------------------------------------------------

const WLLAMA_MT = "/bench/node_modules/@wllama/wllama/esm/multi-thread/wllama.wasm";

let wllama = null; // the single-thread build (tokenizes for both engines)
let wllamaMT = null; // the multi-thread build, on bench.threads threads

async function wllamaLoad(modelURL, nCtx, threads = 1) {
  const t0 = performance.now();
  // one thread: only the single-thread build's path, so wllama cannot pick the other
  const paths = threads === 1 ? { "single-thread/wllama.wasm": WLLAMA_ST } : { "single-thread/wllama.wasm": WLLAMA_ST,
    "multi-thread/wllama.wasm": WLLAMA_MT };
  const w = new Wllama(paths, { logger: quiet, suppressNativeLog: true });
  const blob = await (await fetch(modelURL)).blob();
  await w.loadModel([blob], { n_threads: threads, n_ctx: nCtx, n_batch: 512, seed: 1 });
  if (threads === 1) wllama = w;
  else wllamaMT = w;
  return {
    load_ms: performance.now() - t0,
    multithread: w.isMultithread(),
    threads: w.getNumThreads(),
    version: Wllama.getLibllamaVersion?.() ?? "",
  };
}

async function wllamaTokenize(text) {
  return wllama.tokenize(text, true);
}

/** Greedy: prompt, first token, then nGen decode steps (decode the previous token, sample the next). */
async function wllamaRun(ids, nGen, w = wllama) {
  await w.kvClear();
  await w.samplingInit({ temp: 0, top_k: 1 });
  const t0 = performance.now();
  await w.decode(ids, {});
  const t1 = performance.now();
  let { token } = await w.samplingSample();
  const t2 = performance.now();
  const tokens = [token];
  const stamps = [t2];
  for (let i = 0; i < nGen; i++) {
    await w.decode([token], {});
    ({ token } = await w.samplingSample());
    stamps.push(performance.now());
    tokens.push(token);
  }
  const steps = stamps.slice(1).map((t, i) => t - stamps[i]);
  return {
    prompt_tokens: ids.length,
    prompt_ms: t1 - t0,
    ttft_ms: t2 - t0,
    gen_ms: stamps.at(-1) - t2,
    gen_tokens: nGen,
    step_ms: steps,
    tokens,
    text: await w.detokenize(tokens, true),
  };
}

/** The same through wllama's own loop (createCompletion: sample, accept, decode), timed at each new token. */
async function wllamaCompletion(text, nGen) {
  const stamps = [];
  const t0 = performance.now();
  const out = await wllama.createCompletion(text, {
    nPredict: nGen + 1,
    sampling: { temp: 0, top_k: 1 },
    onNewToken: () => stamps.push(performance.now()),
  });
  return { ttft_ms: stamps[0] - t0, gen_ms: stamps.at(-1) - stamps[0], gen_tokens: stamps.length - 1, text: out };
}

// -- llamay -------------------------------------------------------------------------------------------------

/** A llamay engine in its own worker (llamay-worker.mjs): bench.llamay on 1 thread, bench.llamayMT on more. */
function llamayEngine() {
  let worker = null;
  let nextId = 0;
  const pending = new Map();
  const call = (type, payload = {}) => {
    const id = ++nextId;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, type, ...payload });
    });
  };
  const boot = (env) => {
    worker = new Worker(new URL("./llamay-worker.mjs", import.meta.url), { type: "module" });
    worker.onmessage = (e) => {
      const p = pending.get(e.data.id);
      pending.delete(e.data.id);
      if (e.data.error) p.reject(new Error(e.data.error));
      else p.resolve(e.data.value);
    };
    worker.onerror = (e) => {
      for (const p of pending.values()) p.reject(new Error(`llamay worker: ${e.message}`));
      pending.clear();
    };
    return call("boot", { env });
  };
  return {
    boot,
    load: (url, threads) => call("load", { url, threads }),
    run: (ids, nGen) => call("run", { ids, nGen }),
    overhead: (tok, reps) => call("overhead", { tok, reps }),
  };
}

window.bench = {
  crossOriginIsolated: self.crossOriginIsolated,
  userAgent: navigator.userAgent,
  cores: navigator.hardwareConcurrency,
  wllama: { load: wllamaLoad, tokenize: wllamaTokenize, run: wllamaRun, completion: wllamaCompletion, exit: () => wllama?.exit() },
  wllamaMT: { run: (ids, nGen) => wllamaRun(ids, nGen, wllamaMT), exit: () => wllamaMT?.exit() },
  llamay: llamayEngine(),
  llamayMT: llamayEngine(),
};
window.benchReady = true;
