"""Matmuls of the 256-element super-block types against Q8_K activations: Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS.

A super-block holds sub-blocks of 16 or 32 elements with small integer scales (and mins). Per super-block the
integer dots of the sub-blocks, times their scales, add up in an int32 vector (`imul_add`, `imul_add_halves`
for 16-element sub-blocks: a dot4 of 32 bytes has the first 16 in lanes 0..3, the next 16 in lanes 4..7);
one float multiply by d·dx per super-block follows. Offsets and mins need Σx of a sub-block: Q8_K's bsum (by 16).

Every matmul has one signature, (out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum): x (n, n_in) is quantised
to Q8_K into the scratch xq (n, n_in) int8, kd (n, n_in / 256) float32, bsum (n, n_in / 16) int32 first.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from . import blocks as bl
from .activations import QK8_K, QK8_K_SUM, quantize_q8_k
from .simd import (
    bits_of,
    dot4,
    dot4_signed,
    fma_i32,
    fsum,
    fzero,
    imul_add,
    imul_add_halves,
    iq4_levels,
    izero,
    load_f16,
    load_i8x32,
    load_u8x16,
    load_u8x32,
    load_u16,
    nibbles,
    or_shifted,
)

QK = QK8_K
SUMS = QK8_K // QK8_K_SUM  # bsums per super-block
NIBBLE, CRUMB, BIT = 0xF, 3, 1
Q3_OFFSET = 4  # Q3_K: value = (crumb | high bit << 2) - 4
Q6_OFFSET = 32  # Q6_K: value = (nibble | crumb << 4) - 32
SCALE_OFFSET = 32  # Q3_K and IQ4_XS 6-bit scales are stored + 32


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


# -- one weight row · one Q8_K activation row: w from byte wo, quants xq from xo, kd from so, bsum from go ----


@njit(cache=True, fastmath=False, inline="always")
def dot_q2_k(w, wo, xq, xo, kd, bsum, so, go, nb):
    acc = fzero()
    mins = np.float32(0.0)
    for b in range(nb):
        o = wo + b * bl.Q2_K_SIZE
        xb, gb, sc = xo + b * QK, go + b * SUMS, o + bl.Q2_K_SCALES
        total = izero()
        msum = 0
        for half in range(2):  # 128 elements: crumb c of qs[32 half:] holds sub-blocks 8 half + 2c, + 1
            q = load_u8x32(w, o + bl.Q2_K_QS + 32 * half)
            for c in range(4):
                i = 8 * half + 2 * c
                s0, s1 = _byte(w, sc + i), _byte(w, sc + i + 1)
                p = dot4(bits_of(q, 2 * c, CRUMB), load_i8x32(xq, xb + 16 * i))
                total = imul_add_halves(total, p, s0 & NIBBLE, s1 & NIBBLE)
                msum += (s0 >> 4) * bsum[gb + i] + (s1 >> 4) * bsum[gb + i + 1]
        dx = kd[so + b]
        acc = fma_i32(acc, total, load_f16(w, o + bl.Q2_K_D) * dx)
        mins += load_f16(w, o + bl.Q2_K_DMIN) * dx * np.float32(msum)
    return fsum(acc) - mins


@njit(cache=True, fastmath=False, inline="always")
def dot_q3_k(w, wo, xq, xo, kd, bsum, so, go, nb):
    acc = fzero()
    offsets = np.float32(0.0)
    for b in range(nb):
        o = wo + b * bl.Q3_K_SIZE
        xb, gb = xo + b * QK, go + b * SUMS
        hmask = load_u8x32(w, o + bl.Q3_K_HMASK)
        total = izero()
        osum = 0
        for g in range(8):  # 32 elements: crumb g % 4 of qs[32 (g // 4):], high bit g of hmask
            crumbs = bits_of(load_u8x32(w, o + bl.Q3_K_QS + 32 * (g // 4)), 2 * (g % 4), CRUMB)
            q = or_shifted(crumbs, bits_of(hmask, g, BIT), 2)
            s0, s1 = q3_scale(w, o + bl.Q3_K_SCALES, 2 * g), q3_scale(w, o + bl.Q3_K_SCALES, 2 * g + 1)
            total = imul_add_halves(total, dot4(q, load_i8x32(xq, xb + 32 * g)), s0, s1)
            osum += s0 * bsum[gb + 2 * g] + s1 * bsum[gb + 2 * g + 1]
        s = load_f16(w, o + bl.Q3_K_D) * kd[so + b]
        acc = fma_i32(acc, total, s)
        offsets += s * np.float32(osum)
    return fsum(acc) - np.float32(Q3_OFFSET) * offsets


@njit(cache=True, fastmath=False, inline="always")
def dot_q4_k(w, wo, xq, xo, kd, bsum, so, go, nb):
    acc = fzero()
    mins = np.float32(0.0)
    for b in range(nb):
        o = wo + b * bl.Q4_K_SIZE
        xb, gb = xo + b * QK, go + b * SUMS
        total = izero()
        msum = 0
        for c in range(4):  # 64 elements: low nibbles of qs[32c:] are sub-block 2c, high nibbles 2c + 1
            q = load_u8x32(w, o + bl.Q4_K_QS + 32 * c)
            s0, m0 = scale_min_k4(w, o + bl.Q4_K_SCALES, 2 * c)
            s1, m1 = scale_min_k4(w, o + bl.Q4_K_SCALES, 2 * c + 1)
            total = imul_add(total, dot4(bits_of(q, 0, NIBBLE), load_i8x32(xq, xb + 64 * c)), s0)
            total = imul_add(total, dot4(bits_of(q, 4, NIBBLE), load_i8x32(xq, xb + 64 * c + 32)), s1)
            g = gb + 4 * c
            msum += m0 * (bsum[g] + bsum[g + 1]) + m1 * (bsum[g + 2] + bsum[g + 3])
        dx = kd[so + b]
        acc = fma_i32(acc, total, load_f16(w, o + bl.Q4_K_D) * dx)
        mins += load_f16(w, o + bl.Q4_K_DMIN) * dx * np.float32(msum)
    return fsum(acc) - mins


@njit(cache=True, fastmath=False, inline="always")
def dot_q5_k(w, wo, xq, xo, kd, bsum, so, go, nb):
    acc = fzero()
    mins = np.float32(0.0)
    for b in range(nb):
        o = wo + b * bl.Q5_K_SIZE
        xb, gb = xo + b * QK, go + b * SUMS
        qh = load_u8x32(w, o + bl.Q5_K_QH)
        total = izero()
        msum = 0
        for c in range(4):  # as Q4_K, bit 4 of sub-block j's quants is bit j of qh
            q = load_u8x32(w, o + bl.Q5_K_QS + 32 * c)
            s0, m0 = scale_min_k4(w, o + bl.Q5_K_SCALES, 2 * c)
            s1, m1 = scale_min_k4(w, o + bl.Q5_K_SCALES, 2 * c + 1)
            lo = or_shifted(bits_of(q, 0, NIBBLE), bits_of(qh, 2 * c, BIT), 4)
            hi = or_shifted(bits_of(q, 4, NIBBLE), bits_of(qh, 2 * c + 1, BIT), 4)
            total = imul_add(total, dot4(lo, load_i8x32(xq, xb + 64 * c)), s0)
            total = imul_add(total, dot4(hi, load_i8x32(xq, xb + 64 * c + 32)), s1)
            g = gb + 4 * c
            msum += m0 * (bsum[g] + bsum[g + 1]) + m1 * (bsum[g + 2] + bsum[g + 3])
        dx = kd[so + b]
        acc = fma_i32(acc, total, load_f16(w, o + bl.Q5_K_D) * dx)
        mins += load_f16(w, o + bl.Q5_K_DMIN) * dx * np.float32(msum)
    return fsum(acc) - mins


@njit(cache=True, fastmath=False, inline="always")
def dot_q6_k(w, wo, xq, xo, kd, bsum, so, go, nb):
    acc = fzero()
    offsets = np.float32(0.0)
    for b in range(nb):
        o = wo + b * bl.Q6_K_SIZE
        xb, gb, sc = xo + b * QK, go + b * SUMS, o + bl.Q6_K_SCALES
        total = izero()
        osum = 0
        for half in range(2):  # 128 elements; group k (32): nibble k // 2 of ql[64 half + 32 (k % 2):], crumb k
            high = load_u8x32(w, o + bl.Q6_K_QH + 32 * half)
            for k in range(4):
                low = load_u8x32(w, o + bl.Q6_K_QL + 64 * half + 32 * (k % 2))
                q = or_shifted(bits_of(low, 4 * (k // 2), NIBBLE), bits_of(high, 2 * k, CRUMB), 4)
                i = 8 * half + 2 * k
                s0, s1 = _i8(w, sc + i), _i8(w, sc + i + 1)
                total = imul_add_halves(total, dot4(q, load_i8x32(xq, xb + 16 * i)), s0, s1)
                osum += s0 * bsum[gb + i] + s1 * bsum[gb + i + 1]
        s = load_f16(w, o + bl.Q6_K_D) * kd[so + b]
        acc = fma_i32(acc, total, s)
        offsets += s * np.float32(osum)
    return fsum(acc) - np.float32(Q6_OFFSET) * offsets


@njit(cache=True, fastmath=False, inline="always")
def dot_iq4_xs(w, wo, xq, xo, kd, bsum, so, go, nb):
    acc = fzero()
    for b in range(nb):
        o = wo + b * bl.IQ4_XS_SIZE
        xb = xo + b * QK
        high = load_u16(w, o + bl.IQ4_XS_SCALES_H)
        total = izero()
        for ib in range(8):
            low = (_byte(w, o + bl.IQ4_XS_SCALES_L + ib // 2) >> (4 * (ib % 2))) & 0xF
            ls = low | (((high >> (2 * ib)) & 3) << 4)
            levels = iq4_levels(nibbles(load_u8x16(w, o + bl.IQ4_XS_QS + 16 * ib)))
            total = imul_add(total, dot4_signed(levels, load_i8x32(xq, xb + 32 * ib)), ls - SCALE_OFFSET)
        acc = fma_i32(acc, total, load_f16(w, o + bl.IQ4_XS_D) * kd[so + b])
    return fsum(acc)


# -- matmuls: quantise x once, then rows in parallel, every token of the batch per row -----------------------


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q2_k(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nb, ng = n_in // QK, n_in // QK8_K_SUM
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_q2_k(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nb, i * ng, nb)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q3_k(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nb, ng = n_in // QK, n_in // QK8_K_SUM
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_q3_k(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nb, i * ng, nb)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q4_k(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nb, ng = n_in // QK, n_in // QK8_K_SUM
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_q4_k(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nb, i * ng, nb)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q5_k(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nb, ng = n_in // QK, n_in // QK8_K_SUM
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_q5_k(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nb, i * ng, nb)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q6_k(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nb, ng = n_in // QK, n_in // QK8_K_SUM
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_q6_k(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nb, i * ng, nb)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_iq4_xs(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nb, ng = n_in // QK, n_in // QK8_K_SUM
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_iq4_xs(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nb, i * ng, nb)
