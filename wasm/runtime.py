"""The platform seam of the wasm backend: which runtime loads `llamay_kernels*.wasm`, and the ABI both share.

- natively (CPython): `runtime_wasmtime.WasmtimeRuntime` instantiates the module with wasmtime and provides the
  imports a dynamic linker would (memory, `__memory_base`, `__stack_pointer`, ...); for testing and benchmarks;
- under Pyodide: `runtime_pyodide` opens the same file with `ctypes.CDLL` (Emscripten's dynamic linker), so the
  kernels run in Pyodide's own heap on buffers Python already holds.

A runtime gives the backend four things: `alloc(nbytes)` (an address in the module's memory, 16-aligned, zeroed,
alive as long as the runtime), `place(data)` (an address holding those bytes: a copy, or the bytes themselves where
they already live in that memory), `base` (the host address of linear address 0, for ctypes reads and writes)
and `fn` (the exported functions by name, called with ints and floats).
"""

from __future__ import annotations

import os
from importlib import resources
from typing import Any, Protocol

from ..errors import LlamayError
from ..ggml_types import GGMLType
from ..kernels.ops import OPS as KERNEL_OPS
from ..platform import IS_PYODIDE

ABI_VERSION = 7  # 3: GELU and GeGLU take the fp16 table; 4: llamay_exec; 5: op codes in the order of OPS;
# 6: llamay_exec_part (a command's share for kernel threads); 7: its shares at multiples of 16, element-wise ops
# split by elements, attention by query head when the (token, KV head) units are few
PLAIN, RELAXED = "simd128", "relaxed"
MODULES = {PLAIN: "llamay_kernels.wasm", RELAXED: "llamay_kernels_relaxed.wasm"}
VARIANT_ENV = "LLAMAY_WASM_VARIANT"  # simd128 | relaxed: force one module instead of detecting

# The weight types the module's matmul and get_rows run. The build generates the C side's list from this one
# (wasm/codegen.py: the traits array, the kernels' declarations, the dispatch), so a type is added here and in C.
RUNNABLE: frozenset[GGMLType] = frozenset(
    {
        GGMLType.F32, GGMLType.F16, GGMLType.BF16,
        GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0, GGMLType.IQ4_NL,
        GGMLType.MXFP4,
        GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_XS,
    }
)  # fmt: skip

# The exported functions: name -> (result, parameters), each a letter: i = i32 (int or address), f = f32,
# d = f64, v = no result. Checked against the module's own signatures when wasmtime loads it. The module's own
# exports are listed here; the kernels' come from their C prototypes in llamay.kernels.ops.
MODULE_EXPORTS: dict[str, tuple[str, str]] = {
    "llamay_abi_version": ("i", ""),
    "llamay_variant": ("i", ""),
    "llamay_block_sizeof": ("i", "i"),
    "llamay_supports": ("i", "i"),
    "llamay_act_bytes": ("i", "iii"),
    "llamay_round_row": ("i", "iiiiii"),
    "llamay_exec": ("i", "i"),
    "llamay_exec_part": ("i", "iii"),
}
KERNEL_EXPORTS = tuple(o.export for o in KERNEL_OPS if o.export is not None)
SIGNATURES: dict[str, tuple[str, str]] = {**MODULE_EXPORTS, **{ex.name: ex.letters for ex in KERNEL_EXPORTS}}

# `llamay_exec(cmd)` runs a kernel from a command in linear memory: [op, *arguments] in 32-bit words (an f64
# takes two), the op codes numbered from 1 in the order of OPS, as the build numbers wasm/src's LLAMAY_OP_*. The
# backend packs a command once and calls exec with its address: one argument instead of 4 to 20 (see exec.c).
OPS: dict[str, int] = {ex.name: i + 1 for i, ex in enumerate(KERNEL_EXPORTS)}


class Runtime(Protocol):
    variant: str  # PLAIN or RELAXED
    fn: dict[str, Any]

    @property
    def base(self) -> int: ...
    def alloc(self, nbytes: int) -> int: ...
    def place(self, data: memoryview) -> int: ...


def module_bytes(variant: str) -> bytes:
    """The shipped module of a variant (package data of llamay.wasm)."""
    try:
        return resources.files(__package__).joinpath(MODULES[variant]).read_bytes()
    except FileNotFoundError:
        raise LlamayError(f"{MODULES[variant]} is missing: build it with `python wasm/build.py`") from None


def requested_variant() -> str | None:
    v = os.environ.get(VARIANT_ENV) or None
    if v is not None and v not in MODULES:
        raise LlamayError(f"{VARIANT_ENV}={v!r}: expected one of {', '.join(MODULES)}")
    return v


def load_runtime(variant: str | None = None) -> Runtime:
    """The runtime of this platform, with the relaxed module where the engine validates it (or `variant`)."""
    variant = variant or requested_variant()
    if IS_PYODIDE:
        from .runtime_pyodide import PyodideRuntime

        return PyodideRuntime(variant)
    from .runtime_wasmtime import WasmtimeRuntime

    return WasmtimeRuntime(variant)
