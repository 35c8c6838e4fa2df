"""Matmuls of the 256-element super-block types against Q8_K activations: Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS.

A super-block holds sub-blocks of 16 or 32 elements with small integer scales (and mins). Per super-block the
integer dots of the sub-blocks, times their scales, add up in an int32 vector (for 16-element sub-blocks a dot4
of 32 bytes has the first 16 in lanes 0..3, the next 16 in lanes 4..7), then one FMA by d·dx into a float32
vector, as ggml's AVX2 code does; the offsets of Q3_K / Q6_K stay in the integer lanes (`dot4_offset`), the mins
of Q2_K / Q4_K / Q5_K need Σx of a sub-block: Q8_K's bsum (by 16).

Per type, only what its super-block holds: its integer dot with a Q8_K super-block `*_dot` (and `*_mins` for the
types with mins), its unpacker `*_unpack` (its quants one per byte, its group scales and the integers multiplying
the groups' Σx, its floats: for the panels of `panels` and for get_rows) and its entry in TRAITS. The row kernels
(`k_dot`, `k_unpack`) take the type's entry, as do the family's matmul and get_rows (`drivers`).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.extending import overload

from llamay.ggml_types import GGMLType
from llamay.quants.iquants import IQ4_XS
from llamay.quants.kquants import Q2_K, Q3_K, Q4_K, Q5_K, Q6_K

from . import blocks as bl
from .activations import QK8_K, QK8_K_SUM
from .quantops import (
    bits_of,
    bytes8,
    dot4,
    dot4_offset,
    dot4_signed,
    iadd,
    imul,
    imul_add,
    imul_add_halves,
    iq4_levels,
    lane_halves,
    lane_splat,
    load_i8_as_i32x8,
    nibbles,
    offset_by,
    or_shifted,
    pair_lanes,
    pair_sums16,
    store_vec,
)
from .simd import fma_i32, fsum, fzero, izero, load_f16, load_i8x32, load_u8x16, load_u8x32, load_u16, load_u32
from .traits import Q8K, Traits

QK = QK8_K
SUMS = QK8_K // QK8_K_SUM  # bsums per super-block
NIBBLE, CRUMB, BIT = 0xF, 3, 1
Q3_OFFSET = 4  # Q3_K: value = (crumb | high bit << 2) - 4
Q6_OFFSET = 32  # Q6_K: value = (nibble | crumb << 4) - 32
SCALE_OFFSET = 32  # Q3_K and IQ4_XS 6-bit scales are stored + 32
# Q4_K and Q5_K share where d, dmin and the scales are, so their kernels read them at Q4_K's offsets
if (bl.Q4_K_D, bl.Q4_K_DMIN, bl.Q4_K_SCALES) != (bl.Q5_K_D, bl.Q5_K_DMIN, bl.Q5_K_SCALES):
    raise ImportError("Q4_K and Q5_K no longer share d, dmin and scales: give _dot_k45 their offsets")


@njit(cache=True, fastmath=False, inline="always")
def _byte(w, at):
    return np.int64(w[at])


@njit(cache=True, fastmath=False, inline="always")
def scale_min_k4(w, at, j):
    """Q4_K / Q5_K: the 6-bit scale and min of sub-block j from the 12 packed bytes at w[at]."""
    if j < 4:
        return _byte(w, at + j) & 63, _byte(w, at + j + 4) & 63
    sc = (_byte(w, at + j + 4) & 0xF) | ((_byte(w, at + j - 4) >> 6) << 4)
    mn = (_byte(w, at + j + 4) >> 4) | ((_byte(w, at + j) >> 6) << 4)
    return sc, mn


@njit(cache=True, fastmath=False, inline="always")
def q3_scale(w, at, i):
    """Q3_K: the signed 6-bit scale of sub-block i (low 4 bits in bytes 0..7, high 2 bits in bytes 8..11)."""
    low = (_byte(w, at + i) & 0xF) if i < 8 else (_byte(w, at + i - 8) >> 4)
    high = (_byte(w, at + 8 + i % 4) >> (2 * (i // 4))) & 3
    return (low | (high << 4)) - SCALE_OFFSET


@njit(cache=True, fastmath=False, inline="always")
def _i8(w, at):
    """The byte at w[at] as a signed int8."""
    v = _byte(w, at)
    return v - 256 if v > 127 else v


# -- each type's super-block at w[o] against one Q8_K activation super-block (quants xq from xb): the integer dot
# by its sub-block scales (eight int32 lanes), and, for the types with mins, the mins' dot with the bsums (from gb)


@njit(cache=True, fastmath=False, inline="always")
def q2_k_dot(w, o, xq, xb):
    total = izero()
    for half in range(2):  # 128 elements: crumb c of qs[32 half:] holds sub-blocks 8 half + 2c, + 1
        q = load_u8x32(w, o + bl.Q2_K_QS + 32 * half)
        for c in range(4):
            i = 8 * half + 2 * c
            s0, s1 = _byte(w, o + bl.Q2_K_SCALES + i), _byte(w, o + bl.Q2_K_SCALES + i + 1)
            p = dot4(bits_of(q, 2 * c, CRUMB), load_i8x32(xq, xb + 16 * i))
            total = imul_add_halves(total, p, s0 & NIBBLE, s1 & NIBBLE)
    return total


@njit(cache=True, fastmath=False, inline="always")
def q2_k_mins(w, o, bsum, gb):
    """Σ min·bsum over the 16 groups: one integer (ggml's AVX2 code sums Q2_K's mins as a scalar)."""
    msum = 0
    for i in range(SUMS):
        msum += (_byte(w, o + bl.Q2_K_SCALES + i) >> 4) * bsum[gb + i]
    return msum


@njit(cache=True, fastmath=False, inline="always")
def q3_k_dot(w, o, xq, xb):
    hmask = load_u8x32(w, o + bl.Q3_K_HMASK)
    total = izero()
    for g in range(8):  # 32 elements: crumb g % 4 of qs[32 (g // 4):], high bit g of hmask
        crumbs = bits_of(load_u8x32(w, o + bl.Q3_K_QS + 32 * (g // 4)), 2 * (g % 4), CRUMB)
        q = or_shifted(crumbs, bits_of(hmask, g, BIT), 2)
        s0, s1 = q3_scale(w, o + bl.Q3_K_SCALES, 2 * g), q3_scale(w, o + bl.Q3_K_SCALES, 2 * g + 1)
        total = imul_add_halves(total, dot4_offset(q, load_i8x32(xq, xb + 32 * g), Q3_OFFSET), s0, s1)
    return total


@njit(cache=True, fastmath=False, inline="always")
def k4_scales(w, at):
    """Q4_K / Q5_K: the 8 6-bit scales and the 8 6-bit mins packed in the 12 bytes at w[at], as two i32x8,
    unpacked four at a time in 32-bit words (bytes 0..3: low 6 bits of scales 0..3, their top 2 bits the top
    of scales 4..7; bytes 4..7 the same for the mins; bytes 8..11: low nibbles of scales 4..7, high of mins)."""
    a, b, c = load_u32(w, at), load_u32(w, at + 4), load_u32(w, at + 8)
    scales_hi = (c & 0x0F0F0F0F) | (((a >> 6) & 0x03030303) << 4)
    mins_hi = ((c >> 4) & 0x0F0F0F0F) | (((b >> 6) & 0x03030303) << 4)
    return bytes8(a & 0x3F3F3F3F, scales_hi), bytes8(b & 0x3F3F3F3F, mins_hi)


@njit(cache=True, fastmath=False, inline="always")
def q4_k_quants(w, o, c):
    """The quants of sub-blocks 2c and 2c + 1 of the Q4_K block at w[o]: the low and high nibbles of qs[32c:]."""
    v = load_u8x32(w, o + bl.Q4_K_QS + 32 * c)
    return bits_of(v, 0, NIBBLE), bits_of(v, 4, NIBBLE)


@njit(cache=True, fastmath=False, inline="always")
def q5_k_quants(w, o, c):
    """As Q4_K's, with bit 4 of sub-block j's quants from bit j of qh."""
    v, high = load_u8x32(w, o + bl.Q5_K_QS + 32 * c), load_u8x32(w, o + bl.Q5_K_QH)
    lo = or_shifted(bits_of(v, 0, NIBBLE), bits_of(high, 2 * c, BIT), 4)
    return lo, or_shifted(bits_of(v, 4, NIBBLE), bits_of(high, 2 * c + 1, BIT), 4)


@njit(cache=True, fastmath=False, inline="always")
def k45_dot(tr, w, o, xq, xb):
    """Q4_K / Q5_K (their quants: tr.block_quants)."""
    sc = k4_scales(w, o + bl.Q4_K_SCALES)[0]
    total = izero()
    for c in range(4):  # 64 elements: sub-blocks 2c and 2c + 1
        lo, hi = tr.block_quants(w, o, c)
        total = iadd(total, imul(dot4(lo, load_i8x32(xq, xb + 64 * c)), lane_splat(sc, 2 * c)))
        total = iadd(total, imul(dot4(hi, load_i8x32(xq, xb + 64 * c + 32)), lane_splat(sc, 2 * c + 1)))
    return total


@njit(cache=True, fastmath=False, inline="always")
def k45_mins(w, o, bsum, gb):
    """Q4_K / Q5_K: each sub-block's min times the bsums of its two groups, in lanes 0..3 by pairs (ggml's order)."""
    return pair_lanes(imul(k4_scales(w, o + bl.Q4_K_SCALES)[1], pair_sums16(bsum, gb)))


@njit(cache=True, fastmath=False, inline="always")
def q6_k_dot(w, o, xq, xb):
    scales = (load_i8_as_i32x8(w, o + bl.Q6_K_SCALES), load_i8_as_i32x8(w, o + bl.Q6_K_SCALES + 8))
    total = izero()
    for half in range(2):  # 128 elements; group k (32): nibble k // 2 of ql[64 half + 32 (k % 2):], crumb k
        high = load_u8x32(w, o + bl.Q6_K_QH + 32 * half)
        sc = scales[half]
        for k in range(4):
            low = load_u8x32(w, o + bl.Q6_K_QL + 64 * half + 32 * (k % 2))
            q = or_shifted(bits_of(low, 4 * (k // 2), NIBBLE), bits_of(high, 2 * k, CRUMB), 4)
            p = dot4_offset(q, load_i8x32(xq, xb + 128 * half + 32 * k), Q6_OFFSET)
            total = iadd(total, imul(p, lane_halves(sc, 2 * k, 2 * k + 1)))
    return total


@njit(cache=True, fastmath=False, inline="always")
def iq4_xs_dot(w, o, xq, xb):
    high = load_u16(w, o + bl.IQ4_XS_SCALES_H)
    total = izero()
    for ib in range(8):
        low = (_byte(w, o + bl.IQ4_XS_SCALES_L + ib // 2) >> (4 * (ib % 2))) & 0xF
        ls = low | (((high >> (2 * ib)) & 3) << 4)
        levels = iq4_levels(nibbles(load_u8x16(w, o + bl.IQ4_XS_QS + 16 * ib)))
        total = imul_add(total, dot4_signed(levels, load_i8x32(xq, xb + 32 * ib)), ls - SCALE_OFFSET)
    return total


# -- the family's row dot, for the type tr: its mins come off in lanes (Q4_K, Q5_K), as a scalar (Q2_K) or not at all


def _mins_in_lanes(tr, lane_mins, mins, w, o, bsum, gb, dx):
    return fma_i32(lane_mins, tr.block_mins(w, o, bsum, gb), -(dx * load_f16(w, o + tr.dmin_at))), mins


def _mins_as_scalar(tr, lane_mins, mins, w, o, bsum, gb, dx):
    return lane_mins, mins + load_f16(w, o + tr.dmin_at) * dx * np.float32(tr.block_mins(w, o, bsum, gb))


def _no_mins(tr, lane_mins, mins, w, o, bsum, gb, dx):
    return lane_mins, mins


def _sum_with_lane_mins(tr, acc, lane_mins, mins):
    return fsum(acc) + fsum(lane_mins)


def _sum_less_mins(tr, acc, lane_mins, mins):
    return fsum(acc) - mins


def _sum(tr, acc, lane_mins, mins):
    return fsum(acc)


def k_mins(tr, lane_mins, mins, w, o, bsum, gb, dx):
    """(lane_mins, mins) with super-block w[o]'s mins term added, dmin·dx times its mins' dot with the bsums at
    gb (`_mins_*`, chosen by the type's traits when numba compiles the caller)."""


def k_sum(tr, acc, lane_mins, mins):
    """A row's dot from its lanes and its mins' sums."""


@overload(k_mins, inline="always")
def _k_mins(tr, lane_mins, mins, w, o, bsum, gb, dx):
    if not tr.traits.has_min:
        return _no_mins
    return _mins_in_lanes if tr.traits.min_lanes else _mins_as_scalar


@overload(k_sum, inline="always")
def _k_sum(tr, acc, lane_mins, mins):
    if not tr.traits.has_min:
        return _sum
    return _sum_with_lane_mins if tr.traits.min_lanes else _sum_less_mins


@njit(cache=True, fastmath=False, inline="always")
def k_dot(tr, w, wo, xq, xo, kd, bsum, so, go, nb):
    """One weight row (from byte wo) · one Q8_K activation row (quants xq from xo, kd from so, bsum from go): per
    super-block one FMA of its integer dot by d·dx, and its mins' term (`k_mins`)."""
    acc, lane_mins = fzero(), fzero()
    mins = np.float32(0.0)
    for b in range(nb):
        o = wo + b * tr.block_bytes
        dx = kd[so + b]
        acc = fma_i32(acc, tr.block_dot(w, o, xq, xo + b * QK), load_f16(w, o + tr.d_at) * dx)
        lane_mins, mins = k_mins(tr, lane_mins, mins, w, o, bsum, go + b * SUMS, dx)
    return k_sum(tr, acc, lane_mins, mins)


# -- each type's super-block at w[o] unpacked for the panels and get_rows: quants one per byte to q[qb], per group
# of 16 its integer scale and the integer multiplying its Σx to sc[gb], e[gb], its floats to d[k], f[k]


@njit(cache=True, fastmath=False, inline="always")
def q2_k_unpack(w, o, q, qb, sc, e, gb, d, f, k):
    for half in range(2):
        v = load_u8x32(w, o + bl.Q2_K_QS + 32 * half)
        for c in range(4):
            store_vec(q, qb + 128 * half + 32 * c, bits_of(v, 2 * c, CRUMB))
    for g in range(SUMS):
        s = _byte(w, o + bl.Q2_K_SCALES + g)
        sc[gb + g], e[gb + g] = s & NIBBLE, -(s >> 4)
    d[k], f[k] = load_f16(w, o + bl.Q2_K_D), load_f16(w, o + bl.Q2_K_DMIN)


@njit(cache=True, fastmath=False, inline="always")
def q3_k_unpack(w, o, q, qb, sc, e, gb, d, f, k):
    """q is an int8 array: the quants minus 4, as the row dots' `dot4_offset` takes them (the same integers)."""
    hmask = load_u8x32(w, o + bl.Q3_K_HMASK)
    for g in range(8):
        crumbs = bits_of(load_u8x32(w, o + bl.Q3_K_QS + 32 * (g // 4)), 2 * (g % 4), CRUMB)
        store_vec(q, qb + 32 * g, offset_by(or_shifted(crumbs, bits_of(hmask, g, BIT), 2), Q3_OFFSET))
    for g in range(SUMS):
        sc[gb + g], e[gb + g] = q3_scale(w, o + bl.Q3_K_SCALES, g), 0
    d[k] = f[k] = load_f16(w, o + bl.Q3_K_D)


@njit(cache=True, fastmath=False, inline="always")
def k45_unpack(tr, w, o, q, qb, sc, e, gb, d, f, k):
    """Q4_K / Q5_K (their quants: tr.block_quants)."""
    for c in range(4):
        lo, hi = tr.block_quants(w, o, c)
        store_vec(q, qb + 64 * c, lo)
        store_vec(q, qb + 64 * c + 32, hi)
    for j in range(8):
        s, m = scale_min_k4(w, o + bl.Q4_K_SCALES, j)
        sc[gb + 2 * j] = sc[gb + 2 * j + 1] = s
        e[gb + 2 * j] = e[gb + 2 * j + 1] = -m
    d[k], f[k] = load_f16(w, o + bl.Q4_K_D), load_f16(w, o + bl.Q4_K_DMIN)


@njit(cache=True, fastmath=False, inline="always")
def q6_k_unpack(w, o, q, qb, sc, e, gb, d, f, k):
    """q is an int8 array: the quants minus 32, as the row dots' `dot4_offset` takes them (the same integers)."""
    for half in range(2):
        high = load_u8x32(w, o + bl.Q6_K_QH + 32 * half)
        for j in range(4):
            low = load_u8x32(w, o + bl.Q6_K_QL + 64 * half + 32 * (j % 2))
            u = or_shifted(bits_of(low, 4 * (j // 2), NIBBLE), bits_of(high, 2 * j, CRUMB), 4)
            store_vec(q, qb + 128 * half + 32 * j, offset_by(u, Q6_OFFSET))
    for g in range(SUMS):
        sc[gb + g], e[gb + g] = _i8(w, o + bl.Q6_K_SCALES + g), 0
    d[k] = f[k] = load_f16(w, o + bl.Q6_K_D)


@njit(cache=True, fastmath=False, inline="always")
def iq4_xs_unpack(w, o, q, qb, sc, e, gb, d, f, k):
    """q is an int8 array."""
    high = load_u16(w, o + bl.IQ4_XS_SCALES_H)
    for ib in range(8):
        store_vec(q, qb + 32 * ib, iq4_levels(nibbles(load_u8x16(w, o + bl.IQ4_XS_QS + 16 * ib))))
        low = (_byte(w, o + bl.IQ4_XS_SCALES_L + ib // 2) >> (4 * (ib % 2))) & 0xF
        sc[gb + 2 * ib] = sc[gb + 2 * ib + 1] = (low | (((high >> (2 * ib)) & 3) << 4)) - SCALE_OFFSET
        e[gb + 2 * ib] = e[gb + 2 * ib + 1] = 0
    d[k], f[k] = load_f16(w, o + bl.IQ4_XS_D), np.float32(0.0)


@njit(cache=True, fastmath=False, inline="always")
def k_unpack(tr, w, wo, nsb, q, qo, sc, e, go, d, f, bo):
    """One row of type tr (from byte wo, nsb super-blocks) unpacked: quants from q[qo], group ints from sc / e[go],
    super-block floats from d / f[bo]."""
    for b in range(nsb):
        tr.block_unpack(w, wo + b * tr.block_bytes, q, qo + b * QK, sc, e, go + b * SUMS, d, f, bo + b)


# -- the family's types: their entries of the traits table (their matmuls and get_rows: `drivers`) ------------

TRAITS = {
    t: Traits(
        t, Q8K, block, signed, block_dot=dot, block_quants=quants, block_mins=mins, min_lanes=lanes, block_unpack=unpack
    )
    for t, block, signed, quants, dot, mins, lanes, unpack in (
        (GGMLType.Q2_K, Q2_K, False, None, q2_k_dot, q2_k_mins, False, q2_k_unpack),
        (GGMLType.Q3_K, Q3_K, True, None, q3_k_dot, None, False, q3_k_unpack),
        (GGMLType.Q4_K, Q4_K, False, q4_k_quants, k45_dot, k45_mins, True, k45_unpack),
        (GGMLType.Q5_K, Q5_K, False, q5_k_quants, k45_dot, k45_mins, True, k45_unpack),
        (GGMLType.Q6_K, Q6_K, True, None, q6_k_dot, None, False, q6_k_unpack),
        (GGMLType.IQ4_XS, IQ4_XS, True, None, iq4_xs_dot, None, False, iq4_xs_unpack),
    )
}
