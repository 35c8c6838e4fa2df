"""The k-quants: 256-element super-blocks Q2_K Q3_K Q4_K Q5_K Q6_K, and Q8_K (the activation type of their dots).

Dequantizers follow ggml's `dequantize_row_*` (and gguf-py's, which agrees). Within a super-block, sub-blocks of
16 or 32 elements carry small integer scales (and mins) multiplied by the fp16 `d` (and `dmin`). Every product
d * scale * q is exact in float32 (at most 23 significant bits), so a value needs at most one rounding, for the
`- m` of Q2_K / Q4_K / Q5_K, done when stored into the `array('f')`. Q8_K's float32 `d` times q rounds once too.
"""

from __future__ import annotations

from array import array

from ..ggml_types import QK_K, GGMLType
from .bits import BIT, CRUMB, HIGH_NIBBLE, LOW_NIBBLE, or_bytes, shift_bytes
from .layout import Block
from .minifloat import f32

# scales[16]: low nibble scales, high nibble mins of the 16-element sub-blocks.
# qs[64]: element e is crumb (e % 128) // 32 of byte (e // 128) * 32 + e % 32.
Q2_K = Block(GGMLType.Q2_K, scales="16s", qs="64s", d="e", dmin="e")
# hmask[32]: bit e // 32 of byte e % 32 is the high bit of element e (set: q in 0..3, clear: q - 4);
# qs[64] as Q2_K; scales[12]: 16 6-bit signed (offset 32) scales, low 4 bits in scales[0:8] (low nibbles for
# sub-blocks 0..7, high nibbles for 8..15), high 2 bits in scales[8:12] (crumb i // 4 of byte 8 + i % 4).
Q3_K = Block(GGMLType.Q3_K, hmask="32s", qs="64s", scales="12s", d="e")
# scales[12]: 8 6-bit scales and 8 6-bit mins (ggml's get_scale_min_k4); qs[128]: chunk c (64 elements) is
# the low nibbles then the high nibbles of qs[32c : 32c + 32], sub-blocks 2c and 2c + 1.
Q4_K = Block(GGMLType.Q4_K, d="e", dmin="e", scales="12s", qs="128s")
# as Q4_K, plus qh[32]: bit i of byte e % 32 is bit 4 of element e in sub-block i
Q5_K = Block(GGMLType.Q5_K, d="e", dmin="e", scales="12s", qh="32s", qs="128s")
# ql[128] low nibbles, qh[64] 2-bit high parts, scales[16] int8 per 16 elements; 6-bit q offset by 32.
Q6_K = Block(GGMLType.Q6_K, ql="128s", qh="64s", scales="16b", d="e")
# d float32, qs int8[256], bsums int16[16] (sums of qs by 16)
Q8_K = Block(GGMLType.Q8_K, d="f", qs="256b", bsums="16h")


def _scale_min_k4(scales: bytes) -> tuple[list[int], list[int]]:
    """The 8 6-bit scales and 8 6-bit mins packed in 12 bytes (Q4_K, Q5_K)."""
    sc = [scales[j] & 63 for j in range(4)]
    sc += [(scales[j + 8] & 0xF) | ((scales[j] >> 6) << 4) for j in range(4)]
    mn = [scales[j + 4] & 63 for j in range(4)]
    mn += [(scales[j + 8] >> 4) | ((scales[j + 4] >> 6) << 4) for j in range(4)]
    return sc, mn


