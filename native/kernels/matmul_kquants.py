"""Matmuls of the 256-element super-block types against Q8_K activations: Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS.

A super-block holds sub-blocks of 16 or 32 elements with small integer scales (and mins). Per super-block the
integer dots of the sub-blocks, times their scales, add up in an int32 vector (for 16-element sub-blocks a dot4
of 32 bytes has the first 16 in lanes 0..3, the next 16 in lanes 4..7), then one FMA by d·dx into a float32
vector, as ggml's AVX2 code does; the offsets of Q3_K / Q6_K stay in the integer lanes (`dot4_offset`), the mins
of Q2_K / Q4_K / Q5_K need Σx of a sub-block: Q8_K's bsum (by 16).

Every matmul has one signature, (out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum, pq, pd, pf, psc, pe):
x (n, n_in) is quantised to Q8_K into the scratch xq (n, n_in) int8, kd (n, n_in / 256) float32, bsum (n,
n_in / 16) int32 first. Below TILE_TOKENS tokens each row is dotted with each token from the packed bytes;
from TILE_TOKENS up, each thread unpacks panels of rows (`unpack_*`) into its scratch: pq (threads, PANEL·n_in)
quants, psc / pe (threads, PANEL·n_in / 16) int32 group scales and offset multipliers, pd / pf (threads,
PANEL·n_in / 256) float32, and runs the generic tiles of `panels`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from . import blocks as bl
from .activations import QK8_K, QK8_K_SUM, quantize_q8_k
from .panels import PANEL, TILE_TOKENS, panel_matmul_k
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
    izero,
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
from .simd import fma_i32, fsum, fzero, load_f16, load_i8x32, load_u8x16, load_u8x32, load_u16, load_u32

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
    for b in range(nb):
        o = wo + b * bl.Q3_K_SIZE
        xb = xo + b * QK
        hmask = load_u8x32(w, o + bl.Q3_K_HMASK)
        total = izero()
        for g in range(8):  # 32 elements: crumb g % 4 of qs[32 (g // 4):], high bit g of hmask
            crumbs = bits_of(load_u8x32(w, o + bl.Q3_K_QS + 32 * (g // 4)), 2 * (g % 4), CRUMB)
            q = or_shifted(crumbs, bits_of(hmask, g, BIT), 2)
            s0, s1 = q3_scale(w, o + bl.Q3_K_SCALES, 2 * g), q3_scale(w, o + bl.Q3_K_SCALES, 2 * g + 1)
            total = imul_add_halves(total, dot4_offset(q, load_i8x32(xq, xb + 32 * g), Q3_OFFSET), s0, s1)
        acc = fma_i32(acc, total, load_f16(w, o + bl.Q3_K_D) * kd[so + b])
    return fsum(acc)


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
def dot_q4_k(w, wo, xq, xo, kd, bsum, so, go, nb):
    acc, mins = fzero(), fzero()
    for b in range(nb):
        o = wo + b * bl.Q4_K_SIZE
        xb = xo + b * QK
        sc, mn = k4_scales(w, o + bl.Q4_K_SCALES)
        total = izero()
        for c in range(4):  # 64 elements: low nibbles of qs[32c:] are sub-block 2c, high nibbles 2c + 1
            q = load_u8x32(w, o + bl.Q4_K_QS + 32 * c)
            total = iadd(total, imul(dot4(bits_of(q, 0, NIBBLE), load_i8x32(xq, xb + 64 * c)), lane_splat(sc, 2 * c)))
            total = iadd(
                total, imul(dot4(bits_of(q, 4, NIBBLE), load_i8x32(xq, xb + 64 * c + 32)), lane_splat(sc, 2 * c + 1))
            )
        dx = kd[so + b]
        acc = fma_i32(acc, total, load_f16(w, o + bl.Q4_K_D) * dx)
        mins = fma_i32(
            mins, pair_lanes(imul(mn, pair_sums16(bsum, go + b * SUMS))), -(dx * load_f16(w, o + bl.Q4_K_DMIN))
        )
    return fsum(acc) + fsum(mins)


@njit(cache=True, fastmath=False, inline="always")
def dot_q5_k(w, wo, xq, xo, kd, bsum, so, go, nb):
    acc, mins = fzero(), fzero()
    for b in range(nb):
        o = wo + b * bl.Q5_K_SIZE
        xb = xo + b * QK
        sc, mn = k4_scales(w, o + bl.Q5_K_SCALES)
        qh = load_u8x32(w, o + bl.Q5_K_QH)
        total = izero()
        for c in range(4):  # as Q4_K, bit 4 of sub-block j's quants is bit j of qh
            q = load_u8x32(w, o + bl.Q5_K_QS + 32 * c)
            lo = or_shifted(bits_of(q, 0, NIBBLE), bits_of(qh, 2 * c, BIT), 4)
            hi = or_shifted(bits_of(q, 4, NIBBLE), bits_of(qh, 2 * c + 1, BIT), 4)
            total = iadd(total, imul(dot4(lo, load_i8x32(xq, xb + 64 * c)), lane_splat(sc, 2 * c)))
            total = iadd(total, imul(dot4(hi, load_i8x32(xq, xb + 64 * c + 32)), lane_splat(sc, 2 * c + 1)))
        dx = kd[so + b]
        acc = fma_i32(acc, total, load_f16(w, o + bl.Q5_K_D) * dx)
        mins = fma_i32(
            mins, pair_lanes(imul(mn, pair_sums16(bsum, go + b * SUMS))), -(dx * load_f16(w, o + bl.Q5_K_DMIN))
        )
    return fsum(acc) + fsum(mins)


@njit(cache=True, fastmath=False, inline="always")
def dot_q6_k(w, wo, xq, xo, kd, bsum, so, go, nb):
    acc = fzero()
    for b in range(nb):
        o = wo + b * bl.Q6_K_SIZE
        xb = xo + b * QK
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
        acc = fma_i32(acc, total, load_f16(w, o + bl.Q6_K_D) * kd[so + b])
    return fsum(acc)


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


# -- unpacking one row for the panels: quants from q[qo], group ints sc / e from [go], d / f from [bo] ----------


@njit(cache=True, fastmath=False, inline="always")
def unpack_q2_k(w, wo, nsb, q, qo, sc, e, go, d, f, bo):
    for b in range(nsb):
        o, qb, gb = wo + b * bl.Q2_K_SIZE, qo + b * QK, go + b * SUMS
        for half in range(2):
            v = load_u8x32(w, o + bl.Q2_K_QS + 32 * half)
            for c in range(4):
                store_vec(q, qb + 128 * half + 32 * c, bits_of(v, 2 * c, CRUMB))
        for g in range(SUMS):
            s = _byte(w, o + bl.Q2_K_SCALES + g)
            sc[gb + g], e[gb + g] = s & NIBBLE, -(s >> 4)
        d[bo + b], f[bo + b] = load_f16(w, o + bl.Q2_K_D), load_f16(w, o + bl.Q2_K_DMIN)


@njit(cache=True, fastmath=False, inline="always")
def unpack_q3_k(w, wo, nsb, q, qo, sc, e, go, d, f, bo):
    """q is an int8 array: the quants minus 4, as the row dots' `dot4_offset` takes them (the same integers)."""
    for b in range(nsb):
        o, qb, gb = wo + b * bl.Q3_K_SIZE, qo + b * QK, go + b * SUMS
        hmask = load_u8x32(w, o + bl.Q3_K_HMASK)
        for g in range(8):
            crumbs = bits_of(load_u8x32(w, o + bl.Q3_K_QS + 32 * (g // 4)), 2 * (g % 4), CRUMB)
            store_vec(q, qb + 32 * g, offset_by(or_shifted(crumbs, bits_of(hmask, g, BIT), 2), Q3_OFFSET))
        for g in range(SUMS):
            sc[gb + g], e[gb + g] = q3_scale(w, o + bl.Q3_K_SCALES, g), 0
        d[bo + b] = f[bo + b] = load_f16(w, o + bl.Q3_K_D)


@njit(cache=True, fastmath=False, inline="always")
def unpack_q4_k(w, wo, nsb, q, qo, sc, e, go, d, f, bo):
    for b in range(nsb):
        o, qb, gb = wo + b * bl.Q4_K_SIZE, qo + b * QK, go + b * SUMS
        for c in range(4):
            v = load_u8x32(w, o + bl.Q4_K_QS + 32 * c)
            store_vec(q, qb + 64 * c, bits_of(v, 0, NIBBLE))
            store_vec(q, qb + 64 * c + 32, bits_of(v, 4, NIBBLE))
        for j in range(8):
            s, m = scale_min_k4(w, o + bl.Q4_K_SCALES, j)
            sc[gb + 2 * j] = sc[gb + 2 * j + 1] = s
            e[gb + 2 * j] = e[gb + 2 * j + 1] = -m
        d[bo + b], f[bo + b] = load_f16(w, o + bl.Q4_K_D), load_f16(w, o + bl.Q4_K_DMIN)


@njit(cache=True, fastmath=False, inline="always")
def unpack_q5_k(w, wo, nsb, q, qo, sc, e, go, d, f, bo):
    for b in range(nsb):
        o, qb, gb = wo + b * bl.Q5_K_SIZE, qo + b * QK, go + b * SUMS
        qh = load_u8x32(w, o + bl.Q5_K_QH)
        for c in range(4):
            v = load_u8x32(w, o + bl.Q5_K_QS + 32 * c)
            store_vec(q, qb + 64 * c, or_shifted(bits_of(v, 0, NIBBLE), bits_of(qh, 2 * c, BIT), 4))
            store_vec(q, qb + 64 * c + 32, or_shifted(bits_of(v, 4, NIBBLE), bits_of(qh, 2 * c + 1, BIT), 4))
        for j in range(8):
            s, m = scale_min_k4(w, o + bl.Q5_K_SCALES, j)
            sc[gb + 2 * j] = sc[gb + 2 * j + 1] = s
            e[gb + 2 * j] = e[gb + 2 * j + 1] = -m
        d[bo + b], f[bo + b] = load_f16(w, o + bl.Q5_K_D), load_f16(w, o + bl.Q5_K_DMIN)


@njit(cache=True, fastmath=False, inline="always")
def unpack_q6_k(w, wo, nsb, q, qo, sc, e, go, d, f, bo):
    """q is an int8 array: the quants minus 32, as the row dots' `dot4_offset` takes them (the same integers)."""
    for b in range(nsb):
        o, qb, gb = wo + b * bl.Q6_K_SIZE, qo + b * QK, go + b * SUMS
        for half in range(2):
            high = load_u8x32(w, o + bl.Q6_K_QH + 32 * half)
            for k in range(4):
                low = load_u8x32(w, o + bl.Q6_K_QL + 64 * half + 32 * (k % 2))
                u = or_shifted(bits_of(low, 4 * (k // 2), NIBBLE), bits_of(high, 2 * k, CRUMB), 4)
                store_vec(q, qb + 128 * half + 32 * k, offset_by(u, Q6_OFFSET))
        for g in range(SUMS):
            sc[gb + g], e[gb + g] = _i8(w, o + bl.Q6_K_SCALES + g), 0
        d[bo + b] = f[bo + b] = load_f16(w, o + bl.Q6_K_D)


@njit(cache=True, fastmath=False, inline="always")
def unpack_iq4_xs(w, wo, nsb, q, qo, sc, e, go, d, f, bo):
    """q is an int8 array."""
    for b in range(nsb):
        o, qb, gb = wo + b * bl.IQ4_XS_SIZE, qo + b * QK, go + b * SUMS
        high = load_u16(w, o + bl.IQ4_XS_SCALES_H)
        for ib in range(8):
            store_vec(q, qb + 32 * ib, iq4_levels(nibbles(load_u8x16(w, o + bl.IQ4_XS_QS + 16 * ib))))
            low = (_byte(w, o + bl.IQ4_XS_SCALES_L + ib // 2) >> (4 * (ib % 2))) & 0xF
            sc[gb + 2 * ib] = sc[gb + 2 * ib + 1] = (low | (((high >> (2 * ib)) & 3) << 4)) - SCALE_OFFSET
            e[gb + 2 * ib] = e[gb + 2 * ib + 1] = 0
        d[bo + b], f[bo + b] = load_f16(w, o + bl.IQ4_XS_D), np.float32(0.0)


# -- matmuls: x quantised once; one token: row dots on the packed bytes; more: unpacked panels and tiles --------


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q2_k(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum, pq, pd, pf, psc, pe):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nsb, ng = n_in // QK, n_in // QK8_K_SUM
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_q2_k(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nsb, i * ng, nsb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            q, sc, e, d, f = pq[c], psc[c], pe[c], pd[c], pf[c]
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    unpack_q2_k(w, (p * PANEL + k) * row_bytes, nsb, q, k * n_in, sc, e, k * ng, d, f, k * nsb)
                panel_matmul_k(q, sc, e, d, f, rows, p * PANEL, n_in, xq, kd, bsum, n, out, n_out)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q3_k(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum, pq, pd, pf, psc, pe):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nsb, ng = n_in // QK, n_in // QK8_K_SUM
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_q3_k(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nsb, i * ng, nsb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            q, sc, e, d, f = pq[c].view(np.int8), psc[c], pe[c], pd[c], pf[c]
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    unpack_q3_k(w, (p * PANEL + k) * row_bytes, nsb, q, k * n_in, sc, e, k * ng, d, f, k * nsb)
                panel_matmul_k(q, sc, e, d, f, rows, p * PANEL, n_in, xq, kd, bsum, n, out, n_out)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q4_k(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum, pq, pd, pf, psc, pe):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nsb, ng = n_in // QK, n_in // QK8_K_SUM
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_q4_k(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nsb, i * ng, nsb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            q, sc, e, d, f = pq[c], psc[c], pe[c], pd[c], pf[c]
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    unpack_q4_k(w, (p * PANEL + k) * row_bytes, nsb, q, k * n_in, sc, e, k * ng, d, f, k * nsb)
                panel_matmul_k(q, sc, e, d, f, rows, p * PANEL, n_in, xq, kd, bsum, n, out, n_out)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q5_k(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum, pq, pd, pf, psc, pe):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nsb, ng = n_in // QK, n_in // QK8_K_SUM
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_q5_k(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nsb, i * ng, nsb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            q, sc, e, d, f = pq[c], psc[c], pe[c], pd[c], pf[c]
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    unpack_q5_k(w, (p * PANEL + k) * row_bytes, nsb, q, k * n_in, sc, e, k * ng, d, f, k * nsb)
                panel_matmul_k(q, sc, e, d, f, rows, p * PANEL, n_in, xq, kd, bsum, n, out, n_out)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q6_k(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum, pq, pd, pf, psc, pe):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nsb, ng = n_in // QK, n_in // QK8_K_SUM
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_q6_k(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nsb, i * ng, nsb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            q, sc, e, d, f = pq[c].view(np.int8), psc[c], pe[c], pd[c], pf[c]
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    unpack_q6_k(w, (p * PANEL + k) * row_bytes, nsb, q, k * n_in, sc, e, k * ng, d, f, k * nsb)
                panel_matmul_k(q, sc, e, d, f, rows, p * PANEL, n_in, xq, kd, bsum, n, out, n_out)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_iq4_xs(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum, pq, pd, pf, psc, pe):
    quantize_q8_k(x, n, n_in, xq, kd, bsum)
    nsb, ng = n_in // QK, n_in // QK8_K_SUM
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_iq4_xs(w, r * row_bytes, xq, i * n_in, kd, bsum, i * nsb, i * ng, nsb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            q, sc, e, d, f = pq[c].view(np.int8), psc[c], pe[c], pd[c], pf[c]
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    unpack_iq4_xs(w, (p * PANEL + k) * row_bytes, nsb, q, k * n_in, sc, e, k * ng, d, f, k * nsb)
                panel_matmul_k(q, sc, e, d, f, rows, p * PANEL, n_in, xq, kd, bsum, n, out, n_out)
