"""The wasm backend: the kernel interface over C kernels compiled to WebAssembly SIMD (`wasm/src`).

A thin layer: a buffer is an address (int) in the module's linear memory; `bind` places a weight's bytes there
once (a copy under wasmtime; in place under Pyodide, where they already live in the heap); each kernel is one
call of an exported function with addresses and sizes. Scratch for the quantised activation rows is kept and
grown, never allocated per call. The runtime (`runtime.load_runtime`) hides the platform.
"""

from __future__ import annotations

import ctypes
from array import array
from dataclasses import dataclass
from typing import Any

from ..errors import LlamayError, UnsupportedTypeError
from ..ggml_types import GGMLType, block_size
from ..kernels.gelu import gelu_table
from ..kernels.interface import BatchView, Weight
from .runtime import Runtime, load_runtime

F32 = 4
RUNNABLE = frozenset(
    {
        GGMLType.F32, GGMLType.F16, GGMLType.BF16,
        GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0, GGMLType.IQ4_NL,
        GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_XS,
    }
)  # fmt: skip


@dataclass
class WasmWeight:
    """A bound weight: its bytes' address and, for vectors, the address of its values as float32."""

    addr: int
    f32: int  # address of the values as float32 (vectors: norms, biases, factors), else 0
    data: Any = None  # the bound buffer, kept alive while the weight is (the runtime may read it in place)


