"""Matmuls of float weights: F32 (against x as is), F16 and BF16 (against x rounded to fp16 / bf16 first, as
ggml converts the activation row to the weight's type; the products are then exact in float32).

Dots run in four f32x8 accumulators (32 elements a step), then 8 at a time, then one at a time for rows whose
length is not a multiple of 8. Signature: (out, w, row_bytes, n_out, x, n, n_in, xr), xr (n, n_in) scratch.
"""

from __future__ import annotations

from numba import njit, prange

from .activations import round_bf16_rows, round_f16_rows
from .simd import fmul_add, fsum, fzero, load_bf16, load_bf16x8, load_f16, load_f16x8, load_f32, load_f32x8

F32_BYTES, HALF_BYTES = 4, 2
LANES = 8


@njit(cache=True, fastmath=False, inline="always")
def dot_f32(w, wo, x, xo, n_in):
    a0, a1, a2, a3 = fzero(), fzero(), fzero(), fzero()
    j = 0
    while j + 4 * LANES <= n_in:
        o = wo + j * F32_BYTES
        a0 = fmul_add(a0, load_f32x8(w, o), load_f32x8(x, xo + j))
        a1 = fmul_add(a1, load_f32x8(w, o + 8 * F32_BYTES), load_f32x8(x, xo + j + 8))
        a2 = fmul_add(a2, load_f32x8(w, o + 16 * F32_BYTES), load_f32x8(x, xo + j + 16))
        a3 = fmul_add(a3, load_f32x8(w, o + 24 * F32_BYTES), load_f32x8(x, xo + j + 24))
        j += 4 * LANES
    while j + LANES <= n_in:
        a0 = fmul_add(a0, load_f32x8(w, wo + j * F32_BYTES), load_f32x8(x, xo + j))
        j += LANES
    s = fsum(a0) + fsum(a1) + fsum(a2) + fsum(a3)
    for k in range(j, n_in):
        s += load_f32(w, wo + k * F32_BYTES) * x[xo + k]
    return s


@njit(cache=True, fastmath=False, inline="always")
def dot_f16(w, wo, x, xo, n_in):
    a0, a1, a2, a3 = fzero(), fzero(), fzero(), fzero()
    j = 0
    while j + 4 * LANES <= n_in:
        o = wo + j * HALF_BYTES
        a0 = fmul_add(a0, load_f16x8(w, o), load_f32x8(x, xo + j))
        a1 = fmul_add(a1, load_f16x8(w, o + 8 * HALF_BYTES), load_f32x8(x, xo + j + 8))
        a2 = fmul_add(a2, load_f16x8(w, o + 16 * HALF_BYTES), load_f32x8(x, xo + j + 16))
        a3 = fmul_add(a3, load_f16x8(w, o + 24 * HALF_BYTES), load_f32x8(x, xo + j + 24))
        j += 4 * LANES
    while j + LANES <= n_in:
        a0 = fmul_add(a0, load_f16x8(w, wo + j * HALF_BYTES), load_f32x8(x, xo + j))
        j += LANES
    s = fsum(a0) + fsum(a1) + fsum(a2) + fsum(a3)
    for k in range(j, n_in):
        s += load_f16(w, wo + k * HALF_BYTES) * x[xo + k]
    return s


@njit(cache=True, fastmath=False, inline="always")
def dot_bf16(w, wo, x, xo, n_in):
    a0, a1, a2, a3 = fzero(), fzero(), fzero(), fzero()
    j = 0
    while j + 4 * LANES <= n_in:
        o = wo + j * HALF_BYTES
        a0 = fmul_add(a0, load_bf16x8(w, o), load_f32x8(x, xo + j))
        a1 = fmul_add(a1, load_bf16x8(w, o + 8 * HALF_BYTES), load_f32x8(x, xo + j + 8))
        a2 = fmul_add(a2, load_bf16x8(w, o + 16 * HALF_BYTES), load_f32x8(x, xo + j + 16))
        a3 = fmul_add(a3, load_bf16x8(w, o + 24 * HALF_BYTES), load_f32x8(x, xo + j + 24))
        j += 4 * LANES
    while j + LANES <= n_in:
        a0 = fmul_add(a0, load_bf16x8(w, wo + j * HALF_BYTES), load_f32x8(x, xo + j))
        j += LANES
    s = fsum(a0) + fsum(a1) + fsum(a2) + fsum(a3)
    for k in range(j, n_in):
        s += load_bf16(w, wo + k * HALF_BYTES) * x[xo + k]
    return s


@njit(cache=True, fastmath=False, parallel=True)
def matmul_f32(out, w, row_bytes, n_out, x, n, n_in, xr):
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_f32(w, r * row_bytes, x, i * n_in, n_in)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_f16(out, w, row_bytes, n_out, x, n, n_in, xr):
    round_f16_rows(x, n * n_in, xr)
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_f16(w, r * row_bytes, xr, i * n_in, n_in)


@njit(cache=True, fastmath=False, parallel=True)
def matmul_bf16(out, w, row_bytes, n_out, x, n, n_in, xr):
    round_bf16_rows(x, n * n_in, xr)
    for r in prange(n_out):
        for i in range(n):
            out[i * n_out + r] = dot_bf16(w, r * row_bytes, xr, i * n_in, n_in)