def _q3_scales(scales: bytes) -> list[int]:
    low = [b & 0xF for b in scales[:8]] + [b >> 4 for b in scales[:8]]
    return [(low[i] | (((scales[8 + i % 4] >> (2 * (i // 4))) & 3) << 4)) - 32 for i in range(16)]


def dequantize_q2_k(raw: bytes, out: array) -> None:
    for scales, qs, d, dmin in Q2_K.iter_unpack(raw):
        for i in range(16):  # sub-block i: 16 elements from half i // 8, crumb (i % 8) // 2, bytes 16 * (i % 2)
            sc = scales[i]
            dl, ml = d * (sc & 0xF), dmin * (sc >> 4)
            start = (i // 8) * 32 + (i % 2) * 16
            out.fromlist([dl * q - ml for q in qs[start : start + 16].translate(CRUMB[(i % 8) // 2])])


def dequantize_q3_k(raw: bytes, out: array) -> None:
    for hmask, qs, scales, d in Q3_K.iter_unpack(raw):
        sc = _q3_scales(scales)
        for g in range(8):  # 32 elements: crumb g % 4 of qs[32 * (g // 4):], high bit g of hmask
            start = (g // 4) * 32
            q = or_bytes(qs[start : start + 32].translate(CRUMB[g % 4]), shift_bytes(hmask.translate(BIT[g]), 2))
            for h in range(2):
                dl = d * sc[2 * g + h]
                out.fromlist([dl * (v - 4) for v in q[16 * h : 16 * h + 16]])


def dequantize_q4_k(raw: bytes, out: array) -> None:
    for d, dmin, scales, qs in Q4_K.iter_unpack(raw):
        sc, mn = _scale_min_k4(scales)
        for c in range(4):
            chunk = qs[32 * c : 32 * c + 32]
            for h, table in enumerate((LOW_NIBBLE, HIGH_NIBBLE)):
                dl, ml = d * sc[2 * c + h], dmin * mn[2 * c + h]
                out.fromlist([dl * q - ml for q in chunk.translate(table)])


def dequantize_q5_k(raw: bytes, out: array) -> None:
    for d, dmin, scales, qh, qs in Q5_K.iter_unpack(raw):
        sc, mn = _scale_min_k4(scales)
        for c in range(4):
            chunk = qs[32 * c : 32 * c + 32]
            for h, table in enumerate((LOW_NIBBLE, HIGH_NIBBLE)):
                i = 2 * c + h
                dl, ml = d * sc[i], dmin * mn[i]
                q = or_bytes(chunk.translate(table), shift_bytes(qh.translate(BIT[i]), 4))
                out.fromlist([dl * v - ml for v in q])


def dequantize_q6_k(raw: bytes, out: array) -> None:
    for block in Q6_K.iter_unpack(raw):
        ql, qh, scales, d = block[0], block[1], block[2:18], block[18]
        for half in range(2):
            low, high = ql[64 * half : 64 * half + 64], qh[32 * half : 32 * half + 32]
            # element group k (32 elements): nibble k // 2 of low[32 * (k % 2):], crumb k of high
            for k in range(4):
                part = low[32 * (k % 2) : 32 * (k % 2) + 32].translate(HIGH_NIBBLE if k >= 2 else LOW_NIBBLE)
                q = or_bytes(part, shift_bytes(high.translate(CRUMB[k]), 4))
                for h in range(2):
                    dl = d * scales[8 * half + 2 * k + h]
                    out.fromlist([dl * (v - 32) for v in q[16 * h : 16 * h + 16]])


def dequantize_q8_k(raw: bytes, out: array) -> None:
    for block in Q8_K.iter_unpack(raw):
        d = block[0]
        out.fromlist([d * q for q in block[1 : 1 + QK_K]])


def quantize_q8_k(values: array) -> bytes:
    """ggml's `quantize_row_q8_K_ref`: q = nearest_int(-127 / max * x), d = 1 / iscale; bsums by 16."""
    out = bytearray()
    for i in range(0, len(values), QK_K):
        x = values[i : i + QK_K]
        best = 0.0
        for v in x:  # the first value of largest magnitude (strictly greater replaces)
            if abs(v) > abs(best):
                best = v
        if not best:
            out += Q8_K.struct.pack(0.0, *([0] * (QK_K + QK_K // 16)))  # ggml leaves bsums unset here
            continue
        iscale = f32(-127.0 / best)
        q = [min(127, round(f32(iscale * v))) for v in x]  # nearest_int rounds half to even, as round()
        bsums = [sum(q[j : j + 16]) for j in range(0, QK_K, 16)]
        out += Q8_K.struct.pack(f32(1.0 / iscale), *q, *bsums)
    return bytes(out)


DEQUANTIZE = {
    GGMLType.Q2_K: dequantize_q2_k,
    GGMLType.Q3_K: dequantize_q3_k,
    GGMLType.Q4_K: dequantize_q4_k,
    GGMLType.Q5_K: dequantize_q5_k,
    GGMLType.Q6_K: dequantize_q6_k,
    GGMLType.Q8_K: dequantize_q8_k,
}

QUANTIZE = {GGMLType.Q8_K: quantize_q8_k}
