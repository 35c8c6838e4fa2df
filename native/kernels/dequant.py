"""Rows of a weight dequantised to float32 (get_rows: token embeddings; small vectors at bind time).

Bit for bit what `llamay.quants` decodes: each value is an exact product of the block's scales and quant in
float32, with at most one rounding (the `+ m` / `- m` of the types with mins, or the final product of Q6_K and
IQ4_XS, whose exact value needs 25 bits). Signature: (out, w, row_bytes, ids, n, n_in): out (n, n_in) = rows
ids[0..n) of w.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import blocks as bl
from .matmul_kquants import _byte, _i8, q3_scale, scale_min_k4
from .quantops import IQ4_LEVELS
from .simd import load_bf16, load_f16, load_f32, load_u16, load_u32

F32_BYTES, HALF_BYTES = 4, 2
QK, QK_K = 32, 256
LEVELS = np.array(IQ4_LEVELS, dtype=np.float32)


@njit(cache=True, fastmath=False)
def get_rows_f32(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        base = ids[i] * row_bytes
        for j in range(n_in):
            out[i * n_in + j] = load_f32(w, base + j * F32_BYTES)


@njit(cache=True, fastmath=False)
def get_rows_f16(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        base = ids[i] * row_bytes
        for j in range(n_in):
            out[i * n_in + j] = load_f16(w, base + j * HALF_BYTES)


@njit(cache=True, fastmath=False)
def get_rows_bf16(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        base = ids[i] * row_bytes
        for j in range(n_in):
            out[i * n_in + j] = load_bf16(w, base + j * HALF_BYTES)


@njit(cache=True, fastmath=False)
def _nibble(w, qs, j):
    """Quant j (0..31) of a 16-byte nibble array: low nibbles first, then high nibbles."""
    return (_byte(w, qs + j % 16) >> (4 * (j // 16))) & 0xF


@njit(cache=True, fastmath=False)
def get_rows_q4_0(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK):
            o = ids[i] * row_bytes + b * bl.Q4_0_SIZE
            d = load_f16(w, o + bl.Q4_0_D)
            for j in range(QK):
                q = _nibble(w, o + bl.Q4_0_QS, j)
                out[i * n_in + b * QK + j] = d * np.float32(q - 8)


@njit(cache=True, fastmath=False)
def get_rows_q4_1(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK):
            o = ids[i] * row_bytes + b * bl.Q4_1_SIZE
            d, m = load_f16(w, o + bl.Q4_1_D), load_f16(w, o + bl.Q4_1_M)
            for j in range(QK):
                q = _nibble(w, o + bl.Q4_1_QS, j)
                out[i * n_in + b * QK + j] = d * np.float32(q) + m


@njit(cache=True, fastmath=False)
def get_rows_q5_0(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK):
            o = ids[i] * row_bytes + b * bl.Q5_0_SIZE
            d, qh = load_f16(w, o + bl.Q5_0_D), load_u32(w, o + bl.Q5_0_QH)
            for j in range(QK):
                q = _nibble(w, o + bl.Q5_0_QS, j) | (((qh >> j) & 1) << 4)
                out[i * n_in + b * QK + j] = d * np.float32(q - 16)


@njit(cache=True, fastmath=False)
def get_rows_q5_1(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK):
            o = ids[i] * row_bytes + b * bl.Q5_1_SIZE
            d, m = load_f16(w, o + bl.Q5_1_D), load_f16(w, o + bl.Q5_1_M)
            qh = load_u32(w, o + bl.Q5_1_QH)
            for j in range(QK):
                q = _nibble(w, o + bl.Q5_1_QS, j) | (((qh >> j) & 1) << 4)
                out[i * n_in + b * QK + j] = d * np.float32(q) + m


@njit(cache=True, fastmath=False)
def get_rows_q8_0(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK):
            o = ids[i] * row_bytes + b * bl.Q8_0_SIZE
            d = load_f16(w, o + bl.Q8_0_D)
            for j in range(QK):
                out[i * n_in + b * QK + j] = d * np.float32(_i8(w, o + bl.Q8_0_QS + j))


@njit(cache=True, fastmath=False)
def get_rows_iq4_nl(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK):
            o = ids[i] * row_bytes + b * bl.IQ4_NL_SIZE
            d = load_f16(w, o + bl.IQ4_NL_D)
            for j in range(QK):
                out[i * n_in + b * QK + j] = d * LEVELS[_nibble(w, o + bl.IQ4_NL_QS, j)]


@njit(cache=True, fastmath=False)
def get_rows_q2_k(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK_K):
            o = ids[i] * row_bytes + b * bl.Q2_K_SIZE
            d, dmin = load_f16(w, o + bl.Q2_K_D), load_f16(w, o + bl.Q2_K_DMIN)
            for s in range(16):  # sub-block s: 16 quants, crumb (s % 8) // 2 of qs[32 (s // 8) + 16 (s % 2):]
                sc = _byte(w, o + bl.Q2_K_SCALES + s)
                dl, ml = d * np.float32(sc & 0xF), dmin * np.float32(sc >> 4)
                qs = o + bl.Q2_K_QS + 32 * (s // 8) + 16 * (s % 2)
                for j in range(16):
                    q = (_byte(w, qs + j) >> (2 * ((s % 8) // 2))) & 3
                    out[i * n_in + b * QK_K + 16 * s + j] = dl * np.float32(q) - ml


@njit(cache=True, fastmath=False)
def get_rows_q3_k(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK_K):
            o = ids[i] * row_bytes + b * bl.Q3_K_SIZE
            d = load_f16(w, o + bl.Q3_K_D)
            for e in range(QK_K):  # group e // 32: crumb (e // 32) % 4 of qs[32 (e // 128):], hmask bit e // 32
                g, l = e // 32, e % 32
                crumb = (_byte(w, o + bl.Q3_K_QS + 32 * (g // 4) + l) >> (2 * (g % 4))) & 3
                high = (_byte(w, o + bl.Q3_K_HMASK + l) >> g) & 1
                dl = d * np.float32(q3_scale(w, o + bl.Q3_K_SCALES, e // 16))
                out[i * n_in + b * QK_K + e] = dl * np.float32((crumb | (high << 2)) - 4)


@njit(cache=True, fastmath=False)
def get_rows_q4_k(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK_K):
            o = ids[i] * row_bytes + b * bl.Q4_K_SIZE
            d, dmin = load_f16(w, o + bl.Q4_K_D), load_f16(w, o + bl.Q4_K_DMIN)
            for s in range(8):  # sub-block s: nibble s % 2 of qs[32 (s // 2):]
                sc, mn = scale_min_k4(w, o + bl.Q4_K_SCALES, s)
                dl, ml = d * np.float32(sc), dmin * np.float32(mn)
                for j in range(32):
                    q = (_byte(w, o + bl.Q4_K_QS + 32 * (s // 2) + j) >> (4 * (s % 2))) & 0xF
                    out[i * n_in + b * QK_K + 32 * s + j] = dl * np.float32(q) - ml


@njit(cache=True, fastmath=False)
def get_rows_q5_k(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK_K):
            o = ids[i] * row_bytes + b * bl.Q5_K_SIZE
            d, dmin = load_f16(w, o + bl.Q5_K_D), load_f16(w, o + bl.Q5_K_DMIN)
            for s in range(8):  # as Q4_K, bit 4 from bit s of qh[j]
                sc, mn = scale_min_k4(w, o + bl.Q5_K_SCALES, s)
                dl, ml = d * np.float32(sc), dmin * np.float32(mn)
                for j in range(32):
                    q = (_byte(w, o + bl.Q5_K_QS + 32 * (s // 2) + j) >> (4 * (s % 2))) & 0xF
                    q |= ((_byte(w, o + bl.Q5_K_QH + j) >> s) & 1) << 4
                    out[i * n_in + b * QK_K + 32 * s + j] = dl * np.float32(q) - ml


@njit(cache=True, fastmath=False)
def get_rows_q6_k(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK_K):
            o = ids[i] * row_bytes + b * bl.Q6_K_SIZE
            d = load_f16(w, o + bl.Q6_K_D)
            for e in range(QK_K):  # half e // 128; group k: nibble k // 2 of ql[64 half + 32 (k % 2):], crumb k
                half, k, l = e // 128, (e % 128) // 32, e % 32
                low = (_byte(w, o + bl.Q6_K_QL + 64 * half + 32 * (k % 2) + l) >> (4 * (k // 2))) & 0xF
                high = (_byte(w, o + bl.Q6_K_QH + 32 * half + l) >> (2 * k)) & 3
                dl = d * np.float32(_i8(w, o + bl.Q6_K_SCALES + e // 16))
                out[i * n_in + b * QK_K + e] = dl * np.float32((low | (high << 4)) - 32)


@njit(cache=True, fastmath=False)
def get_rows_iq4_xs(out, w, row_bytes, ids, n, n_in):
    for i in range(n):
        for b in range(n_in // QK_K):
            o = ids[i] * row_bytes + b * bl.IQ4_XS_SIZE
            d, high = load_f16(w, o + bl.IQ4_XS_D), load_u16(w, o + bl.IQ4_XS_SCALES_H)
            for s in range(8):
                low = (_byte(w, o + bl.IQ4_XS_SCALES_L + s // 2) >> (4 * (s % 2))) & 0xF
                dl = d * np.float32((low | (((high >> (2 * s)) & 3) << 4)) - 32)
                for j in range(32):
                    q = _nibble(w, o + bl.IQ4_XS_QS + 16 * s, j)
                    out[i * n_in + b * QK_K + 32 * s + j] = dl * LEVELS[q]
