"""One driver per family of kernel, made for one weight type from its entry of the traits table (`traits`):

    matmul_q8(tr)     the 32-element block types against Q8_0 / Q8_1 activations (matmul_legacy)
    matmul_q8k(tr)    the 256-element super-block types against Q8_K activations (matmul_kquants)
    matmul_float(tr)  F32, F16, BF16 (matmul_float)
    get_rows_*(tr)    rows of a weight dequantised to float32, for each of the three

A matmul computes out (n, n_out) = x (n, n_in) · wᵀ, w the weight's bytes (n_out rows of row_bytes). The block
types quantise x first (`activations`), into scratch the backend keeps: xq (n, n_in) int8 and the scales (Q8:
xd, xs (n, n_in / 32); Q8K: kd (n, n_in / 256), bsum (n, n_in / 16)). Below TILE_TOKENS tokens each weight row
is dotted with each token from the packed bytes (rows shared among numba's threads); from TILE_TOKENS up, each
thread unpacks panels of PANEL rows (`legacy_unpack` / `k_unpack`, over the type's blocks) into its
scratch (Q8: pq (threads, PANEL·n_in) quants, pd / pe the block scales and constant terms; Q8K: pq, psc / pe
(threads, PANEL·n_in / 16) group ints, pd / pf (threads, PANEL·n_in / 256) floats) and runs the generic tiles of
`panels` (see there for the layouts).

get_rows: out (n, n_in) = rows ids[0..n) of w, bit for bit what `llamay.quants` decodes. A block type's row is
unpacked into the first row of the panel scratch, then each value is d·q, d·q + m (Q4_1, Q5_1) or (d·sc)·q -
dmin·min (Q2_K, Q4_K, Q5_K): the reference's float32 operations, in its order.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .activations import QK8_0, QK8_K, QK8_K_SUM, quantize_q8, quantize_q8_k
from .matmul_float import float_dot
from .matmul_kquants import k_dot, k_unpack
from .matmul_legacy import legacy_dot, legacy_unpack
from .panels import PANEL, TILE_TOKENS, panel_matmul, panel_matmul_k, scale_slot
from .traits import FLOAT, Q8, Q8K, Traits

QK, QK_K, GROUP = QK8_0, QK8_K, QK8_K_SUM


def matmul_q8(tr: Traits):
    @njit(cache=True, fastmath=False, parallel=True)
    def matmul(out, w, row_bytes, n_out, x, n, n_in, xq, xd, xs, pq, pd, pe):
        quantize_q8(x, n, n_in, xq, xd, xs)
        nb = n_in // QK
        if n < TILE_TOKENS:
            for r in prange(n_out):
                for i in range(n):
                    out[i * n_out + r] = legacy_dot(tr, w, r * row_bytes, xq, i * n_in, xd, xs, i * nb, nb)
        else:
            n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
            for c in prange(n_chunks):
                q = tr.quants(pq[c])
                for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                    rows = min(PANEL, n_out - p * PANEL)
                    for k in range(rows):
                        do, ds = scale_slot(k, rows, nb)
                        legacy_unpack(tr, w, (p * PANEL + k) * row_bytes, nb, q, k * n_in, pd[c], pe[c], do, ds)
                    panel_matmul(q, pd[c], pe[c], rows, p * PANEL, n_in, xq, xd, xs, n, out, n_out)

    return matmul


def matmul_q8k(tr: Traits):
    @njit(cache=True, fastmath=False, parallel=True)
    def matmul(out, w, row_bytes, n_out, x, n, n_in, xq, kd, bsum, pq, pd, pf, psc, pe):
        quantize_q8_k(x, n, n_in, xq, kd, bsum)
        nsb, ng = n_in // QK_K, n_in // GROUP
        if n < TILE_TOKENS:
            for r in prange(n_out):
                for i in range(n):
                    out[i * n_out + r] = k_dot(tr, w, r * row_bytes, xq, i * n_in, kd, bsum, i * nsb, i * ng, nsb)
        else:
            n_chunks, n_panels = pq.shape[0], (n_out + PANEL - 1) // PANEL
            for c in prange(n_chunks):
                q, sc, e, d, f = tr.quants(pq[c]), psc[c], pe[c], pd[c], pf[c]
                for p in range(c * n_panels // n_chunks, (c + 1) * n_panels // n_chunks):
                    rows = min(PANEL, n_out - p * PANEL)
                    for k in range(rows):
                        k_unpack(tr, w, (p * PANEL + k) * row_bytes, nsb, q, k * n_in, sc, e, k * ng, d, f, k * nsb)
                    panel_matmul_k(q, sc, e, d, f, rows, p * PANEL, n_in, xq, kd, bsum, n, out, n_out)

    return matmul


def matmul_float(tr: Traits):
    @njit(cache=True, fastmath=False, parallel=True)
    def matmul(out, w, row_bytes, n_out, x, n, n_in, xr):
        xs = tr.rounded(x, n * n_in, xr)  # x as the type's dot reads it (xr (n, n_in): rounded to fp16 / bf16)
        for r in prange(n_out):
            for i in range(n):
                out[i * n_out + r] = float_dot(tr, w, r * row_bytes, xs, i * n_in, n_in)

    return matmul


def get_rows_q8(tr: Traits):
    @njit(cache=True, fastmath=False)
    def get_rows(out, w, row_bytes, ids, n, n_in, pq, pd, pe):
        nb = n_in // QK
        q = tr.quants(pq)
        for i in range(n):
            legacy_unpack(tr, w, ids[i] * row_bytes, nb, q, 0, pd, pe, 0, 1)
            for b in range(nb):
                for j in range(QK * b, QK * (b + 1)):
                    v = pd[b] * np.float32(q[j])
                    out[i * n_in + j] = v + pe[b] if tr.has_min else v

    return get_rows


def get_rows_q8k(tr: Traits):
    @njit(cache=True, fastmath=False)
    def get_rows(out, w, row_bytes, ids, n, n_in, pq, pd, pf, psc, pe):
        nsb = n_in // QK_K
        q = tr.quants(pq)
        for i in range(n):
            k_unpack(tr, w, ids[i] * row_bytes, nsb, q, 0, psc, pe, 0, pd, pf, 0)
            for g in range(n_in // GROUP):  # group g: (d·sc)·q, minus dmin·min (e = -min) for the types with mins
                sb = g // (QK_K // GROUP)
                dl, ml = pd[sb] * np.float32(psc[g]), pf[sb] * np.float32(-pe[g])
                for j in range(GROUP * g, GROUP * (g + 1)):
                    v = dl * np.float32(q[j])
                    out[i * n_in + j] = v - ml if tr.has_min else v

    return get_rows


def get_rows_float(tr: Traits):
    @njit(cache=True, fastmath=False)
    def get_rows(out, w, row_bytes, ids, n, n_in):
        eb = tr.elem_bytes
        for i in range(n):
            base = ids[i] * row_bytes
            for j in range(n_in):
                out[i * n_in + j] = tr.load1(w, base + j * eb)

    return get_rows


# the drivers of each activation format (family)
MATMUL = {Q8: matmul_q8, Q8K: matmul_q8k, FLOAT: matmul_float}
GET_ROWS = {Q8: get_rows_q8, Q8K: get_rows_q8k, FLOAT: get_rows_float}
