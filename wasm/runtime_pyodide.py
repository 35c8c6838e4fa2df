"""The kernels under Pyodide: the side module opened with `ctypes.CDLL`, i.e. Emscripten's dynamic linker, which
gives it Pyodide's own memory, stack pointer and function table. Linear address = host address here: a buffer
Python holds (a bytearray, an `array`) is passed to a kernel by its address, with no copy.

- `alloc(n)`: zeroed, 16-aligned bytes from a bytearray this runtime keeps alive (nothing is freed: a backend
  allocates its buffers once per State and binds each weight once, as under wasmtime);
- `place(data)`: the address of the bytes themselves when they are writable (the model buffer that web/src
  streams a GGUF into is a bytearray), else a copy (bytes objects, read-only views);
- the relaxed-SIMD module where this engine validates it (`WebAssembly.validate`), else the plain one.

Calls: ctypes loads the module, but a ctypes call goes through libffi's JavaScript trampoline (`ffi_call_js`,
which reads the call's description from memory on every call): measured under Node 20 on an idle core, 0.25 µs
with no argument, then about 0.45 µs per argument (1 arg 0.9 µs, 4: 2.2, 8: 4.1, 20: 9.7). So `fn` holds the
module's exports as JS functions instead (from Emscripten's table of loaded libraries), called through Pyodide's
JsProxy (Python ints and floats become JS numbers, the wasm function takes them as i32 / f32 / f64): 0.3 µs,
then about 0.2 µs per argument (1: 0.6, 4: 1.1, 8: 1.9, 20: 4.3). The backend calls one export with one
argument per kernel (`llamay_exec`, see backend.py). Where that table cannot be found (another Pyodide), or with
`LLAMAY_WASM_CALLS=ctypes`, the ctypes functions are used.

Nothing else in llamay imports `js`.
"""

from __future__ import annotations

import ctypes
import os
from importlib import resources
from typing import Any

from ..errors import LlamayError
from .runtime import ABI_VERSION, MODULES, PLAIN, RELAXED, SIGNATURES, module_bytes

ALIGN = 16
CALLS_ENV = "LLAMAY_WASM_CALLS"  # js (default) | ctypes: how the exports are called
CTYPES = {"i": ctypes.c_int32, "f": ctypes.c_float, "d": ctypes.c_double, "v": None}


def address_of(data: memoryview) -> int | None:
    """The heap address of a writable buffer's first byte, or None when it cannot be taken in place."""
    view = memoryview(data)
    if view.readonly or not view.c_contiguous or view.nbytes == 0:
        return None
    return ctypes.addressof(ctypes.c_char.from_buffer(view.cast("B")))


def engine_validates(module: bytes) -> bool:
    """Whether the JS engine running Pyodide accepts this module (relaxed SIMD is not everywhere)."""
    try:
        from js import Uint8Array, WebAssembly
    except ImportError:  # pragma: no cover - Pyodide always has `js`
        return False
    return bool(WebAssembly.validate(Uint8Array.new(module)))


def js_exports(path: str) -> Any | None:
    """The exports (a JsProxy) of the side module Emscripten's dynamic linker loaded from `path`, or None.

    `pyodide._module.LDSO.loadedLibsByName` is Emscripten's table of loaded libraries (keyed by the normalised
    path dlopen got); not a public Pyodide API, hence the fallback to ctypes."""
    try:
        import pyodide_js
        from js import Object, Reflect
    except ImportError:  # pragma: no cover - Pyodide always has them
        return None
    try:
        libs = pyodide_js._module.LDSO.loadedLibsByName
        name = os.path.basename(path)
        for key in Object.keys(libs):
            if key == path or os.path.basename(key) == name:
                return Reflect.get(libs, key).exports
    except Exception:  # another Pyodide or Emscripten: no such table
        return None
    return None


class PyodideRuntime:
    base = 0  # the side module's linear memory is Pyodide's heap: addresses are ctypes addresses

    def __init__(self, variant: str | None = None) -> None:
        self.variant = variant or (RELAXED if engine_validates(module_bytes(RELAXED)) else PLAIN)
        path = resources.files(__package__).joinpath(MODULES[self.variant])
        if not path.is_file():
            raise LlamayError(f"{MODULES[self.variant]} is missing: build it with `python wasm/build.py`")
        try:
            self.lib = ctypes.CDLL(str(path))
        except OSError as e:
            raise LlamayError(f"{MODULES[self.variant]}: the dynamic linker refused it: {e}") from None
        self.fn = {name: self._function(name, *sig) for name, sig in SIGNATURES.items()}
        self.calls = "ctypes"
        if os.environ.get(CALLS_ENV, "js") != "ctypes":
            exports = js_exports(str(path))
            found = {name: getattr(exports, name, None) for name in SIGNATURES} if exports is not None else {}
            if found and all(f is not None for f in found.values()):
                self.fn, self.calls = found, "js"
        self._keep: list[Any] = []  # every buffer alloc() handed out, alive as long as this runtime
        if self.fn["llamay_abi_version"]() != ABI_VERSION:
            raise LlamayError(f"{MODULES[self.variant]}: ABI {self.fn['llamay_abi_version']()}, expected {ABI_VERSION}")

    def _function(self, name: str, result: str, params: str):
        try:
            f = getattr(self.lib, name)
        except AttributeError:
            raise LlamayError(f"{MODULES[self.variant]} lacks {name}") from None
        f.argtypes = [CTYPES[p] for p in params]
        f.restype = CTYPES[result]
        return f

    def alloc(self, nbytes: int) -> int:
        buf = bytearray(nbytes + ALIGN)
        self._keep.append(buf)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        return (addr + ALIGN - 1) // ALIGN * ALIGN

    def place(self, data: memoryview) -> int:
        src = memoryview(data).cast("B")
        addr = address_of(src)
        if addr is not None:  # in place: the model's buffer outlives its bound weights (Model holds the file)
            return addr
        addr = self.alloc(len(src))
        (ctypes.c_ubyte * len(src)).from_address(addr)[:] = src
        return addr
