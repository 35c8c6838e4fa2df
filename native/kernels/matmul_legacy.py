"""Matmuls of the 32-element block types against Q8_0 / Q8_1 activations: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL.

W4A8 as in llama.cpp: per block, an integer dot of the weight quants with the activation's int8 quants (`dot4`,
eight int32 partial sums), scaled by d_w·d_x into a float32 vector accumulator; the constant parts of a block's
values come out of the dot as scalars:
- Q4_0 / Q5_0: value d·(q - 8) (or q - 16): Σ = d·dx·(Σq·x) - 8·d·dx·Σx, with Σx = xsum of the activation block;
- Q4_1 / Q5_1: value d·q + m: Σ = d·dx·(Σq·x) + m·s, s = Q8_1's fp16(dx·Σx) (what ggml multiplies m by);
- Q8_0 / IQ4_NL: signed quants (IQ4_NL's from its 16-level table).

Every matmul has one signature, (out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, xsum):
out (n, n_out) = x (n, n_in) · wᵀ, w the weight's bytes, n_out rows of row_bytes; x is quantised into the
scratch xq (n, n_in) int8, xd / xs / xsum (n, n_in / 32) first, then rows are shared among numba's threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from . import blocks as bl
from .activations import QK8_0, quantize_q8
from .simd import (
    dot4,
    dot4_signed,
    fma_i32,
    fsum,
    fzero,
    iq4_levels,
    load_f16,
    load_i8x32,
    load_u8x16,
    load_u32,
    nibbles,
    or_shifted,
    word_bits,
)

QK = QK8_0
Q4_OFFSET = np.float32(8.0)  # Q4_0 stores q + 8
Q5_OFFSET = np.float32(16.0)  # Q5_0 stores q + 16
HIGH_BIT = 4  # Q5: bit 4 of each quant comes from qh


# -- one weight row · one activation row: w from byte wo, quants xq from xo, block scales from so -------------


@njit(cache=True, fastmath=False, inline="always")
def dot_q4_0(w, wo, xq, xo, xd, xs, xsum, so, nb):
    acc = fzero()
    offset = np.float32(0.0)
    for b in range(nb):
        o = wo + b * bl.Q4_0_SIZE
        s = load_f16(w, o + bl.Q4_0_D) * xd[so + b]
        acc = fma_i32(acc, dot4(nibbles(load_u8x16(w, o + bl.Q4_0_QS)), load_i8x32(xq, xo + b * QK)), s)
        offset += s * np.float32(xsum[so + b])
    return fsum(acc) - Q4_OFFSET * offset


@njit(cache=True, fastmath=False, inline="always")
def dot_q4_1(w, wo, xq, xo, xd, xs, xsum, so, nb):
    acc = fzero()
    mins = np.float32(0.0)
    for b in range(nb):
        o = wo + b * bl.Q4_1_SIZE
        s = load_f16(w, o + bl.Q4_1_D) * xd[so + b]
        acc = fma_i32(acc, dot4(nibbles(load_u8x16(w, o + bl.Q4_1_QS)), load_i8x32(xq, xo + b * QK)), s)
        mins += load_f16(w, o + bl.Q4_1_M) * xs[so + b]
    return fsum(acc) + mins


@njit(cache=True, fastmath=False, inline="always")
def _q5_quants(w, qs, qh):
    return or_shifted(nibbles(load_u8x16(w, qs)), word_bits(load_u32(w, qh)), HIGH_BIT)


@njit(cache=True, fastmath=False, inline="always")
def dot_q5_0(w, wo, xq, xo, xd, xs, xsum, so, nb):
    acc = fzero()
    offset = np.float32(0.0)
    for b in range(nb):
        o = wo + b * bl.Q5_0_SIZE
        s = load_f16(w, o + bl.Q5_0_D) * xd[so + b]
        acc = fma_i32(acc, dot4(_q5_quants(w, o + bl.Q5_0_QS, o + bl.Q5_0_QH), load_i8x32(xq, xo + b * QK)), s)
        offset += s * np.float32(xsum[so + b])
    return fsum(acc) - Q5_OFFSET * offset


@njit(cache=True, fastmath=False, inline="always")
def dot_q5_1(w, wo, xq, xo, xd, xs, xsum, so, nb):
    acc = fzero()
    mins = np.float32(0.0)
    for b in range(nb):
        o = wo + b * bl.Q5_1_SIZE
        s = load_f16(w, o + bl.Q5_1_D) * xd[so + b]
        acc = fma_i32(acc, dot4(_q5_quants(w, o + bl.Q5_1_QS, o + bl.Q5_1_QH), load_i8x32(xq, xo + b * QK)), s)
        mins += load_f16(w, o + bl.Q5_1_M) * xs[so + b]
    return fsum(acc) + mins


@njit(cache=True, fastmath=False, inline="always")
def dot_q8_0(w, wo, xq, xo, xd, xs, xsum, so, nb):
    acc = fzero()
    for b in range(nb):
        o = wo + b * bl.Q8_0_SIZE
        s = load_f16(w, o + bl.Q8_0_D) * xd[so + b]
        acc = fma_i32(acc, dot4_signed(load_i8x32(w, o + bl.Q8_0_QS), load_i8x32(xq, xo + b * QK)), s)
    return fsum(acc)


@njit(cache=True, fastmath=False, inline="always")
def dot_iq4_nl(w, wo, xq, xo, xd, xs, xsum, so, nb):
    acc = fzero()
    for b in range(nb):
        o = wo + b * bl.IQ4_NL_SIZE
        s = load_f16(w, o + bl.IQ4_NL_D) * xd[so + b]
        levels = iq4_levels(nibbles(load_u8x16(w, o + bl.IQ4_NL_QS)))
        acc = fma_i32(acc, dot4_signed(levels, load_i8x32(xq, xo + b * QK)), s)
    return fsum(acc)


# -- matmuls: quantise x once, then rows in parallel, every token of the batch per row -----------------------


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q4_0(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, xsum):
    quantize_q8(x, n, n_in, xq, xd, xs, xsum)
    nb = n_in // QK
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_q4_0(w, r * row_bytes, xq, i * n_in, xd, xs, xsum, i * nb, nb)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q4_1(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, xsum):
    quantize_q8(x, n, n_in, xq, xd, xs, xsum)
    nb = n_in // QK
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_q4_1(w, r * row_bytes, xq, i * n_in, xd, xs, xsum, i * nb, nb)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q5_0(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, xsum):
    quantize_q8(x, n, n_in, xq, xd, xs, xsum)
    nb = n_in // QK
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_q5_0(w, r * row_bytes, xq, i * n_in, xd, xs, xsum, i * nb, nb)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q5_1(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, xsum):
    quantize_q8(x, n, n_in, xq, xd, xs, xsum)
    nb = n_in // QK
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_q5_1(w, r * row_bytes, xq, i * n_in, xd, xs, xsum, i * nb, nb)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_q8_0(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, xsum):
    quantize_q8(x, n, n_in, xq, xd, xs, xsum)
    nb = n_in // QK
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_q8_0(w, r * row_bytes, xq, i * n_in, xd, xs, xsum, i * nb, nb)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_iq4_nl(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, xsum):
    quantize_q8(x, n, n_in, xq, xd, xs, xsum)
    nb = n_in // QK
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_iq4_nl(w, r * row_bytes, xq, i * n_in, xd, xs, xsum, i * nb, nb)