class WasmBackend:
    name = "wasm"
    runnable_types = RUNNABLE

    def __init__(self, runtime: Runtime | None = None) -> None:
        self.rt = runtime or load_runtime()
        self.fn = self.rt.fn
        self.variant = self.rt.variant
        for t in RUNNABLE:
            if not self.fn["llamay_supports"](int(t)):
                raise LlamayError(f"the {self.variant} kernel module does not run {t.name}")
        self._scratch, self._scratch_bytes = 0, 0
        self._act_bytes: dict[tuple[int, int, int], int] = {}  # (type, n, k) -> scratch bytes of a matmul
        self._ids = self.rt.alloc(F32)  # one int32: the row id when a vector is decoded at bind
        self._topk = (0, 0, 0)  # (capacity, indices address, values address)
        self._gelu_addr = 0  # ggml's fp16 GELU table in linear memory, written on first use

    def _gelu_table(self) -> int:
        """The address of ggml's GELU table (core/kernels/gelu.py), copied into linear memory once."""
        if not self._gelu_addr:
            table = gelu_table()
            self._gelu_addr = self.alloc_f32(len(table))
            self.write_f32(self._gelu_addr, table)
        return self._gelu_addr

    # -- memory ---------------------------------------------------------------------------------------------

    def _view(self, addr: int, n: int, code: str) -> memoryview:
        """A writable view of n items of linear memory at addr (no copy)."""
        raw = (ctypes.c_ubyte * (4 * n)).from_address(self.rt.base + addr)
        return memoryview(raw).cast("B").cast(code)

    def alloc_f32(self, n: int) -> int:
        return self.rt.alloc(F32 * n)

    def alloc_i32(self, n: int) -> int:
        return self.rt.alloc(F32 * n)

    def write_f32(self, buf: int, values: Any, offset: int = 0) -> None:
        vals = values if isinstance(values, array) and values.typecode == "f" else array("f", values)
        self._view(buf + F32 * offset, len(vals), "f")[:] = memoryview(vals).cast("B").cast("f")

    def write_i32(self, buf: int, values: Any, offset: int = 0) -> None:
        vals = values if isinstance(values, array) and values.typecode == "i" else array("i", values)
        self._view(buf + F32 * offset, len(vals), "i")[:] = memoryview(vals).cast("B").cast("i")

    def read_f32(self, buf: int, offset: int, n: int) -> list[float]:
        return self._view(buf + F32 * offset, n, "f").tolist()

    def copy(self, dst: int, dst_off: int, src: int, src_off: int, n: int) -> None:
        base = self.rt.base
        ctypes.memmove(base + dst + F32 * dst_off, base + src + F32 * src_off, F32 * n)

    def _scratch_for(self, nbytes: int) -> int:
        if nbytes > self._scratch_bytes:
            self._scratch_bytes = max(nbytes, 2 * self._scratch_bytes)
            self._scratch = self.rt.alloc(self._scratch_bytes)
        return self._scratch

    # -- weights --------------------------------------------------------------------------------------------

    def bind(self, name: str, t: GGMLType, shape: tuple[int, ...], data: memoryview) -> Weight:
        if t not in RUNNABLE:
            ok = ", ".join(sorted(x.name for x in RUNNABLE))
            raise UnsupportedTypeError(f"{name}: the wasm backend does not run {t.name}; it runs {ok}")
        n_in = shape[0]
        n_out = 1
        for d in shape[1:]:
            n_out *= d
        if n_in % block_size(t):
            raise ValueError(f"{name}: rows of {n_in} are not whole {t.name} blocks")
        addr = self.rt.place(data)
        f32 = addr if t == GGMLType.F32 else 0
        if n_out == 1 and t != GGMLType.F32:  # a vector: decoded once for the elementwise kernels
            f32 = self.rt.alloc(F32 * n_in)
            self.write_i32(self._ids, (0,))
            self._check(self.fn["llamay_get_rows"](int(t), f32, addr, self._ids, 1, n_in, 1), name)
        return Weight(name, t, n_in, n_out, WasmWeight(addr, f32, data))

    @staticmethod
    def _check(rc: int, what: str) -> None:
        if rc:  # -1: type not run, -2: rows not whole blocks (bind refuses both first)
            raise LlamayError(f"wasm kernel failed on {what} (code {rc})")

    # -- kernels --------------------------------------------------------------------------------------------

    def get_rows(self, out: int, w: Weight, ids: int, n: int) -> None:
        rc = self.fn["llamay_get_rows"](int(w.type), out, w.handle.addr, ids, n, w.n_in, w.n_out)
        if rc == -3:
            raise LlamayError(f"{w.name}: a row id is outside 0..{w.n_out - 1}")
        self._check(rc, w.name)

    def matmul(self, out: int, w: Weight, x: int, n: int) -> None:
        t = int(w.type)
        key = (t, n, w.n_in)
        need = self._act_bytes.get(key)
        if need is None:  # one call fewer per matmul: a call costs microseconds under Pyodide's ctypes
            need = self._act_bytes[key] = self.fn["llamay_act_bytes"](t, n, w.n_in)
        scratch = self._scratch_for(need)
        rc = self.fn["llamay_matmul"](t, out, w.handle.addr, x, n, w.n_in, w.n_out, scratch)
        self._check(rc, w.name)

    def add_bias(self, x: int, b: Weight, n: int) -> None:
        self.fn["llamay_add_bias"](x, b.handle.f32, n, b.n_in)

    def rms_norm(self, out: int, x: int, w: Weight | None, n: int, dim: int, eps: float) -> None:
        self.fn["llamay_rms_norm"](out, x, w.handle.f32 if w is not None else 0, n, dim, eps)

    def layer_norm(self, out: int, x: int, w: Weight, b: Weight | None, n: int, dim: int, eps: float) -> None:
        self.fn["llamay_layer_norm"](out, x, w.handle.f32, b.handle.f32 if b is not None else 0, n, dim, eps)

    def head_rms_norm(self, x: int, w: Weight, n: int, n_heads: int, head_dim: int, eps: float) -> None:
        self.fn["llamay_rms_norm"](x, x, w.handle.f32, n * n_heads, head_dim, eps)

    def rope(
        self,
        x: int,
        pos: int,
        n: int,
        n_heads: int,
        head_dim: int,
        n_rot: int,
        base: float,
        scale: float,
        neox: bool,
        freq_factors: Weight | None,
    ) -> None:
        theta_scale = array("f", (base ** (-2.0 / n_rot),))[0]  # float32, as ggml and portable
        ff = freq_factors.handle.f32 if freq_factors is not None else 0
        self.fn["llamay_rope"](x, pos, n, n_heads, head_dim, n_rot, theta_scale, scale, int(neox), ff)

    def scale(self, x: int, s: float, count: int) -> None:
        self.fn["llamay_scale"](x, s, count)

    def add(self, out: int, a: int, b: int, count: int) -> None:
        self.fn["llamay_add"](out, a, b, count)

    def swiglu(self, out: int, gate: int, up: int, count: int) -> None:
        self.fn["llamay_swiglu"](out, gate, up, count)

    def geglu(self, out: int, gate: int, up: int, count: int) -> None:
        self.fn["llamay_geglu"](out, gate, up, count, self._gelu_table())

    def gelu(self, x: int, count: int) -> None:
        self.fn["llamay_gelu"](x, count, self._gelu_table())

    def kv_store(self, cache: int, layer: int, n_slots: int, slots: int, src: int, n: int, dim: int) -> None:
        self.fn["llamay_kv_store"](cache, layer, n_slots, slots, src, n, dim)

    def attention(
        self,
        out: int,
        q: int,
        k_cache: int,
        v_cache: int,
        layer: int,
        n_slots: int,
        batch: BatchView,
        n_head: int,
        n_head_kv: int,
        head_dim: int,
        head_dim_v: int,
        kq_scale: float,
        causal: bool,
        window: int,
    ) -> None:
        b = batch
        self.fn["llamay_attention"](
            out, q, k_cache, v_cache, layer, n_slots, b.n, b.pos, b.seq, b.pages, b.page_off, b.seq_len,
            b.page_size, n_head, n_head_kv, head_dim, head_dim_v, kq_scale, int(causal), window,
        )  # fmt: skip

    def argmax(self, x: int, offset: int, n: int) -> int:
        return self.fn["llamay_argmax"](x + F32 * offset, n)

    def top_k(self, x: int, offset: int, n: int, k: int) -> list[tuple[int, float]]:
        cap, idx, val = self._topk
        if k > cap:
            cap = max(k, 64)
            idx, val = self.rt.alloc(F32 * cap), self.rt.alloc(F32 * cap)
            self._topk = (cap, idx, val)
        got = self.fn["llamay_top_k"](x + F32 * offset, n, k, idx, val)
        return list(zip(self._view(idx, got, "i").tolist(), self._view(val, got, "f").tolist(), strict=True))

    def mean_pool(self, out: int, x: int, n: int, dim: int) -> None:
        self.fn["llamay_mean_pool"](out, x, n, dim)

    def l2_normalize(self, x: int, dim: int) -> None:
        self.fn["llamay_l2_normalize"](x, dim)
