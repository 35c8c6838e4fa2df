"""llamay: a GGUF language-model engine (pure-Python core; numba natively, WASM SIMD in the browser).

The library (docs/library.md) is exported here: `llamay.load`, `llamay.Model`, `llamay.Context`,
`llamay.Sampler`, `llamay.constraints`, ... They are imported on first use (PEP 562), so `import llamay` stays
cheap for the CLI and the browser worker, which load only what they run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import LlamayError

if TYPE_CHECKING:
    from . import constraints
    from .api import (
        Context,
        ContextClosedError,
        ContextFullError,
        Defaults,
        Logits,
        Model,
        ModelSourceError,
        Sampler,
        Snapshot,
        TokenError,
        load,
    )

__version__ = "0.1.0"

__all__ = [
    "Context",
    "ContextClosedError",
    "ContextFullError",
    "Defaults",
    "LlamayError",
    "Logits",
    "Model",
    "ModelSourceError",
    "Sampler",
    "Snapshot",
    "TokenError",
    "constraints",
    "load",
]
_API = frozenset(__all__) - {"LlamayError", "constraints"}


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(".api", __name__), name)
    if name == "constraints":
        return importlib.import_module(".constraints", __name__)
    raise AttributeError(f"module 'llamay' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
