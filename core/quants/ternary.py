"""The ternary types TQ1_0 (1.6875 bits: 5 trits per byte) and TQ2_0 (2 bits per trit), levels -d, 0, +d.

Dequantizers follow ggml's `dequantize_row_tq*`; quantizers follow gguf-py (and ggml's `quantize_row_tq*_ref`):
d = amax, q = round(x / d) + 1 rounded half away from zero.
"""

from __future__ import annotations

from array import array

from ..ggml_types import QK_K, GGMLType
from .bits import CRUMB
from .layout import Block
from .minifloat import f32, pack_half

# qs[48]: bytes 0..31 hold elements 32n + m (trit n of byte m), bytes 32..47 hold 160 + 16n + m;
# qh[4]: byte m holds elements 240 + 4n + m (4 trits). A byte stores its trits as ceil(value * 256 / 243):
# trit n (most significant first) is ((byte * 3^n mod 256) * 3) >> 8.
TQ1_0 = Block(GGMLType.TQ1_0, qs="48s", qh="4s", d="e")
# qs[64]: element 128j + 32s + m is crumb s of byte 32j + m, stored as q + 1
TQ2_0 = Block(GGMLType.TQ2_0, qs="64s", d="e")

# TRIT[n]: translate table byte -> its n-th trit (0..2)
TRIT: tuple[bytes, ...] = tuple(bytes((((b * 3**n) & 0xFF) * 3) >> 8 for b in range(256)) for n in range(5))
_POW3_DESC = (81, 27, 9, 3, 1)


def dequantize_tq1_0(raw: bytes, out: array) -> None:
    for qs, qh, d in TQ1_0.iter_unpack(raw):
        levels = [d * (q - 1) for q in range(3)]  # d * 0 keeps the sign of d, as in C
        trits = b"".join(qs[:32].translate(TRIT[n]) for n in range(5))
        trits += b"".join(qs[32:].translate(TRIT[n]) for n in range(5))
        trits += b"".join(qh.translate(TRIT[n]) for n in range(4))
        out.fromlist(list(map(levels.__getitem__, trits)))


def dequantize_tq2_0(raw: bytes, out: array) -> None:
    for qs, d in TQ2_0.iter_unpack(raw):
        levels = [d * (q - 1) for q in range(4)]  # crumb 3 (+2d) is never written by the quantizer
        crumbs = b"".join(qs[j : j + 32].translate(CRUMB[s]) for j in (0, 32) for s in range(4))
        out.fromlist(list(map(levels.__getitem__, crumbs)))


def _trits(x: list[float]) -> tuple[float, list[int]]:
    """d = amax and the trits round(x / d) + 1 in 0..2 (rounded half away from zero, like `roundf`)."""
    d = max(map(abs, x))
    inv = f32(1.0 / d) if d else 0.0
    q = []
    for v in x:
        y = f32(v * inv)
        q.append((int(y + 0.5) if y >= 0 else -int(0.5 - y)) + 1)
    return d, q


def _pack_trits(groups: list[list[int]], weights: tuple[int, ...]) -> bytes:
    """One byte per position m: sum_n groups[n][m] * weights[n], then scaled up as ceil(v * 256 / 243)."""
    packed = (sum(g[m] * w for g, w in zip(groups, weights, strict=True)) for m in range(len(groups[0])))
    return bytes((v * 256 + 242) // 243 for v in packed)


def quantize_tq1_0(values: array) -> bytes:
    out = bytearray()
    for i in range(0, len(values), QK_K):
        d, q = _trits(values[i : i + QK_K])
        qs = _pack_trits([q[32 * n : 32 * n + 32] for n in range(5)], _POW3_DESC)
        qs += _pack_trits([q[160 + 16 * n : 176 + 16 * n] for n in range(5)], _POW3_DESC)
        qh = _pack_trits([q[240 + 4 * n : 244 + 4 * n] for n in range(4)], _POW3_DESC[:4])  # 5th trit is 0
        out += qs + qh + pack_half(d)
    return bytes(out)


def quantize_tq2_0(values: array) -> bytes:
    out = bytearray()
    for i in range(0, len(values), QK_K):
        d, q = _trits(values[i : i + QK_K])
        qs = bytes(
            q[128 * j + m] | (q[128 * j + 32 + m] << 2) | (q[128 * j + 64 + m] << 4) | (q[128 * j + 96 + m] << 6)
            for j in range(2)
            for m in range(32)
        )
        out += qs + pack_half(d)
    return bytes(out)


DEQUANTIZE = {GGMLType.TQ1_0: dequantize_tq1_0, GGMLType.TQ2_0: dequantize_tq2_0}
QUANTIZE = {GGMLType.TQ1_0: quantize_tq1_0, GGMLType.TQ2_0: quantize_tq2_0}
