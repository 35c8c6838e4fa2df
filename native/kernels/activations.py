"""Activation rows rounded to a weight type's vec_dot_type, bit for bit as `llamay.kernels.activations` does.

Each quantiser writes the int8 quants and per-block scales the block dots read:
- Q8_0 / Q8_1 (blocks of 32): xq (n, n_in) int8, xd (n, nb) the fp16-rounded scale, xs (n, nb) Q8_1's
  s = fp16(d·Σq) (the Q4_1 / Q5_1 dots multiply it by the weight's min);
- Q8_K (blocks of 256): xq, kd (n, nb) the float32 scale, bsum (n, n_in / 16) sums of q by 16;
- F16 / BF16: xr (n, n_in) float32 holding the rounded values.
Same float32 operations as the reference (ggml's x86 quantize_row_q8_0 / q8_1 / q8_K): d = amax / 127, the
inverse scale 127 / amax (Q8_0, Q8_1) or -127 / max (Q8_K), x times it, each rounded to float32, then to the
nearest integer, ties to even (`np.rint`). Q8_0 / Q8_1 blocks are quantised eight lanes at a time (the same
operations on each value; the largest |x| and the integer sum do not depend on the order).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .quantops import iadd
from .simd import fabs_lanes, fmax_lanes, fmax_of, isum, load_f32x8, quants_of, round_f16, store_i8x8

QK8_0 = 32
QK8_K = 256
QK8_K_SUM = 16  # Q8_K bsums: one per 16 quants
Q8_MAX = np.float32(127.0)
ONE = np.float32(1.0)


@njit(cache=True, fastmath=False)
def quantize_q8(x, n, n_in, xq, xd, xs, sums=None):
    """x (n, n_in) float32 → xq (n, n_in) int8; per 32: xd = fp16(d), xs = fp16(d·Σq), and Σq itself into
    `sums` where one is given (the strip matmuls' offset terms)."""
    nb = n_in // QK8_0
    for i in range(n):
        for b in range(nb):
            o = i * n_in + b * QK8_0
            v0, v1 = load_f32x8(x, o), load_f32x8(x, o + 8)
            v2, v3 = load_f32x8(x, o + 16), load_f32x8(x, o + 24)
            big = fmax_lanes(fmax_lanes(fabs_lanes(v0), fabs_lanes(v1)), fmax_lanes(fabs_lanes(v2), fabs_lanes(v3)))
            amax = fmax_of(big)  # the largest |x| (any order gives it)
            d = amax / Q8_MAX
            inv = Q8_MAX / amax if amax != 0.0 else np.float32(0.0)
            q0, q1, q2, q3 = quants_of(v0, inv), quants_of(v1, inv), quants_of(v2, inv), quants_of(v3, inv)
            store_i8x8(xq, o, q0)
            store_i8x8(xq, o + 8, q1)
            store_i8x8(xq, o + 16, q2)
            store_i8x8(xq, o + 24, q3)
            total = isum(iadd(iadd(q0, q1), iadd(q2, q3)))
            xd[i * nb + b] = round_f16(d)
            xs[i * nb + b] = round_f16(np.float32(total) * d)
            if sums is not None:  # decided when numba compiles: no test where no array is given
                sums[i * nb + b] = total


@njit(cache=True, fastmath=False)
def quantize_q8_k(x, n, n_in, xq, kd, bsum):
    """x (n, n_in) float32 → xq int8; per 256: kd = 1 / iscale (float32); per 16: bsum = Σq."""
    nb = n_in // QK8_K
    for i in range(n):
        for b in range(nb):
            o = i * n_in + b * QK8_K
            amax = np.float32(0.0)
            vmax = np.float32(0.0)
            for j in range(QK8_K):  # the first value of largest magnitude
                if abs(x[o + j]) > amax:
                    amax = abs(x[o + j])
                    vmax = x[o + j]
            sums = (i * n_in + b * QK8_K) // QK8_K_SUM
            if amax == 0.0:
                kd[i * nb + b] = 0.0
                for j in range(QK8_K):
                    xq[o + j] = 0
                for j in range(QK8_K // QK8_K_SUM):
                    bsum[sums + j] = 0
                continue
            iscale = -Q8_MAX / vmax
            kd[i * nb + b] = ONE / iscale
            for g in range(QK8_K // QK8_K_SUM):
                total = 0
                for j in range(g * QK8_K_SUM, (g + 1) * QK8_K_SUM):
                    q = min(127, np.int64(np.rint(iscale * x[o + j])))
                    xq[o + j] = q
                    total += q
                bsum[sums + g] = total


@njit(cache=True, fastmath=False)
def round_f16_rows(x, count, xr):
    for i in range(count):
        xr[i] = round_f16(x[i])


@njit(cache=True, fastmath=False)
def round_bf16_rows(x, count, xr):
    """Round to nearest even on the top 16 bits (NaNs stay quiet NaNs), as ggml's FP32_TO_BF16."""
    bits = x.view(np.uint32)
    out = xr.view(np.uint32)
    for i in range(count):
        u = np.int64(bits[i])
        if u & 0x7FFFFFFF > 0x7F800000:
            out[i] = (u & 0xFFFF0000) | 0x00400000
        else:
            out[i] = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
