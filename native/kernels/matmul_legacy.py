"""Matmuls of the 32-element block types against Q8_0 / Q8_1 activations: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL MXFP4.

W4A8 as in llama.cpp: per block, an integer dot of the weight quants with the activation's int8 quants (`dot4`,
eight int32 partial sums), times d_w·d_x added to a float32 vector accumulator with one rounding (an FMA), the
lanes summed at the end: the float operations of ggml's AVX2 dot products, in the same order, so results match
llama.cpp's bit for bit where the integer sums do. The constant parts of a block's values:
- Q4_0 / Q5_0: value d·(q - 8) (or q - 16): the integer dot of q - 8 with x, exactly (`dot4_offset`);
- Q4_1 / Q5_1: value d·q + m: Σ = d·dx·(Σq·x) + m·s, s = Q8_1's fp16(dx·Σx) (what ggml multiplies m by);
- Q8_0 / IQ4_NL / MXFP4: signed quants (IQ4_NL's and MXFP4's from their 16-level tables); MXFP4's block scale is
  an E8M0 exponent byte (`block_scale`: 2^(e - 128), exact in float32) where the others hold an fp16 d.

Per type, only what its block holds: the integer dot of a block with 32 activation quants (`*_dot`), its 32
quants one per byte (`*_quants`), and its entry in TRAITS (its block layout from `llamay.quants`: where d and m
are). The row kernels (`legacy_dot`, `legacy_unpack`: panels and get_rows) take the type's entry, as do the
family's matmul and get_rows (`drivers`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from llamay.ggml_types import GGMLType
from llamay.quants.fp4 import MXFP4
from llamay.quants.iquants import IQ4_NL
from llamay.quants.legacy import Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
from llamay.quants.minifloat import E8M0_HALF

from . import blocks as bl
from .activations import QK8_0
from .quantops import (
    IQ4_BIAS,
    dot4,
    dot4_offset,
    dot4_signed,
    iq4_levels,
    mxfp4_levels,
    nibbles,
    offset_by,
    or_shifted,
    store_vec,
    word_bits,
)
from .simd import fma, fma_i32, fsum, fzero, load_f16, load_i8x32, load_u8x16
from .strips import BYTES, NIBBLES, NIBBLES_IQ4, StripFormat
from .traits import Q8, Traits

QK = QK8_0
Q4_OFFSET = 8  # Q4_0 stores q + 8
Q5_OFFSET = 16  # Q5_0 stores q + 16
INT8_BIAS = 128  # the strips hold Q8_0's int8 quants + 128, unsigned
HIGH_BIT = 4  # Q5: bit 4 of each quant comes from qh
ZERO = np.float32(0.0)


# -- each type's block at w[o]: its integer dot with 32 activation quants x (the row dots, eight int32 lanes), and
# its 32 quants one per byte (the panels and get_rows)


@njit(cache=True, fastmath=False, inline="always")
def _q5_quants(w, qs, qh):
    return or_shifted(nibbles(load_u8x16(w, qs)), word_bits(w, qh), HIGH_BIT)


@njit(cache=True, fastmath=False, inline="always")
def q4_0_dot(w, o, x):
    return dot4_offset(nibbles(load_u8x16(w, o + bl.Q4_0_QS)), x, Q4_OFFSET)


@njit(cache=True, fastmath=False, inline="always")
def q4_0_quants(w, o):
    """int8: the quants minus 8."""
    return offset_by(nibbles(load_u8x16(w, o + bl.Q4_0_QS)), Q4_OFFSET)


@njit(cache=True, fastmath=False, inline="always")
def q4_1_dot(w, o, x):
    return dot4(nibbles(load_u8x16(w, o + bl.Q4_1_QS)), x)


@njit(cache=True, fastmath=False, inline="always")
def q4_1_quants(w, o):
    return nibbles(load_u8x16(w, o + bl.Q4_1_QS))


@njit(cache=True, fastmath=False, inline="always")
def q5_0_dot(w, o, x):
    return dot4_offset(_q5_quants(w, o + bl.Q5_0_QS, o + bl.Q5_0_QH), x, Q5_OFFSET)


@njit(cache=True, fastmath=False, inline="always")
def q5_0_quants(w, o):
    """int8: the quants minus 16."""
    return offset_by(_q5_quants(w, o + bl.Q5_0_QS, o + bl.Q5_0_QH), Q5_OFFSET)


@njit(cache=True, fastmath=False, inline="always")
def q5_1_dot(w, o, x):
    return dot4(_q5_quants(w, o + bl.Q5_1_QS, o + bl.Q5_1_QH), x)


@njit(cache=True, fastmath=False, inline="always")
def q5_1_quants(w, o):
    return _q5_quants(w, o + bl.Q5_1_QS, o + bl.Q5_1_QH)


@njit(cache=True, fastmath=False, inline="always")
def q8_0_dot(w, o, x):
    return dot4_signed(load_i8x32(w, o + bl.Q8_0_QS), x)


@njit(cache=True, fastmath=False, inline="always")
def q8_0_quants(w, o):
    return load_i8x32(w, o + bl.Q8_0_QS)


@njit(cache=True, fastmath=False, inline="always")
def iq4_nl_dot(w, o, x):
    return dot4_signed(iq4_levels(nibbles(load_u8x16(w, o + bl.IQ4_NL_QS))), x)


@njit(cache=True, fastmath=False, inline="always")
def iq4_nl_quants(w, o):
    """int8: the levels."""
    return iq4_levels(nibbles(load_u8x16(w, o + bl.IQ4_NL_QS)))


@njit(cache=True, fastmath=False, inline="always")
def mxfp4_dot(w, o, x):
    return dot4_signed(mxfp4_levels(nibbles(load_u8x16(w, o + bl.MXFP4_QS))), x)


@njit(cache=True, fastmath=False, inline="always")
def mxfp4_quants(w, o):
    """int8: the levels."""
    return mxfp4_levels(nibbles(load_u8x16(w, o + bl.MXFP4_QS)))


E8M0_HALF_F32 = np.array(E8M0_HALF, np.float32)  # every E8M0 byte's halved scale (a constant of the kernels)


@njit(cache=True, fastmath=False, inline="always")
def e8m0_scale(tr, w, o):
    return E8M0_HALF_F32[w[o + bl.MXFP4_E]]


@njit(cache=True, fastmath=False, inline="always")
def f16_scale(tr, w, o):
    return load_f16(w, o + tr.d_at)


# -- the family's row kernels, for the type tr: a block is d, its quants (and m) ------------------------------------


@njit(cache=True, fastmath=False, inline="always")
def legacy_dot(tr, w, wo, xq, xo, xd, xs, so, nb):
    """One weight row (from byte wo) · one activation row (quants xq from xo, block scales from so)."""
    acc = fzero()
    mins = ZERO
    for b in range(nb):
        o = wo + b * tr.block_bytes
        acc = fma_i32(acc, tr.block_dot(w, o, load_i8x32(xq, xo + b * QK)), tr.block_scale(w, o) * xd[so + b])
        if tr.has_min:
            mins = fma(load_f16(w, o + tr.m_at), xs[so + b], mins)
    return fsum(acc) + mins if tr.has_min else fsum(acc)


@njit(cache=True, fastmath=False, inline="always")
def legacy_unpack(tr, w, wo, nb, q, qo, d, e, do, ds):
    """One row's quants (one per byte) to q[qo], block b's scale and constant term to d[do + ds·b], e[do + ds·b]
    (ds = 8 for the rows that `panels` interleaves)."""
    for b in range(nb):
        o = wo + b * tr.block_bytes
        store_vec(q, qo + QK * b, tr.block_quants(w, o))
        d[do + ds * b] = tr.block_scale(w, o)
        e[do + ds * b] = load_f16(w, o + tr.m_at) if tr.has_min else ZERO


# -- the family's types: their entries of the traits table (their matmuls and get_rows: `drivers`) ------------

TRAITS = {
    t: Traits(t, Q8, block, signed, strip, block_dot=block_dot, block_quants=block_quants, block_scale=scale)
    for t, block, block_dot, block_quants, signed, strip, scale in (
        (GGMLType.Q4_0, Q4_0, q4_0_dot, q4_0_quants, True, StripFormat(NIBBLES, Q4_OFFSET, False), f16_scale),
        (GGMLType.Q4_1, Q4_1, q4_1_dot, q4_1_quants, False, StripFormat(NIBBLES, 0, True), f16_scale),
        (GGMLType.Q5_0, Q5_0, q5_0_dot, q5_0_quants, True, StripFormat(BYTES, Q5_OFFSET, False), f16_scale),
        (GGMLType.Q5_1, Q5_1, q5_1_dot, q5_1_quants, False, StripFormat(BYTES, 0, True), f16_scale),
        (GGMLType.Q8_0, Q8_0, q8_0_dot, q8_0_quants, True, StripFormat(BYTES, INT8_BIAS, False), f16_scale),
        (GGMLType.IQ4_NL, IQ4_NL, iq4_nl_dot, iq4_nl_quants, True, StripFormat(NIBBLES_IQ4, IQ4_BIAS, False),
         f16_scale),
        (GGMLType.MXFP4, MXFP4, mxfp4_dot, mxfp4_quants, True, None, e8m0_scale),  # not in strips: plain rows
    )
}  # fmt: skip
