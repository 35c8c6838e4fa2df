"""Kernel backends behind one interface (see `interface.py`): portable (pure Python), numba, wasm.

`get_backend()` picks `LLAMAY_BACKEND` (portable | numba | wasm) or the fastest one available here.
"""

from __future__ import annotations

import importlib
import os

from ..errors import LlamayError
from .interface import Backend, BatchView, Weight

# name -> (module, class); imported on demand so the core never imports numba or wasmtime by itself
BACKENDS: dict[str, tuple[str, str]] = {
    "portable": ("llamay.kernels.portable", "PortableBackend"),
    "numba": ("llamay.native.numba_backend", "NumbaBackend"),
    "wasm": ("llamay.wasm.backend", "WasmBackend"),
}
PREFERENCE = ("numba", "wasm", "portable")
_instances: dict[str, Backend] = {}


def get_backend(name: str | None = None) -> Backend:
    """A backend by name, else $LLAMAY_BACKEND, else the first of PREFERENCE that loads here."""
    name = name or os.environ.get("LLAMAY_BACKEND") or None
    if name is None:
        for candidate in PREFERENCE:
            try:
                return get_backend(candidate)
            except (ImportError, LlamayError):
                continue
        raise LlamayError("no kernel backend could be loaded")
    if name not in BACKENDS:
        raise LlamayError(f"unknown backend {name!r}; backends: {', '.join(BACKENDS)}")
    if name not in _instances:
        module, cls = BACKENDS[name]
        try:
            _instances[name] = getattr(importlib.import_module(module), cls)()
        except (ImportError, OSError) as e:  # a missing runtime, also when the constructor loads it
            raise LlamayError(f"backend {name!r} is not available here: {e}") from e
    return _instances[name]


def available_backends() -> list[str]:
    out = []
    for name in BACKENDS:
        try:
            get_backend(name)
            out.append(name)
        except LlamayError:
            pass
    return out


__all__ = ["BACKENDS", "Backend", "BatchView", "Weight", "available_backends", "get_backend"]
