"""Time the wasm matmul kernels against the numba backend, per weight type, on SmolLM2-shaped matrices: a rough
native proxy for the browser target (wllama is the reference there). The module runs under wasmtime (through the
backend, as the tests run it) and, where `node` is installed, under V8 (the browser's engine; Node 20 needs
--experimental-wasm-relaxed-simd, passed here). Prints milliseconds per matmul and the ratio numba / wasm
(above 1: wasm is faster), wasm being the relaxed module under V8 if it ran, else under wasmtime.

    python bench/wasm_kernels.py                      # every wasm type, n = 1 (decode) and 32 (prefill chunk)
    python bench/wasm_kernels.py --types Q4_1,Q8_0 --n 1,128 --shape 1536x576 --no-node

Times are the best of 9 runs of CPU time (the machine may be shared); each run repeats the call ~20 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llamay.errors import LlamayError
from llamay.ggml_types import GGMLType, block_size, type_size
from llamay.quants import BLOCKS, SUPPORTED_QUANTIZE, quantize

DEFAULT_TYPES = "Q4_1,Q4_0,Q5_0,Q5_1,Q8_0,IQ4_NL,Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,IQ4_XS,F16,BF16,F32"
# SmolLM2-135M: dim 576, FFN 1536, 30 layers; n_in x n_out of ffn_gate / ffn_up (ffn_down is 1536x576)
DEFAULT_SHAPE = "576x1536"


def weight_bytes(rng: random.Random, t: GGMLType, n_in: int, n_out: int) -> bytes:
    """Quantised from random floats where llamay can, else random blocks with small finite scales."""
    if t in SUPPORTED_QUANTIZE:
        return quantize(t, array("f", (rng.gauss(0.0, 0.1) for _ in range(n_in * n_out))))
    block = BLOCKS[t]
    out = bytearray(rng.randbytes(n_in * n_out // block_size(t) * type_size(t)))
    for b in range(0, len(out), block.size):
        for name, code in block.fields.items():
            if code == "e":
                at = b + block.offset[name]
                out[at : at + 2] = struct.pack("<e", rng.uniform(0.002, 0.02))
    return bytes(out)


def best_ms(fn, min_seconds: float = 0.02, runs: int = 9, clock=time.thread_time) -> float:
    """Best of `runs` runs of CPU time (this thread's, so time spent descheduled on a busy machine is not counted;
    `clock` = time.perf_counter where other threads do the work)."""
    fn()
    reps, t0 = 0, clock()
    while clock() - t0 < min_seconds:
        fn()
        reps += 1
    best = float("inf")
    for _ in range(runs):
        t0 = clock()
        for _ in range(reps):
            fn()
        best = min(best, (clock() - t0) / reps)
    return best * 1e3


def matmul_timer(be, t: GGMLType, data: bytes, n_in: int, n_out: int, n: int, rng: random.Random):
    w = be.bind("w", t, (n_in, n_out), memoryview(data))
    x = be.alloc_f32(n * n_in)
    be.write_f32(x, [rng.gauss(0.0, 1.0) for _ in range(n * n_in)])
    out = be.alloc_f32(n * n_out)
    return lambda: be.matmul(out, w, x, n)


# V8 harness: instantiates a module with the imports a dynamic linker would give it (as runtime_wasmtime does),
# then times llamay_matmul for each case of the JSON job read from stdin; prints {name: ms}.
NODE_HARNESS = r"""
const fs = require("fs");
const job = JSON.parse(fs.readFileSync(0, "utf8"));
function leb(b, at) { let r = 0, s = 0, x; do { x = b[at++]; r |= (x & 0x7f) << s; s += 7; } while (x & 0x80);
  return [at, r >>> 0]; }
function memInfo(b) { let [at, size] = leb(b, 9); const end = at + size; let n; [at, n] = leb(b, at); at += n;
  while (at < end) { const kind = b[at]; let len; [at, len] = leb(b, at + 1);
    if (kind === 1) { let m; [, m] = leb(b, at); return m; } at += len; } return 0; }
