"""The wasm backend: the kernel interface over C kernels compiled to WebAssembly SIMD (`wasm/src`).

A thin layer: a buffer is an address (int) in the module's linear memory; `bind` places a weight's bytes there
once (a copy under wasmtime; in place under Pyodide, where they already live in the heap); each kernel is one
call into the module. Scratch for the quantised activation rows is kept and grown, never allocated per call.
The runtime (`runtime.load_runtime`) hides the platform.

The kernel ops whose arguments are all plain (`llamay.kernels.ops`) and go to their export as they are need no
method here: theirs is made from the op's declaration.

A kernel call is a command: (op, *arguments) packed into linear memory the first time those arguments come,
kept in a table keyed by them, and run by `llamay_exec(address)`. Every decode step calls the same kernels with
the same arguments (positions, token ids and KV slots live in buffers), so after the first token each call is a
dict lookup and a one-argument call: under Pyodide a call costs ~0.5 µs plus ~0.2 µs per argument, and kernels
take 4 to 20 (wasm/src/exec.c).
"""

from __future__ import annotations

import ctypes
import struct
from array import array
from dataclasses import dataclass
from typing import Any

from ..errors import LlamayError, UnsupportedTypeError
from ..ggml_types import GGMLType, block_size
from ..kernels import compose
from ..kernels.gelu import gelu_table
from ..kernels.interface import BatchView, Weight
from ..kernels.moe import compose_experts
from ..kernels.ops import OPS as KERNEL_OPS
from ..kernels.ops import Op
from .runtime import OPS, RUNNABLE, SIGNATURES, Runtime, load_runtime

F32 = 4
CMD_BYTES = 96  # one command: 24 words (the longest, attention, takes 24: its op and 23 arguments)
CMD_SLOTS = 4096  # commands kept; past that the table starts over (prefill chunk sizes vary without bound)
_PACK = {"i": "I", "f": "f", "d": "d"}  # ints as u32: addresses past 2 GiB
FORMATS = {op: struct.Struct("<I" + "".join(_PACK[c] for c in SIGNATURES[name][1])) for name, op in OPS.items()}
_MATMUL, _GET_ROWS, _RMS_NORM, _LAYER_NORM, _ADD_BIAS, _ROPE, _GEGLU, _GELU, _ARGMAX, _TOP_K, _ATTENTION = (
    OPS[f"llamay_{k}"]
    for k in ("matmul", "get_rows", "rms_norm", "layer_norm", "add_bias", "rope", "geglu", "gelu", "argmax",
              "top_k", "attention")
)  # fmt: skip
_PDA = OPS["llamay_pda"]
# the C types an export takes a plain interface argument as, unchanged (a buffer is its address)
AS_IS = {"Buf": ("float *", "const float *"), "IBuf": ("int32_t *", "const int32_t *"), "int": ("int32_t",),
         "bool": ("int32_t",), "float": ("double",)}  # fmt: skip


