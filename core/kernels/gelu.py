"""GELU as ggml computes it on the CPU: a table of 65,536 fp16 outputs indexed by the fp16-rounded input.

ggml (`GGML_GELU_FP16`) gives 0 for x ≤ -10, x for x ≥ 10, and otherwise looks up fp16(gelu(fp16(x))) with
the tanh approximation. The rounding on both sides is part of what llama.cpp computes (on gemma-3-270m it moves
top-5 logprobs by up to 0.09 against an exact GELU), so every backend uses this one table, built here.
"""

from __future__ import annotations

import math
import struct
from array import array
from functools import lru_cache

GELU_COEF_A = 0.044715
SQRT_2_OVER_PI = 0.7978845608028654
GELU_CLAMP = 10.0  # beyond ±this ggml skips the table: 0 below, x itself above
N_HALF = 1 << 16
_HALF = struct.Struct("<e")
_HALF_BITS = struct.Struct("<H")


def _f32(x: float) -> float:
    return array("f", (x,))[0]


def gelu_f32(f: float) -> float:
    """ggml_gelu_f32 with its float32 roundings: 0.5·f·(1 + tanh(√(2/π)·f·(1 + 0.044715·f²)))."""
    inner = _f32(_f32(SQRT_2_OVER_PI * f) * _f32(1.0 + _f32(GELU_COEF_A * _f32(f * f))))
    return _f32(_f32(0.5 * f) * _f32(1.0 + _f32(math.tanh(inner))))


@lru_cache(maxsize=1)
def gelu_table() -> array:
    """table[h] = fp16(gelu(half h)) as float32, for every fp16 bit pattern h (NaN where h is not finite)."""
    out = array("f", bytes(4 * N_HALF))
    for h in range(N_HALF):
        f = _HALF.unpack(_HALF_BITS.pack(h))[0]
        if math.isfinite(f):
            out[h] = _HALF.unpack(_HALF.pack(gelu_f32(f)))[0]
        else:
            out[h] = f
    return out


def gelu(x: float) -> float:
    if x <= -GELU_CLAMP:
        return 0.0
    if x >= GELU_CLAMP:
        return x
    return gelu_table()[_HALF_BITS.unpack(_HALF.pack(x))[0]]