function cpuMs() { const u = process.cpuUsage(); return (u.user + u.system) / 1000; }
const out = {};
for (const [variant, path] of Object.entries(job.modules)) {
  const bytes = fs.readFileSync(path);
  if (!WebAssembly.validate(bytes)) { out[variant] = null; continue; }
  const memBase = 1024, stackTop = memBase + memInfo(bytes) + 262144 + 16 & ~15;
  const memory = new WebAssembly.Memory({ initial: Math.ceil(stackTop / 65536) + 1 });
  const env = { memory,
    __memory_base: new WebAssembly.Global({ value: "i32", mutable: false }, memBase),
    __table_base: new WebAssembly.Global({ value: "i32", mutable: false }, 0),
    __stack_pointer: new WebAssembly.Global({ value: "i32", mutable: true }, stackTop),
    __indirect_function_table: new WebAssembly.Table({ initial: 0, element: "anyfunc" }) };
  const ex = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env }).exports;
  let top = stackTop;
  const alloc = (n) => {
    const a = top; top = (top + n + 15) & ~15;
    const need = Math.ceil(top / 65536) - memory.buffer.byteLength / 65536;
    if (need > 0) memory.grow(need);
    return a;
  };
  const res = out[variant] = {};
  for (const c of job.cases) {
    const wb = fs.readFileSync(c.weights);
    const w = alloc(wb.length); new Uint8Array(memory.buffer, w, wb.length).set(wb);
    const x = alloc(4 * c.n * c.n_in), o = alloc(4 * c.n * c.n_out);
    const xf = new Float32Array(memory.buffer, x, c.n * c.n_in);
    for (let i = 0; i < xf.length; i++) xf[i] = Math.sin(i * 12.9898) * 2;
    const scratch = alloc(Math.max(16, ex.llamay_act_bytes(c.type, c.n, c.n_in)));
    const call = () => ex.llamay_matmul(c.type, o, w, x, c.n, c.n_in, c.n_out, scratch);
    if (call() !== 0) { res[c.name] = null; continue; }
    let reps = 0; const t0 = cpuMs(); while (cpuMs() - t0 < 20) { call(); reps++; }
    let best = Infinity;
    for (let r = 0; r < 9; r++) { const t = cpuMs(); for (let i = 0; i < reps; i++) call();
      best = Math.min(best, (cpuMs() - t) / reps); }
    res[c.name] = best;
  }
}
console.log(JSON.stringify(out));
"""


def node_times(cases: list[dict]) -> dict[str, dict[str, float]]:
    """{variant: {case name: ms}} under V8, or {} without node."""
    node = shutil.which("node")
    if node is None:
        print("# node not found: V8 timings skipped")
        return {}
    from llamay.wasm.runtime import MODULES

    here = Path(__file__).resolve().parent.parent / "wasm"
    job = {"modules": {v: str(here / f) for v, f in MODULES.items()}, "cases": cases}
    with tempfile.NamedTemporaryFile("w", suffix=".js", delete=False) as js:
        js.write(NODE_HARNESS)
    r = subprocess.run([node, "--experimental-wasm-relaxed-simd", js.name], input=json.dumps(job), text=True,
                       capture_output=True, check=False)  # fmt: skip
    Path(js.name).unlink()
    if r.returncode != 0:
        print(f"# node failed: {r.stderr.strip()[:500]}")
        return {}
    return {f"v8-{v}": t for v, t in json.loads(r.stdout).items() if t is not None}


def backends() -> dict[str, object]:
    from llamay.kernels import get_backend
    from llamay.wasm.backend import WasmBackend
    from llamay.wasm.runtime_wasmtime import WasmtimeRuntime

    found: dict[str, object] = {}
    for variant in ("simd128", "relaxed"):
        try:
            found[f"wt-{variant}"] = WasmBackend(WasmtimeRuntime(variant))
        except LlamayError as e:
            print(f"# wasm {variant}: {e}")
    try:
        found["numba"] = get_backend("numba")
    except LlamayError as e:
        print(f"# numba: {e}")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--types", default=DEFAULT_TYPES, help="comma-separated ggml type names")
    ap.add_argument("--n", default="1,32", help="comma-separated batch rows")
    ap.add_argument("--shape", default=DEFAULT_SHAPE, help="n_in x n_out (swapped for a type whose block does not fit)")
    ap.add_argument("--no-node", action="store_true", help="skip the V8 timings")
    args = ap.parse_args(argv)
    shape = tuple(int(v) for v in args.shape.lower().split("x"))
    found = backends()
    rng = random.Random(0)
    rows = []  # (type, n, n_in, n_out, weight bytes)
    for tname in args.types.split(","):
        t = GGMLType[tname.strip()]
        n_in, n_out = shape if shape[0] % block_size(t) == 0 else shape[::-1]
        data = weight_bytes(rng, t, n_in, n_out)
        rows += [(t, int(n), n_in, n_out, data) for n in args.n.split(",")]
    ms: dict[tuple, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for i, (t, n, n_in, n_out, data) in enumerate(rows):
            wfile = Path(tmp) / f"w{i}.bin"
            wfile.write_bytes(data)
            cases.append({"name": str(i), "type": int(t), "n": n, "n_in": n_in, "n_out": n_out, "weights": str(wfile)})
        v8 = {} if args.no_node else node_times(cases)
    for i, (t, n, n_in, n_out, data) in enumerate(rows):
        cell = ms.setdefault((t, n), {})
        for name, times in v8.items():
            cell[name] = times[str(i)]
        for name, be in found.items():
            if t in be.runnable_types:
                cell[name] = best_ms(matmul_timer(be, t, data, n_in, n_out, n, rng))
    names = [*v8, *found]
    wasm_ref = "v8-relaxed" if "v8-relaxed" in names else "wt-relaxed"
    print(f"# matmul ms per call (best of 9, CPU time); shape {args.shape} (or swapped); ratio = numba / {wasm_ref}")
    print(f"{'type':7s} {'n':>4s} " + " ".join(f"{nm:>11s}" for nm in names) + "   ratio")
    for (t, n), cell in ms.items():
        cells = " ".join(f"{cell[nm]:11.3f}" if nm in cell else f"{'-':>11s}" for nm in names)
        ratio = cell["numba"] / cell[wasm_ref] if "numba" in cell and wasm_ref in cell else float("nan")
        print(f"{t.name:7s} {n:4d} {cells}   {ratio:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
