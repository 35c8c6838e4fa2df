"""Reference codecs for every ggml tensor type, in pure Python (no numpy: they run under Pyodide too).

`dequantize(t, data, n)` decodes the first `n` elements of a buffer of type `t` into an `array('f')`, bit for bit
what ggml's `dequantize_row_*` computes in float32. `quantize(t, values)` encodes float32 values, byte for byte
what gguf-py's `gguf.quants.quantize` writes (ggml's `quantize_row_*_ref` for Q8_1, Q8_K and Q1_0, which gguf-py
lacks). Each family of types lives in its own module and registers its codecs in the two tables below.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable

from ..errors import UnsupportedTypeError
from ..ggml_types import GGMLType, block_size, row_bytes
from . import floats, fp4, iquants, kquants, legacy, ternary
from .layout import Block
from .minifloat import f32_array

Dequantizer = Callable[[bytes, array], None]  # (whole blocks, out) -> appends the decoded floats to out
Quantizer = Callable[[array], bytes]  # float32 values (whole blocks) -> packed blocks

_FAMILIES = (floats, legacy, kquants, ternary, fp4, iquants)
DEQUANTIZERS: dict[GGMLType, Dequantizer] = {t: f for m in _FAMILIES for t, f in m.DEQUANTIZE.items()}
QUANTIZERS: dict[GGMLType, Quantizer] = {t: f for m in _FAMILIES for t, f in m.QUANTIZE.items()}

# The block struct of each block type, with its field offsets (for kernels and tests)
BLOCKS: dict[GGMLType, Block] = {b.type: b for m in _FAMILIES for b in vars(m).values() if isinstance(b, Block)}

SUPPORTED_DEQUANTIZE: frozenset[GGMLType] = frozenset(DEQUANTIZERS)
SUPPORTED_QUANTIZE: frozenset[GGMLType] = frozenset(QUANTIZERS)


def _names(types: Iterable[GGMLType]) -> str:
    return ", ".join(t.name for t in sorted(types))


def _codec(table: dict, t: GGMLType | int, what: str):
    try:
        gt = GGMLType(int(t))
    except ValueError:
        raise UnsupportedTypeError(f"cannot {what} unknown ggml type id {t}; supported: {_names(table)}") from None
    codec = table.get(gt)
    if codec is None:
        raise UnsupportedTypeError(f"cannot {what} {gt.name} (type {gt.value}); supported: {_names(table)}")
    return gt, codec


def dequantize(t: GGMLType | int, data: bytes | bytearray | memoryview, n_elements: int) -> array:
    """The first `n_elements` (a whole number of blocks) stored in `data` as type `t`, as float32 values."""
    gt, codec = _codec(DEQUANTIZERS, t, "dequantize")
    nbytes = row_bytes(gt, n_elements)
    view = memoryview(data).cast("B")
    if len(view) < nbytes:
        raise ValueError(f"{gt.name}: {n_elements} elements need {nbytes} bytes, the buffer holds {len(view)}")
    out = array("f")
    codec(bytes(view[:nbytes]), out)
    return out


def quantize(t: GGMLType | int, values: Iterable[float] | array) -> bytes:
    """`values` (rounded to float32 first; an `array('f')` is used as is) encoded as type `t`."""
    gt, codec = _codec(QUANTIZERS, t, "quantize")
    floats32 = f32_array(values)
    if len(floats32) % block_size(gt):
        raise ValueError(f"{gt.name}: {len(floats32)} values is not a multiple of the block size {block_size(gt)}")
    return codec(floats32)


__all__ = [
    "BLOCKS",
    "DEQUANTIZERS",
    "QUANTIZERS",
    "SUPPORTED_DEQUANTIZE",
    "SUPPORTED_QUANTIZE",
    "dequantize",
    "quantize",
]
