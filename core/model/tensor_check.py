"""The optional check of tensor values at load (llama.cpp's `--check-tensors`, `ggml_validate_row_data`): every
value of a float tensor and every float scale of a quantised block must be finite. A NaN or infinity there
poisons every logit; the format cannot tell, so the check reads the data.

Reading every byte of a large model takes time, so the check is asked for (`load_model(..., check_tensors=True)`).
It looks at the high byte of each float, where the exponent sits, with `bytes.translate` over strided views: C
speed in pure Python, no numpy.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ModelError
from ..ggml_types import GGMLType
from ..gguf import GGUFFile, TensorInfo
from ..quants import BLOCKS


def _table(pred) -> bytes:  # a bytes.translate table: 1 where pred(byte), else 0
    return bytes(1 if pred(b) else 0 for b in range(256))


# (offset of the high byte, its table, low-byte mask): a value is non-finite when its high byte maps to 1 and (if
# a mask is given) the byte below it has that bit set, where the exponent spans two bytes (f32, bf16).
_F16 = (1, _table(lambda b: b & 0x7C == 0x7C), 0)
_F32 = (3, _table(lambda b: b & 0x7F == 0x7F), 0x80)
_BF16 = (1, _table(lambda b: b & 0x7F == 0x7F), 0x80)
FLOAT_CODES = {"e": _F16, "f": _F32}  # struct codes of a block's scale fields
FLOAT_TYPES = {GGMLType.F16: (2, _F16), GGMLType.F32: (4, _F32), GGMLType.BF16: (2, _BF16)}  # (bytes per value, kind)


def _first_non_finite(data: memoryview, stride: int, at: int, kind: tuple[int, bytes, int]) -> int:
    """Index (in strides) of the first non-finite value whose bytes start at `at` in each stride, or -1."""
    high, table, mask = kind
    highs = bytes(data[at + high :: stride]).translate(table)
    i = highs.find(1)
    while i >= 0:
        if not mask or data[i * stride + at + high - 1] & mask:
            return i
        i = highs.find(1, i + 1)
    return -1


def _check(f: GGUFFile, t: TensorInfo) -> None:
    data = f.tensor_data(t)
    if t.type in FLOAT_TYPES:
        width, kind = FLOAT_TYPES[t.type]
        i = _first_non_finite(data, width, 0, kind)
        if i >= 0:
            raise ModelError(f"{f.name}: tensor {t.name!r} ({t.type.name}): element {i} is NaN or infinite")
        return
    block = BLOCKS.get(t.type)
    if block is None:
        return
    for name, code in block.fields.items():
        kind = FLOAT_CODES.get(code)
        if kind is None:
            continue
        i = _first_non_finite(data, block.size, block.offset[name], kind)
        if i >= 0:
            raise ModelError(f"{f.name}: tensor {t.name!r} ({t.type.name}): block {i} has a NaN or infinite {name}")


def check_tensor_data(f: GGUFFile, names: Iterable[str] | None = None) -> None:
    """Refuse the first tensor (of `names`, default all) holding a NaN or infinite value or block scale."""
    for name in f.tensors if names is None else names:
        _check(f, f.tensors[name])
