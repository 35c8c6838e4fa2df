"""Rounding an activation row the way llama.cpp's CPU matmul does before its dot products.

ggml gives each weight type a `vec_dot_type`: the activation row is converted to it once (quantised to 8 bits
per block for quantised weights, rounded to fp16/bf16 for half-precision weights) and the dot products run on
that. Reproducing the rounding is what lets greedy text match llama.cpp at near-ties; the dot itself may then
be integer (numba, wasm) or float (portable) — the difference is float summation order only.
"""

from __future__ import annotations

import struct
from array import array

from ..ggml_types import GGMLType

QK8_0 = 32
QK8_K = 256
Q8_MAX = 127

# ggml-cpu's type traits: the format the activation row takes for each weight type's dot product
VEC_DOT_TYPE: dict[GGMLType, GGMLType] = {
    GGMLType.F32: GGMLType.F32,
    GGMLType.F16: GGMLType.F16,
    GGMLType.BF16: GGMLType.BF16,
    GGMLType.Q4_0: GGMLType.Q8_0,
    GGMLType.Q5_0: GGMLType.Q8_0,
    GGMLType.Q8_0: GGMLType.Q8_0,
    GGMLType.IQ4_NL: GGMLType.Q8_0,
    GGMLType.MXFP4: GGMLType.Q8_0,
    GGMLType.NVFP4: GGMLType.Q8_0,
    GGMLType.Q1_0: GGMLType.Q8_0,
    GGMLType.Q4_1: GGMLType.Q8_1,
    GGMLType.Q5_1: GGMLType.Q8_1,
    **{
        t: GGMLType.Q8_K
        for t in (
            GGMLType.Q2_K,
            GGMLType.Q3_K,
            GGMLType.Q4_K,
            GGMLType.Q5_K,
            GGMLType.Q6_K,
            GGMLType.IQ2_XXS,
            GGMLType.IQ2_XS,
            GGMLType.IQ2_S,
            GGMLType.IQ3_XXS,
            GGMLType.IQ3_S,
            GGMLType.IQ1_S,
            GGMLType.IQ1_M,
            GGMLType.IQ4_XS,
            GGMLType.TQ1_0,
            GGMLType.TQ2_0,
        )
    },
}

_F32 = struct.Struct("<f")
_HALF = struct.Struct("<e")


def _f32(x: float) -> float:
    return _F32.unpack(_F32.pack(x))[0]


def _half(x: float) -> float:
    """x rounded to fp16 and back (ties to even; ggml's scales never overflow fp16)."""
    try:
        return _HALF.unpack(_HALF.pack(x))[0]
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")


def q8_0_row(x: array, out: array) -> None:
    """out = the Q8_0-quantised x, dequantised: per 32 values d = amax/127 (stored fp16), q = round(x·127/amax).

    This is ggml's x86 (AVX2) `quantize_row_q8_0`, the path llama.cpp takes on this hardware: the inverse scale is
    127/amax in float32 and rounding is to nearest even — not the `_ref` C code (1/d, half away from zero).
    Measured on stories260K Q8_0 against llama.cpp (f32 KV, no flash attention): identical logits with this,
    a one-level flip at step 9 of a 32-step run with the `_ref` rounding.
    """
    for b in range(0, len(x), QK8_0):
        blk = x[b : b + QK8_0]
        amax = max(map(abs, blk))
        d = _f32(amax / Q8_MAX)
        inv = _f32(Q8_MAX / amax) if amax else 0.0
        dh = _half(d)
        out[b : b + QK8_0] = array("f", (dh * round(_f32(v * inv)) for v in blk))


def q8_1_row(x: array, out: array, corr: array) -> None:
    """As q8_0_row; Q8_1 also stores s = fp16(d·Σq), which the Q4_1/Q5_1 dot multiplies by the weight's min m.

    corr[block] = s - dh·Σq: what the min term gains from s being rounded to fp16, added by the matmul as m·corr.
    """
    for i, b in enumerate(range(0, len(x), QK8_0)):
        blk = x[b : b + QK8_0]
        amax = max(map(abs, blk))
        d = _f32(amax / Q8_MAX)
        inv = _f32(Q8_MAX / amax) if amax else 0.0
        dh = _half(d)
        q = [round(_f32(v * inv)) for v in blk]
        out[b : b + QK8_0] = array("f", (dh * v for v in q))
        corr[i] = _half(_f32(sum(q) * d)) - dh * sum(q)


def q8_k_row(x: array, out: array) -> None:
    """Q8_K: per 256 values iscale = -127/max (max: the value of largest magnitude), q = min(127, round(x·iscale)),
    d = 1/iscale kept in float32."""
    for b in range(0, len(x), QK8_K):
        blk = x[b : b + QK8_K]
        amax, vmax = 0.0, 0.0
        for v in blk:
            if abs(v) > amax:
                amax, vmax = abs(v), v
        if amax == 0.0:
            out[b : b + QK8_K] = array("f", bytes(4 * QK8_K))
            continue
        iscale = _f32(-Q8_MAX / vmax)
        d = _f32(1.0 / iscale)
        # nearest_int in ggml is round-half-even, as Python's round
        out[b : b + QK8_K] = array("f", (d * min(Q8_MAX, round(_f32(iscale * v))) for v in blk))


def f16_row(x: array, out: array) -> None:
    n = len(x)
    out[:n] = array("f", struct.unpack(f"<{n}e", struct.pack(f"<{n}e", *x)))


def bf16_row(x: array, out: array) -> None:
    bits = array("I", x.tobytes())
    for i, u in enumerate(bits):
        if u & 0x7FFFFFFF > 0x7F800000:
            u = (u & 0xFFFF0000) | 0x00400000
        bits[i] = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF) << 16
    out[: len(x)] = array("f", bits.tobytes())


def round_row(vec_dot_type: GGMLType, x: array, out: array, corr: array | None = None) -> None:
    """out[:len(x)] = x as the dot product will see it after conversion to `vec_dot_type`."""
    if vec_dot_type == GGMLType.F32:
        out[: len(x)] = x
    elif vec_dot_type == GGMLType.Q8_0:
        q8_0_row(x, out)
    elif vec_dot_type == GGMLType.Q8_1:
        q8_1_row(x, out, corr if corr is not None else array("f", bytes(4 * (len(x) // QK8_0))))
    elif vec_dot_type == GGMLType.Q8_K:
        q8_k_row(x, out)
    elif vec_dot_type == GGMLType.F16:
        f16_row(x, out)
    elif vec_dot_type == GGMLType.BF16:
        bf16_row(x, out)
    else:
        raise ValueError(f"no activation rounding for {vec_dot_type.name}")
