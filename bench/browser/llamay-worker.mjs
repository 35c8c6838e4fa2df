// The llamay side of bench/browser_vs_wllama.py: a module Web Worker that boots Pyodide from web/dist (through
// web/src/runtime.mjs, as the engine's own worker does), streams the GGUF into its heap, and runs
// llamay_bench.py's generation on request. Also replays a recorded decode step's kernel calls from JavaScript,
// straight on the kernel module's exports, to time the kernels without Python.
//
// Messages in: {id, type: "boot", env} | {id, type: "load", url, threads?} | {id, type: "run", ids, nGen}
//   | {id, type: "overhead", tok, reps}
// Messages out: {id, value} | {id, error}

import { LlamayRuntime } from "/web/src/runtime.mjs";

let rt = null;
let bench = null;

const toJs = (proxy) => {
  try {
    return proxy?.toJs ? proxy.toJs({ dict_converter: Object.fromEntries }) : proxy;
  } finally {
    proxy?.destroy?.();
  }
};

/** The kernel module's exports, from Emscripten's table of the libraries ctypes.CDLL loaded. */
function kernelExports(pyodide) {
  const libs = pyodide._module.LDSO.loadedLibsByName;
  const key = Object.keys(libs).find((k) => /llamay_kernels(_relaxed)?\.wasm$/.test(k));
  if (!key) throw new Error("the kernel module is not loaded");
  return libs[key].exports;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const handlers = {
  async boot({ env }) {
    const t0 = performance.now();
    rt = await LlamayRuntime.create({ distURL: new URL("/web/dist/", self.location.href), env });
    const src = await (await fetch("/bench/llamay_bench.py")).text();
    rt.pyodide.FS.writeFile("/llamay-web/llamay_bench.py", src);
    bench = rt.pyodide.pyimport("llamay_bench");
    return { boot_ms: performance.now() - t0, crossOriginIsolated: self.crossOriginIsolated };
  },

  async load({ url, threads }) {
    const t0 = performance.now();
    const info = await rt.loadModel(new URL(url, self.location.href).href, { backend: "wasm", threads });
    if ((info.threads ?? 1) !== (threads ?? 1)) throw new Error(`llamay runs ${info.threads} threads: ${info.threadsNote}`);
    return { ...info, ...toJs(bench.info(rt.session)), load_ms: performance.now() - t0 };
  },

  async run({ ids, nGen }) {
    const pyIds = rt.pyodide.toPy(ids);
    try {
      return toJs(bench.run(rt.session, pyIds, nGen));
    } finally {
      pyIds.destroy();
    }
  },

  // The last generated token's decode step, repeated at the same position: `reps` times through Python (as
  // generation runs it), each followed by a replay of its recorded kernel calls from JS (the kernels alone) and
  // by the step with every kernel stubbed out in Python (the Python code alone). Alternating them keeps a busy
  // machine's slowdowns out of their differences.
  async overhead({ tok, reps }) {
    const stepper = bench.Stepper(rt.session, tok);
    try {
      const rec = toJs(stepper.record());
      const ex = kernelExports(rt.pyodide);
      const fns = rec.calls.map((c) => ex[c[0]]);
      const args = rec.calls.map((c) => c.slice(1));
      const replay = (idx) => {
        const t = performance.now();
        for (const i of idx) fns[i](...args[i]);
        return performance.now() - t;
      };
      const all = fns.map((_, i) => i);
      stepper.step();
      replay(all); // warm
      const py = [];
      const js = [];
      const stub = [];
      for (let r = 0; r < reps; r++) {
        py.push(stepper.step());
        js.push(replay(all));
        stub.push(stepper.step_stubbed());
      }
      // per kernel: each export's calls replayed alone
      const byName = {};
      for (const name of Object.keys(rec.counts)) {
        const idx = all.filter((i) => rec.kinds[i] === name);
        const t = Array.from({ length: Math.max(5, reps >> 1) }, () => replay(idx));
        byName[name] = { calls: idx.length, ms: median(t) };
      }
      return {
        n_calls: rec.calls.length,
        step_ms: median(py),
        kernels_ms: median(js),
        overhead_ms: median(py.map((p, i) => p - js[i])),
        python_ms: median(stub),
        byName,
      };
    } finally {
      stepper.destroy();
    }
  },
};

self.onmessage = async (e) => {
  const { id, type } = e.data;
  try {
    self.postMessage({ id, value: await handlers[type](e.data) });
  } catch (err) {
    self.postMessage({ id, error: String(err?.stack ?? err) });
  }
};
