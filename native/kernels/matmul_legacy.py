"""Matmuls of the 32-element block types against Q8_0 / Q8_1 activations: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL.

W4A8 as in llama.cpp: per block, an integer dot of the weight quants with the activation's int8 quants (`dot4`,
eight int32 partial sums), times d_w·d_x added to a float32 vector accumulator with one rounding (an FMA), the
lanes summed at the end: the float operations of ggml's AVX2 dot products, in the same order, so results match
llama.cpp's bit for bit where the integer sums do. The constant parts of a block's values:
- Q4_0 / Q5_0: value d·(q - 8) (or q - 16): the integer dot of q - 8 with x, exactly (`dot4_offset`);
- Q4_1 / Q5_1: value d·q + m: Σ = d·dx·(Σq·x) + m·s, s = Q8_1's fp16(dx·Σx) (what ggml multiplies m by);
- Q8_0 / IQ4_NL: signed quants (IQ4_NL's from its 16-level table).

Every matmul has one signature, (out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, pq, pd, pe):
out (n, n_out) = x (n, n_in) · wᵀ, w the weight's bytes, n_out rows of row_bytes. x is quantised into the
scratch xq (n, n_in) int8, xd / xs (n, n_in / 32) first. Below TILE_TOKENS tokens each row is dotted
with each token from the packed bytes (rows shared among numba's threads); from TILE_TOKENS up, each thread
unpacks panels of rows into its scratch pq (threads, PANEL·n_in), pd, pe (threads, PANEL·n_in / 32) with the
type's `unpack_*` and runs the generic tiles of `panels`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from . import blocks as bl
from .activations import QK8_0, quantize_q8
from .panels import PANEL, TILE_TOKENS, panel_matmul, scale_slot
from .quantops import dot4, dot4_offset, dot4_signed, iq4_levels, nibbles, offset_by, or_shifted, store_vec, word_bits
from .simd import fma, fma_i32, fsum, fzero, load_f16, load_i8x32, load_u8x16

QK = QK8_0
Q4_OFFSET = 8  # Q4_0 stores q + 8
Q5_OFFSET = 16  # Q5_0 stores q + 16
HIGH_BIT = 4  # Q5: bit 4 of each quant comes from qh
ZERO = np.float32(0.0)


# -- one weight row · one activation row: w from byte wo, quants xq from xo, block scales from so -------------


@njit(cache=True, fastmath=False, inline="always")
def dot_q4_0(w, wo, xq, xo, xd, xs, so, nb):
    acc = fzero()
    for b in range(nb):
        o = wo + b * bl.Q4_0_SIZE
        p = dot4_offset(nibbles(load_u8x16(w, o + bl.Q4_0_QS)), load_i8x32(xq, xo + b * QK), Q4_OFFSET)
        acc = fma_i32(acc, p, load_f16(w, o + bl.Q4_0_D) * xd[so + b])
    return fsum(acc)


@njit(cache=True, fastmath=False, inline="always")
def dot_q4_1(w, wo, xq, xo, xd, xs, so, nb):
    acc = fzero()
    mins = np.float32(0.0)
    for b in range(nb):
        o = wo + b * bl.Q4_1_SIZE
        s = load_f16(w, o + bl.Q4_1_D) * xd[so + b]
        acc = fma_i32(acc, dot4(nibbles(load_u8x16(w, o + bl.Q4_1_QS)), load_i8x32(xq, xo + b * QK)), s)
        mins = fma(load_f16(w, o + bl.Q4_1_M), xs[so + b], mins)
    return fsum(acc) + mins


@njit(cache=True, fastmath=False, inline="always")
def _q5_quants(w, qs, qh):
    return or_shifted(nibbles(load_u8x16(w, qs)), word_bits(w, qh), HIGH_BIT)


@njit(cache=True, fastmath=False, inline="always")
def dot_q5_0(w, wo, xq, xo, xd, xs, so, nb):
    acc = fzero()
    for b in range(nb):
        o = wo + b * bl.Q5_0_SIZE
        p = dot4_offset(_q5_quants(w, o + bl.Q5_0_QS, o + bl.Q5_0_QH), load_i8x32(xq, xo + b * QK), Q5_OFFSET)
        acc = fma_i32(acc, p, load_f16(w, o + bl.Q5_0_D) * xd[so + b])
    return fsum(acc)


@njit(cache=True, fastmath=False, inline="always")
def dot_q5_1(w, wo, xq, xo, xd, xs, so, nb):
    acc = fzero()
    mins = np.float32(0.0)
    for b in range(nb):
        o = wo + b * bl.Q5_1_SIZE
        s = load_f16(w, o + bl.Q5_1_D) * xd[so + b]
        acc = fma_i32(acc, dot4(_q5_quants(w, o + bl.Q5_1_QS, o + bl.Q5_1_QH), load_i8x32(xq, xo + b * QK)), s)
        mins = fma(load_f16(w, o + bl.Q5_1_M), xs[so + b], mins)
    return fsum(acc) + mins


@njit(cache=True, fastmath=False, inline="always")
def dot_q8_0(w, wo, xq, xo, xd, xs, so, nb):
    acc = fzero()
    for b in range(nb):
        o = wo + b * bl.Q8_0_SIZE
        s = load_f16(w, o + bl.Q8_0_D) * xd[so + b]
        acc = fma_i32(acc, dot4_signed(load_i8x32(w, o + bl.Q8_0_QS), load_i8x32(xq, xo + b * QK)), s)
    return fsum(acc)


@njit(cache=True, fastmath=False, inline="always")
def dot_iq4_nl(w, wo, xq, xo, xd, xs, so, nb):
    acc = fzero()
    for b in range(nb):
        o = wo + b * bl.IQ4_NL_SIZE
        s = load_f16(w, o + bl.IQ4_NL_D) * xd[so + b]
        levels = iq4_levels(nibbles(load_u8x16(w, o + bl.IQ4_NL_QS)))
        acc = fma_i32(acc, dot4_signed(levels, load_i8x32(xq, xo + b * QK)), s)
    return fsum(acc)


# -- unpacking one row for the panels: quants (one per byte) from q[qo], block b's scale and constant term at
# d[do + ds·b], e[do + ds·b] (ds = 8 for the rows that `panels` interleaves)


@njit(cache=True, fastmath=False, inline="always")
def unpack_q4_0(w, wo, nb, q, qo, d, e, do, ds):
    """q is an int8 array: the quants minus 8."""
    for b in range(nb):
        o = wo + b * bl.Q4_0_SIZE
        store_vec(q, qo + QK * b, offset_by(nibbles(load_u8x16(w, o + bl.Q4_0_QS)), Q4_OFFSET))
        d[do + ds * b] = load_f16(w, o + bl.Q4_0_D)
        e[do + ds * b] = ZERO


@njit(cache=True, fastmath=False, inline="always")
def unpack_q4_1(w, wo, nb, q, qo, d, e, do, ds):
    for b in range(nb):
        o = wo + b * bl.Q4_1_SIZE
        store_vec(q, qo + QK * b, nibbles(load_u8x16(w, o + bl.Q4_1_QS)))
        d[do + ds * b] = load_f16(w, o + bl.Q4_1_D)
        e[do + ds * b] = load_f16(w, o + bl.Q4_1_M)


@njit(cache=True, fastmath=False, inline="always")
def unpack_q5_0(w, wo, nb, q, qo, d, e, do, ds):
    """q is an int8 array: the quants minus 16."""
    for b in range(nb):
        o = wo + b * bl.Q5_0_SIZE
        store_vec(q, qo + QK * b, offset_by(_q5_quants(w, o + bl.Q5_0_QS, o + bl.Q5_0_QH), Q5_OFFSET))
        d[do + ds * b] = load_f16(w, o + bl.Q5_0_D)
        e[do + ds * b] = ZERO


@njit(cache=True, fastmath=False, inline="always")
def unpack_q5_1(w, wo, nb, q, qo, d, e, do, ds):
    for b in range(nb):
        o = wo + b * bl.Q5_1_SIZE
        store_vec(q, qo + QK * b, _q5_quants(w, o + bl.Q5_1_QS, o + bl.Q5_1_QH))
        d[do + ds * b] = load_f16(w, o + bl.Q5_1_D)
        e[do + ds * b] = load_f16(w, o + bl.Q5_1_M)


@njit(cache=True, fastmath=False, inline="always")
def unpack_q8_0(w, wo, nb, q, qo, d, e, do, ds):
    """q is an int8 array."""
    for b in range(nb):
        o = wo + b * bl.Q8_0_SIZE
        store_vec(q, qo + QK * b, load_i8x32(w, o + bl.Q8_0_QS))
        d[do + ds * b] = load_f16(w, o + bl.Q8_0_D)
        e[do + ds * b] = ZERO


@njit(cache=True, fastmath=False, inline="always")
def unpack_iq4_nl(w, wo, nb, q, qo, d, e, do, ds):
    """q is an int8 array."""
    for b in range(nb):
        o = wo + b * bl.IQ4_NL_SIZE
        store_vec(q, qo + QK * b, iq4_levels(nibbles(load_u8x16(w, o + bl.IQ4_NL_QS))))
        d[do + ds * b] = load_f16(w, o + bl.IQ4_NL_D)
        e[do + ds * b] = ZERO


# -- matmuls: x quantised once; one token: row dots on the packed bytes; more: unpacked panels and tiles --------


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q4_0(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, pq, pd, pe):
    quantize_q8(x, n, n_in, xq, xd, xs)
    nb = n_in // QK
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_q4_0(w, r * row_bytes, xq, i * n_in, xd, xs, i * nb, nb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            qs = pq[c].view(np.int8)
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    do, ds = scale_slot(k, rows, nb)
                    unpack_q4_0(w, (p * PANEL + k) * row_bytes, nb, qs, k * n_in, pd[c], pe[c], do, ds)
                panel_matmul(qs, pd[c], pe[c], rows, p * PANEL, n_in, xq, xd, xs, n, out, n_out)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q4_1(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, pq, pd, pe):
    quantize_q8(x, n, n_in, xq, xd, xs)
    nb = n_in // QK
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_q4_1(w, r * row_bytes, xq, i * n_in, xd, xs, i * nb, nb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    do, ds = scale_slot(k, rows, nb)
                    unpack_q4_1(w, (p * PANEL + k) * row_bytes, nb, pq[c], k * n_in, pd[c], pe[c], do, ds)
                panel_matmul(pq[c], pd[c], pe[c], rows, p * PANEL, n_in, xq, xd, xs, n, out, n_out)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q5_0(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, pq, pd, pe):
    quantize_q8(x, n, n_in, xq, xd, xs)
    nb = n_in // QK
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_q5_0(w, r * row_bytes, xq, i * n_in, xd, xs, i * nb, nb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            qs = pq[c].view(np.int8)
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    do, ds = scale_slot(k, rows, nb)
                    unpack_q5_0(w, (p * PANEL + k) * row_bytes, nb, qs, k * n_in, pd[c], pe[c], do, ds)
                panel_matmul(qs, pd[c], pe[c], rows, p * PANEL, n_in, xq, xd, xs, n, out, n_out)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q5_1(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, pq, pd, pe):
    quantize_q8(x, n, n_in, xq, xd, xs)
    nb = n_in // QK
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_q5_1(w, r * row_bytes, xq, i * n_in, xd, xs, i * nb, nb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    do, ds = scale_slot(k, rows, nb)
                    unpack_q5_1(w, (p * PANEL + k) * row_bytes, nb, pq[c], k * n_in, pd[c], pe[c], do, ds)
                panel_matmul(pq[c], pd[c], pe[c], rows, p * PANEL, n_in, xq, xd, xs, n, out, n_out)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q8_0(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, pq, pd, pe):
    quantize_q8(x, n, n_in, xq, xd, xs)
    nb = n_in // QK
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_q8_0(w, r * row_bytes, xq, i * n_in, xd, xs, i * nb, nb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            qs = pq[c].view(np.int8)
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    do, ds = scale_slot(k, rows, nb)
                    unpack_q8_0(w, (p * PANEL + k) * row_bytes, nb, qs, k * n_in, pd[c], pe[c], do, ds)
                panel_matmul(qs, pd[c], pe[c], rows, p * PANEL, n_in, xq, xd, xs, n, out, n_out)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_iq4_nl(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, pq, pd, pe):
    quantize_q8(x, n, n_in, xq, xd, xs)
    nb = n_in // QK
    if n < TILE_TOKENS:
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = dot_iq4_nl(w, r * row_bytes, xq, i * n_in, xd, xs, i * nb, nb)
    else:
        n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
        for c in prange(n_chunks):
            qs = pq[c].view(np.int8)
            for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                rows = min(PANEL, n_out - p * PANEL)
                for k in range(rows):
                    do, ds = scale_slot(k, rows, nb)
                    unpack_iq4_nl(w, (p * PANEL + k) * row_bytes, nb, qs, k * n_in, pd[c], pe[c], do, ds)
                panel_matmul(qs, pd[c], pe[c], rows, p * PANEL, n_in, xq, xd, xs, n, out, n_out)