@dataclass
class WasmWeight:
    """A bound weight: its bytes' address and, for vectors, the address of its values as float32."""

    addr: int
    f32: int  # address of the values as float32 (vectors: norms, biases, factors), else 0
    data: Any = None  # the bound buffer, kept alive while the weight is (the runtime may read it in place)
    type: int = 0  # the ggml type id, as a plain int (command keys hash it on every call)


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
        self._zero = self.rt.alloc(F32)  # row id 0: a queued copy's (threads), `moe_experts`' one row
        self._topk = (0, 0, 0)  # (capacity, indices address, values address)
        self._gelu_addr = 0  # ggml's fp16 GELU table in linear memory, written on first use
        self._exec = self.fn["llamay_exec"]
        self._cmds: dict[tuple, int] = {}  # (op, *arguments) -> the command's address in the arena
        self._arena = self.rt.alloc(CMD_BYTES * CMD_SLOTS)
        self._rope_theta: dict[tuple[float, int], float] = {}

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

    def read_bytes(self, buf: int, offset: int, n: int) -> bytes:
        return ctypes.string_at(self.rt.base + buf + F32 * offset, F32 * n)

    def copy(self, dst: int, dst_off: int, src: int, src_off: int, n: int) -> None:
        base = self.rt.base
        ctypes.memmove(base + dst + F32 * dst_off, base + src + F32 * src_off, F32 * n)

    def sync(self) -> None:  # every kernel runs when it is called (llamay_exec returns when it is done)
        pass

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
        return Weight(name, t, n_in, n_out, WasmWeight(addr, f32, data, int(t)))

    @staticmethod
    def _check(rc: int, what: str) -> None:
        if rc:  # -1: type not run, -2: rows not whole blocks (bind refuses both first)
            raise LlamayError(f"wasm kernel failed on {what} (code {rc})")

    # -- kernels --------------------------------------------------------------------------------------------
    # Each builds its command's key (op, *arguments) and runs the kept command, packing it on a miss.

    def _command(self, key: tuple, args: tuple | None = None) -> int:
        """Pack command `key` (or `args`, when the key holds something else: a value derived on a miss) into the
        arena, keep its address under `key`, and return it."""
        cmds = self._cmds
        if len(cmds) >= CMD_SLOTS:
            cmds.clear()
        addr = self._arena + CMD_BYTES * len(cmds)
        args = key if args is None else args
        words = [a & 0xFFFFFFFF if type(a) is int else a for a in args]
        FORMATS[args[0]].pack_into(self._view(addr, CMD_BYTES // F32, "B"), 0, *words)
        cmds[key] = addr
        return addr

    def get_rows(self, out: int, w: Weight, ids: int, n: int) -> None:
        h = w.handle
        key = (_GET_ROWS, h.type, out, h.addr, ids, n, w.n_in, w.n_out)
        rc = self._exec(self._cmds.get(key) or self._command(key))
        if rc == -3:
            raise LlamayError(f"{w.name}: a row id is outside 0..{w.n_out - 1}")
        if rc:
            self._check(rc, w.name)

    def matmul(self, out: int, w: Weight, x: int, n: int) -> None:
        h = w.handle
        key = (_MATMUL, h.type, out, h.addr, x, n, w.n_in, w.n_out, self._scratch)
        rc = self._exec(self._cmds.get(key) or self._matmul_command(w, out, x, n))
        if rc:
            self._check(rc, w.name)

    def qkv(self, q: int, k: int, v: int, wq: Weight, wk: Weight, wv: Weight, x: int, n: int) -> None:
        compose.qkv(self.matmul, q, k, v, wq, wk, wv, x, n)  # three commands (one list on the threads backend)

    def _matmul_command(self, w: Weight, out: int, x: int, n: int) -> int:
        """A matmul's command, with the scratch grown first to what its activation rows take (a new scratch
        address makes new keys: a kept command always names a scratch that was large enough)."""
        h = w.handle
        need = self._act_bytes.get((h.type, n, w.n_in))
        if need is None:
            need = self._act_bytes[(h.type, n, w.n_in)] = self.fn["llamay_act_bytes"](h.type, n, w.n_in)
        scratch = self._scratch_for(need)
        return self._command((_MATMUL, h.type, out, h.addr, x, n, w.n_in, w.n_out, scratch))

    def add_bias(self, x: int, b: Weight, n: int) -> None:
        key = (_ADD_BIAS, x, b.handle.f32, n, b.n_in)
        self._exec(self._cmds.get(key) or self._command(key))

    def rms_norm(self, out: int, x: int, w: Weight | None, n: int, dim: int, eps: float) -> None:
        key = (_RMS_NORM, out, x, w.handle.f32 if w is not None else 0, n, dim, eps)
        self._exec(self._cmds.get(key) or self._command(key))

    def layer_norm(self, out: int, x: int, w: Weight, b: Weight | None, n: int, dim: int, eps: float) -> None:
        key = (_LAYER_NORM, out, x, w.handle.f32, b.handle.f32 if b is not None else 0, n, dim, eps)
        self._exec(self._cmds.get(key) or self._command(key))

    def head_rms_norm(self, x: int, w: Weight, n: int, n_heads: int, head_dim: int, eps: float) -> None:
        key = (_RMS_NORM, x, x, w.handle.f32, n * n_heads, head_dim, eps)
        self._exec(self._cmds.get(key) or self._command(key))

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
        ext_factor: float,
        mscale: float,
        corr_low: float,
        corr_high: float,
    ) -> None:
        ff = freq_factors.handle.f32 if freq_factors is not None else 0
        yarn = (ext_factor, mscale, corr_low, corr_high)
        key = (_ROPE, x, pos, n, n_heads, head_dim, n_rot, base, scale, neox, ff, *yarn)
        cmd = self._cmds.get(key)
        if cmd is None:  # the command carries the float32 theta scale, as ggml and portable compute it
            theta_scale = array("f", (base ** (-2.0 / n_rot),))[0]
            args = (_ROPE, x, pos, n, n_heads, head_dim, n_rot, theta_scale, scale, int(neox), ff, *yarn)
            cmd = self._command(key, args)
        self._exec(cmd)

    def geglu(self, out: int, gate: int, up: int, count: int) -> None:
        key = (_GEGLU, out, gate, up, count, self._gelu_addr or self._gelu_table())
        self._exec(self._cmds.get(key) or self._command(key))

    def gelu(self, x: int, count: int) -> None:
        key = (_GELU, x, count, self._gelu_addr or self._gelu_table())
        self._exec(self._cmds.get(key) or self._command(key))

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
        softcap: float,
        max_bias: float,
        sinks: Weight | None,
    ) -> None:
        b = batch
        key = (
            _ATTENTION, out, q, k_cache, v_cache, layer, n_slots, b.n, b.pos, b.seq, b.pages, b.page_off, b.seq_len,
            b.page_size, n_head, n_head_kv, head_dim, head_dim_v, kq_scale, int(causal), window, softcap, max_bias,
            sinks.handle.f32 if sinks is not None else 0,
        )  # fmt: skip
        self._exec(self._cmds.get(key) or self._command(key))

    def argmax(self, x: int, offset: int, n: int) -> int:
        key = (_ARGMAX, x + F32 * offset, n)
        return self._exec(self._cmds.get(key) or self._command(key))

    def top_k(self, x: int, offset: int, n: int, k: int) -> list[tuple[int, float]]:
        cap, idx, val = self._topk
        if k > cap:
            cap = max(k, 64)
            idx, val = self.rt.alloc(F32 * cap), self.rt.alloc(F32 * cap)
            self._topk = (cap, idx, val)
        key = (_TOP_K, x + F32 * offset, n, k, idx, val)
        got = self._exec(self._cmds.get(key) or self._command(key))
        return list(zip(self._view(idx, got, "i").tolist(), self._view(val, got, "f").tolist(), strict=True))

    def moe_route(
        self,
        ids: int,
        weights: int,
        logits: int,
        router: Weight,
        x: int,
        k: int,
        gating: int,
        norm_w: bool,
        w_scale: float,
    ) -> None:
        compose.moe_route(self, self.matmul, ids, weights, logits, router, x, k, gating, norm_w, w_scale)

    def moe_experts(
        self, out: int, gate: tuple, up: tuple, down: tuple, x: int, ids: int, weights: int, k: int, h: int, y: int
    ) -> None:
        chosen = array("i", self.read_bytes(ids, 0, k)).tolist()
        compose_experts(self, out, gate, up, down, x, chosen, weights, h, y, self._zero, lambda b, i: b + F32 * i)

    def pda(self, vocab: int, arena: int) -> int:
        key = (_PDA, vocab, arena)
        return self._exec(self._cmds.get(key) or self._command(key))


# -- the plain ops: their command is (op, *the interface's arguments), as their export takes them ---------------


def _plain_command(op: Op):
    ex = op.export
    if (
        ex is None
        or op.result != "None"  # a result needs a method that reads it back
        or len(ex.params) != len(op.params)
        or any(c.kind not in AS_IS.get(p.kind, ()) for p, c in zip(op.params, ex.params, strict=True))
    ):
        raise ImportError(f"the wasm backend has no method for op {op.name}, and {ex and ex.name} does not take "
                          f"its arguments as they are or it returns {op.result}")  # fmt: skip
    code = OPS[ex.name]

    def method(self, *args):
        key = (code, *args)
        self._exec(self._cmds.get(key) or self._command(key))

    method.__name__ = method.__qualname__ = op.name
    method.__signature__ = op.method_signature()
    return method


for _op in KERNEL_OPS:
    if _op.name not in vars(WasmBackend):
        setattr(WasmBackend, _op.name, _plain_command(_op))
