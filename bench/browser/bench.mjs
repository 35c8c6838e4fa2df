// The page side of bench/browser_vs_wllama.py: both engines in one page, driven from Playwright through
// window.bench. wllama (llama.cpp compiled to WebAssembly, npm @wllama/wllama@2.4.0) runs in its own worker,
// forced to its single-thread build (only that build's path is given, and n_threads: 1); llamay runs in
// llamay-worker.mjs (Pyodide + the wasm kernel backend).

import { Wllama } from "/bench/node_modules/@wllama/wllama/esm/index.js";

const WLLAMA_ST = "/bench/node_modules/@wllama/wllama/esm/single-thread/wllama.wasm";
const quiet = { debug: () => {}, log: () => {}, warn: console.warn, error: console.error };

// -- wllama -------------------------------------------------------------------------------------------------

let wllama = null;

async function wllamaLoad(modelURL, nCtx) {
  const t0 = performance.now();
  wllama = new Wllama({ "single-thread/wllama.wasm": WLLAMA_ST }, { logger: quiet, suppressNativeLog: true });
  const blob = await (await fetch(modelURL)).blob();
  await wllama.loadModel([blob], { n_threads: 1, n_ctx: nCtx, n_batch: 512, seed: 1 });
  return {
    load_ms: performance.now() - t0,
    multithread: wllama.isMultithread(),
    threads: wllama.getNumThreads(),
    version: Wllama.getLibllamaVersion?.() ?? "",
  };
}

async function wllamaTokenize(text) {
  return wllama.tokenize(text, true);
}

/** Greedy: prompt, first token, then nGen decode steps (decode the previous token, sample the next). */
async function wllamaRun(ids, nGen) {
  await wllama.kvClear();
  await wllama.samplingInit({ temp: 0, top_k: 1 });
  const t0 = performance.now();
  await wllama.decode(ids, {});
  const t1 = performance.now();
  let { token } = await wllama.samplingSample();
  const t2 = performance.now();
  const tokens = [token];
  const stamps = [t2];
  for (let i = 0; i < nGen; i++) {
    await wllama.decode([token], {});
    ({ token } = await wllama.samplingSample());
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
    text: await wllama.detokenize(tokens, true),
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

let worker = null;
let nextId = 0;
const pending = new Map();

function call(type, payload = {}) {
  const id = ++nextId;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, type, ...payload });
  });
}

async function llamayBoot(env) {
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
}

window.bench = {
  crossOriginIsolated: self.crossOriginIsolated,
  userAgent: navigator.userAgent,
  wllama: { load: wllamaLoad, tokenize: wllamaTokenize, run: wllamaRun, completion: wllamaCompletion, exit: () => wllama?.exit() },
  llamay: {
    boot: llamayBoot,
    load: (url) => call("load", { url }),
    run: (ids, nGen) => call("run", { ids, nGen }),
    overhead: (tok, reps) => call("overhead", { tok, reps }),
  },
};
window.benchReady = true;
