"""llamay: a GGUF language-model engine (pure-Python core; numba natively, WASM SIMD in the browser)."""

__version__ = "0.1.0"
