"""The 4-bit float types MXFP4 (32 E2M1 values, one E8M0 scale) and NVFP4 (64 values, a UE4M3 scale per 16).

ggml stores E2M1 doubled as small integers (`KVALUES_MXFP4`) and halves the block scale to match, so a value is
an integer level times a power-of-two (MXFP4) or a 4-significant-bit scale (NVFP4): exact in float32.
"""

from __future__ import annotations

import math
from array import array

from ..ggml_types import GGMLType
from .bits import nibbles
from .iq_tables import KVALUES_MXFP4
from .layout import Block
from .minifloat import E8M0_HALF, UE4M3_HALF

# e: E8M0 exponent (scale 2^(e - 127), halved); qs: byte j holds elements j (low nibble) and j + 16 (high)
MXFP4 = Block(GGMLType.MXFP4, e="B", qs="16s")
# d[4]: UE4M3 scale of each 16 elements; qs[32]: sub-block s is qs[8s : 8s + 8], low nibbles then high nibbles
NVFP4 = Block(GGMLType.NVFP4, d="4s", qs="32s")
E8M0_BIAS = 127


def dequantize_mxfp4(raw: bytes, out: array) -> None:
    for e, qs in MXFP4.iter_unpack(raw):
        d = E8M0_HALF[e]
        levels = [k * d for k in KVALUES_MXFP4]
        out.fromlist(list(map(levels.__getitem__, nibbles(qs))))


def dequantize_nvfp4(raw: bytes, out: array) -> None:
    for scales, qs in NVFP4.iter_unpack(raw):
        for s in range(4):
            d = UE4M3_HALF[scales[s]]
            levels = [k * d for k in KVALUES_MXFP4]
            out.fromlist(list(map(levels.__getitem__, nibbles(qs[8 * s : 8 * s + 8]))))


def _mxfp4_exponent(amax: float) -> int:
    """floor(log2(amax)) - 2 + 127 with float32 log2 (ggml's `floorf(log2f(amax))`), 0 for an all-zero block.
    Below 2^-125 the C cast of a negative float is undefined; llamay clamps to 0 there."""
    if not amax > 0:
        return 0
    log2 = array("f", (math.log2(amax),))[0]
    return max(0, math.floor(log2) - 2 + E8M0_BIAS)


def quantize_mxfp4(values: array) -> bytes:
    """gguf-py's and ggml's `quantize_row_mxfp4_ref`: the nearest level (first on ties), errors in float32."""
    out = bytearray()
    for i in range(0, len(values), 32):
        x = values[i : i + 32]
        e = _mxfp4_exponent(max(map(abs, x)))
        levels = [k * E8M0_HALF[e] for k in KVALUES_MXFP4]
        q = []
        for v in x:
            errors = [abs(err) for err in array("f", [t - v for t in levels])]
            q.append(errors.index(min(errors)))
        out += bytes((e,)) + bytes(q[j] | (q[j + 16] << 4) for j in range(16))
    return bytes(out)


DEQUANTIZE = {GGMLType.MXFP4: dequantize_mxfp4, GGMLType.NVFP4: dequantize_nvfp4}
QUANTIZE = {GGMLType.MXFP4: quantize_mxfp4}
