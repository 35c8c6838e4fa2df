"""The kernels under CPython: the side module instantiated by wasmtime, with the imports Emscripten's dynamic
linker would give it under Pyodide, made here.

Linear memory (one `Memory`, grown on demand) is laid out as

    0 .. 1 KiB         unused (address 0 stays the null pointer)
    memory_base ..     the module's static data (`dylink.0` mem_size bytes, at its alignment)
    .. stack top       the shadow stack (`__stack_pointer` starts at the top and grows down)
    heap ..            buffers, weights and scratch, from a bump allocator (nothing is freed: a backend
                       allocates its buffers once per State and binds each weight once)

Nothing else in llamay imports wasmtime.
"""

from __future__ import annotations

import atexit
import ctypes
import weakref
from typing import Any

import wasmtime

from ..errors import LlamayError
from .runtime import ABI_VERSION, MODULES, PLAIN, RELAXED, SIGNATURES, module_bytes

PAGE = 65536
NULL_GUARD = 1024
STACK_BYTES = 256 * 1024
ALIGN = 16
WASM_TYPES = {"i": "i32", "f": "f32", "d": "f64"}


def dylink_mem_info(module: bytes) -> tuple[int, int, int, int]:
    """(mem_size, mem_align (log2), table_size, table_align) from the `dylink.0` section, which comes first."""
    at = 8
    if module[at] != 0:
        raise LlamayError("not a side module: no dylink.0 custom section first")
    at, size = _leb(module, at + 1)
    end = at + size
    at, name_len = _leb(module, at)
    if module[at : at + name_len] != b"dylink.0":
        raise LlamayError("not a side module: no dylink.0 custom section first")
    at += name_len
    while at < end:
        kind = module[at]
        at, length = _leb(module, at + 1)
        if kind == 1:  # WASM_DYLINK_MEM_INFO
            p, mem_size = _leb(module, at)
            p, mem_align = _leb(module, p)
            p, table_size = _leb(module, p)
            p, table_align = _leb(module, p)
            return mem_size, mem_align, table_size, table_align
        at += length
    return 0, 0, 0, 0


