"""The kernels under Pyodide: the side module opened with `ctypes.CDLL`, i.e. Emscripten's dynamic linker, which
gives it Pyodide's own memory, stack pointer and function table. Linear address = host address here: a buffer
Python holds (a bytearray, an `array`) is passed to a kernel by its address, with no copy.

- `alloc(n)`: zeroed, 16-aligned bytes from a bytearray this runtime keeps alive (nothing is freed: a backend
  allocates its buffers once per State and binds each weight once, as under wasmtime);
- `place(data)`: the address of the bytes themselves when they are writable (the model buffer that web/src
  streams a GGUF into is a bytearray), else a copy (bytes objects, read-only views);
- the relaxed-SIMD module where this engine validates it (`WebAssembly.validate`), else the plain one.

Nothing else in llamay imports `js`.
"""

from __future__ import annotations

import ctypes
from importlib import resources
from typing import Any

from ..errors import LlamayError
from .runtime import ABI_VERSION, MODULES, PLAIN, RELAXED, SIGNATURES, module_bytes

ALIGN = 16
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