def _leb(b: bytes, at: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = b[at]
        at += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return at, result


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


_LIVE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Close stores and engines while wasmtime's module is still whole: left to interpreter shutdown, their
    finalizers can run after its ctypes bindings are gone and print TypeErrors."""
    for rt in list(_LIVE):
        rt.close()


def _i32(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


class WasmtimeRuntime:
    def __init__(self, variant: str | None = None) -> None:
        config = wasmtime.Config()
        config.wasm_simd = True
        config.wasm_relaxed_simd = True
        config.wasm_bulk_memory = True
        config.cranelift_opt_level = "speed"
        self.engine = wasmtime.Engine(config)
        self.variant = variant or self.detect()
        self.module_bytes = module_bytes(self.variant)
        module = wasmtime.Module(self.engine, self.module_bytes)
        self.store = wasmtime.Store(self.engine)
        self._instantiate(module)
        self._check_exports(module)
        if self.fn["llamay_abi_version"]() != ABI_VERSION:
            raise LlamayError(f"{MODULES[self.variant]}: ABI {self.fn['llamay_abi_version']()}, expected {ABI_VERSION}")
        _LIVE.add(self)

    def close(self) -> None:
        """Free the store (and with it the memory and instance) and the engine; the runtime is unusable after."""
        for obj in (getattr(self, "store", None), getattr(self, "engine", None)):
            if obj is not None:
                obj.close()
        self.fn = {}

    def detect(self) -> str:
        """RELAXED if this engine validates the relaxed module, else PLAIN."""
        try:
            wasmtime.Module.validate(self.engine, module_bytes(RELAXED))
            return RELAXED
        except (wasmtime.WasmtimeError, LlamayError):
            return PLAIN

    # -- instantiation --------------------------------------------------------------------------------------

    def _instantiate(self, module: wasmtime.Module) -> None:
        mem_size, mem_align, table_size, _ = dylink_mem_info(self.module_bytes)
        memory_base = _align(NULL_GUARD, max(ALIGN, 1 << mem_align))
        stack_top = _align(memory_base + mem_size + STACK_BYTES, ALIGN)
        self._top = stack_top
        self.memory = wasmtime.Memory(
            self.store, wasmtime.MemoryType(wasmtime.Limits(_align(stack_top, PAGE) // PAGE + 1, None))
        )
        i32 = wasmtime.ValType.i32()
        provided: dict[str, Any] = {
            "memory": self.memory,
            "__memory_base": wasmtime.Global(self.store, wasmtime.GlobalType(i32, False), memory_base),
            "__table_base": wasmtime.Global(self.store, wasmtime.GlobalType(i32, False), 0),
            "__stack_pointer": wasmtime.Global(self.store, wasmtime.GlobalType(i32, True), stack_top),
            "__indirect_function_table": wasmtime.Table(
                self.store,
                wasmtime.TableType(wasmtime.ValType.funcref(), wasmtime.Limits(table_size, None)),
                None,
            ),
        }
        imports = []
        for imp in module.imports:
            if imp.module != "env" or imp.name not in provided:
                raise LlamayError(f"{MODULES[self.variant]} imports {imp.module}.{imp.name}, which no loader provides")
            imports.append(provided[imp.name])
        self.instance = wasmtime.Instance(self.store, module, imports)
        exports = self.instance.exports(self.store)
        for init in ("__wasm_apply_data_relocs", "__wasm_call_ctors"):
            if init in exports:
                exports[init](self.store)
        self.fn = {name: self._caller(exports[name], *SIGNATURES[name]) for name in SIGNATURES if name in exports}

    def _caller(self, func: wasmtime.Func, result: str, params: str):
        """A Python callable for an export. wasmtime's checked `Func.__call__` costs ~60 µs with these argument
        counts; `wasmtime_func_call_unchecked` on a preallocated raw-value array costs a few µs. The types
        are those of SIGNATURES, checked against the module's in `_check_exports`."""
        store = self.store
        try:
            from wasmtime import _ffi as ffi

            ctx, fptr = store._context(), ctypes.byref(func._func)
            raw = (ffi.wasmtime_val_raw_t * max(1, len(params)))()
            call_unchecked = ffi.wasmtime_func_call_unchecked
            trap = ctypes.POINTER(ffi.wasm_trap_t)()
            trap_ref = ctypes.byref(trap)
        except (ImportError, AttributeError):  # pragma: no cover - another wasmtime: the checked path
            return lambda *args: func(store, *[_i32(a) if type(a) is int else a for a in args])
        fields = [{"i": "i32", "f": "f32", "d": "f64"}[p] for p in params]
        slots = list(enumerate(fields))
        n = len(raw)  # max(params, results): the results come back in the same array

        def call(*args):
            for (i, field), a in zip(slots, args, strict=True):
                setattr(raw[i], field, a)
            err = call_unchecked(ctx, fptr, raw, n, trap_ref)
            if err or trap:  # rerun through the checked path for wasmtime's own error
                return func(store, *[_i32(a) if type(a) is int else a for a in args])
            return raw[0].i32 if result == "i" else None

        return call

    def _check_exports(self, module: wasmtime.Module) -> None:
        types = {e.name: e.type for e in module.exports}
        for name, (res, params) in SIGNATURES.items():
            if name not in types:
                raise LlamayError(f"{MODULES[self.variant]} lacks {name}")
            ft = types[name]
            got = ("".join(str(t) for t in ft.results) or "v", [str(t) for t in ft.params])
            want = (WASM_TYPES.get(res, "v"), [WASM_TYPES[p] for p in params])
            if got != want:
                raise LlamayError(f"{name}: the module has {got}, runtime.SIGNATURES says {want}")

    # -- memory ---------------------------------------------------------------------------------------------

    @property
    def base(self) -> int:
        return ctypes.addressof(self.memory.data_ptr(self.store).contents)

    def alloc(self, nbytes: int) -> int:
        addr = self._top
        self._top = _align(addr + max(nbytes, 1), ALIGN)
        if self._top > 1 << 32:
            raise MemoryError(f"wasm32 linear memory exhausted ({self._top} bytes wanted)")
        have = self.memory.data_len(self.store)
        if self._top > have:
            self.memory.grow(self.store, _align(self._top - have, PAGE) // PAGE)
        return addr

    def place(self, data: memoryview) -> int:
        """A copy of `data` in linear memory (wasmtime's memory is its own)."""
        src = memoryview(data).cast("B")
        addr = self.alloc(len(src))
        dst = (ctypes.c_ubyte * len(src)).from_address(self.base + addr)
        memoryview(dst).cast("B")[:] = src
        return addr
