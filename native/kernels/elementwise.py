"""Norms, rotary embeddings, activations and the small row kernels, over flat float32 arrays.

They follow `llamay.kernels.portable` operation by operation: sums of squares and means in float64 (as ggml's
ggml_float), each stored value rounded to float32 where portable rounds it, so most results are bit-identical.
SiLU runs in float32, as ggml's does. None of them is worth a thread launch at one token, so they are serial.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .simd import fmax_lanes, fmax_of, load_f32x8

GELU_CLAMP = np.float32(10.0)  # ggml's table covers (-10, 10): 0 below, x itself above
F16_MIN_NORMAL_AS_F32_BITS = 0x38800000  # 2^-14 as float32 bits: below it fp16 is subnormal
F16_REBIAS = (127 - 15) << 10  # float32 exponent bias minus fp16's, in fp16 exponent position
TWO_POW_24 = 16777216.0  # fp16 subnormals are multiples of 2^-24
ONE = np.float32(1.0)
LANES = 8


@njit(cache=True, fastmath=False)
def rms_norm(out, x, g, has_g, n, dim, eps):
    """out (n, dim) = x / sqrt(mean(x²) + eps) · g (g ignored unless has_g)."""
    for i in range(n):
        o = i * dim
        total = 0.0
        for j in range(dim):
            v = np.float64(x[o + j])
            total += v * v
        s = 1.0 / math.sqrt(total / dim + eps)
        for j in range(dim):
            y = np.float32(np.float64(x[o + j]) * s)
            out[o + j] = y * g[j] if has_g else y


@njit(cache=True, fastmath=False)
def layer_norm(out, x, g, b, has_b, n, dim, eps):
    """out (n, dim) = (x - mean) / sqrt(var + eps) · g + b."""
    for i in range(n):
        o = i * dim
        total = 0.0
        for j in range(dim):
            total += np.float64(x[o + j])
        mean = total / dim
        var = 0.0
        for j in range(dim):
            c = np.float64(np.float32(np.float64(x[o + j]) - mean))
            var += c * c
        s = 1.0 / math.sqrt(var / dim + eps)
        for j in range(dim):
            c = np.float64(np.float32(np.float64(x[o + j]) - mean))
            y = np.float32(c * s * np.float64(g[j]))
            out[o + j] = y + b[j] if has_b else y


@njit(cache=True, fastmath=False)
def rope(x, pos, n, n_heads, head_dim, n_rot, theta_scale, base_scale, neox, ff, has_ff, cos_sin, ext_factor, mscale,
         corr_low, corr_high):  # fmt: skip
    """In place rotation of x (n, n_heads·head_dim); cos_sin (n_rot) is scratch. theta_scale = base^(-2/n_rot)
    in float32; theta is multiplied by it once per pair in float32, as ggml does. With ext_factor, YaRN: the
    scaled angle mixed with the unscaled one by ggml's ramp between corr_low and corr_high, in float32."""
    half = n_rot // 2
    width = n_heads * head_dim
    one = np.float32(1.0)
    width_ramp = max(np.float32(0.001), np.float32(corr_high - corr_low))
    for i in range(n):
        theta = np.float32(pos[i])
        for j in range(half):
            t = np.float64(theta) / np.float64(ff[j]) if has_ff else np.float64(theta)
            ti = np.float32(t * base_scale)
            if ext_factor != 0.0:
                y = np.float32(np.float32(np.float32(j) - corr_low) / width_ramp)
                mix = np.float32((one - min(one, max(np.float32(0.0), y))) * ext_factor)
                ti = np.float32(ti * np.float32(one - mix)) + np.float32(np.float32(t) * mix)
            cos_sin[2 * j] = math.cos(np.float64(ti)) * mscale
            cos_sin[2 * j + 1] = math.sin(np.float64(ti)) * mscale
            theta = theta * theta_scale
        for h in range(n_heads):
            o = i * width + h * head_dim
            for j in range(half):
                a, b = (o + j, o + j + half) if neox else (o + 2 * j, o + 2 * j + 1)
                c, s = cos_sin[2 * j], cos_sin[2 * j + 1]
                x0, x1 = np.float64(x[a]), np.float64(x[b])
                x[a] = x0 * c - x1 * s
                x[b] = x0 * s + x1 * c


@njit(cache=True, fastmath=False)
def add(out, a, b, count):
    for i in range(count):
        out[i] = a[i] + b[i]


@njit(cache=True, fastmath=False)
def add_bias(x, bias, n, dim):
    for i in range(n):
        for j in range(dim):
            x[i * dim + j] += bias[j]


@njit(cache=True, fastmath=False)
def clamp(x, lo, hi, count):
    """x[0..count) clamped to [lo, hi] (float32 bounds, as ggml_clamp)."""
    lo32, hi32 = np.float32(lo), np.float32(hi)
    for i in range(count):
        x[i] = max(min(x[i], hi32), lo32)


@njit(cache=True, fastmath=False)
def scale(x, s, count):
    for i in range(count):
        x[i] = np.float64(x[i]) * s


@njit(cache=True, fastmath=False)
def swiglu(out, gate, up, count):
    """out = silu(gate) · up, in float32."""
    for i in range(count):
        g = gate[i]
        out[i] = g / (ONE + np.exp(-g)) * up[i]


@njit(cache=True, fastmath=False, inline="always")
def _half_bits(u):
    """fp16 bit pattern of the float32 whose bits are u, rounded to nearest even (|value| < 65504)."""
    sign = (u >> 16) & 0x8000
    a = u & 0x7FFFFFFF
    if a < F16_MIN_NORMAL_AS_F32_BITS:  # an fp16 subnormal: count units of 2^-24, ties to even
        mag = np.float64(np.abs(np.uint32(a).view(np.float32)))
        return sign | np.int64(np.rint(mag * TWO_POW_24))
    a = a + 0x0FFF + ((a >> 13) & 1)
    return sign | ((a >> 13) - F16_REBIAS)


@njit(cache=True, fastmath=False, inline="always")
def _gelu(v, bits, table):
    """ggml's GELU (core/kernels/gelu.py): 0 below -10, v above 10, else table[fp16 bits of v]."""
    if v <= -GELU_CLAMP:
        return np.float32(0.0)
    if v >= GELU_CLAMP:
        return v
    return table[_half_bits(np.int64(bits))]


@njit(cache=True, fastmath=False)
def geglu(out, gate, up, count, table):
    """out = gelu(gate) · up, in float32."""
    bits = gate.view(np.uint32)
    for i in range(count):
        out[i] = _gelu(gate[i], bits[i], table) * up[i]


@njit(cache=True, fastmath=False)
def gelu(x, count, table):
    bits = x.view(np.uint32)
    for i in range(count):
        x[i] = _gelu(x[i], bits[i], table)


@njit(cache=True, fastmath=False)
def swiglu_oai(out, gate, up, count, alpha, limit):
    """out = g / (1 + exp(-alpha·g)) · (u + 1), g = min(gate, limit), u = clamp(up, ±limit), float32 (ggml's)."""
    a, lim = np.float32(alpha), np.float32(limit)
    for i in range(count):
        g = min(gate[i], lim)
        u = min(max(up[i], -lim), lim)
        out[i] = g / (np.float32(1.0) + np.exp(a * -g)) * (u + np.float32(1.0))


@njit(cache=True, fastmath=False)
def softcap(x, cap, count):
    """x = cap·tanh(x / cap), float32."""
    c = np.float32(cap)
    for i in range(count):
        x[i] = c * np.tanh(x[i] / c)


@njit(cache=True, fastmath=False)
def kv_store(cache, layer, n_slots, slots, src, n, dim):
    """cache[layer, slots[i], :] = src[i, :]; cache is (n_layer, n_slots, dim)."""
    base = layer * n_slots * dim
    for i in range(n):
        o = base + slots[i] * dim
        for j in range(dim):
            cache[o + j] = src[i * dim + j]


@njit(cache=True, fastmath=False)
def argmax(x, offset, n):
    """Index of the largest of x[offset .. offset+n) (the first, on ties): the largest value eight lanes at a
    time, then the first index holding it (a vocabulary's logits hold no NaN)."""
    best = x[offset]
    j = 0
    if n >= LANES:
        top = load_f32x8(x, offset)
        for j in range(LANES, n - n % LANES, LANES):
            top = fmax_lanes(load_f32x8(x, offset + j), top)
        best = fmax_of(top)
        j = n - n % LANES
    for k in range(j, n):
        if x[offset + k] > best:
            best = x[offset + k]
    for k in range(n):
        if x[offset + k] == best:
            return k
    return 0


@njit(cache=True, fastmath=False, inline="always")
def _worse(va, ia, vb, ib):
    """Whether entry a ranks below entry b: smaller value, or the same value at a larger index."""
    return va < vb or (va == vb and ia > ib)


@njit(cache=True, fastmath=False)
def top_k(x, offset, n, k, vals, idx):
    """The k largest of x[offset .. offset+n) by (value, then smaller index) into vals / idx (unsorted), in
    one pass with a k-entry min-heap whose root is the worst kept; returns how many were kept (min(k, n) but
    for NaNs, which are skipped: they have no order)."""
    size = 0
    for j in range(n):
        v = x[offset + j]
        if v != v:  # NaN
            continue
        if size < k:  # sift the new entry up
            c = size
            size += 1
            while c > 0 and _worse(v, j, vals[(c - 1) // 2], idx[(c - 1) // 2]):
                p = (c - 1) // 2
                vals[c], idx[c] = vals[p], idx[p]
                c = p
            vals[c], idx[c] = v, j
        elif v > vals[0]:  # replaces the root (a tie has a larger index: worse), then sifts down
            c = 0
            while True:
                child = 2 * c + 1
                if child >= size:
                    break
                if child + 1 < size and _worse(vals[child + 1], idx[child + 1], vals[child], idx[child]):
                    child += 1
                if not _worse(vals[child], idx[child], v, j):
                    break
                vals[c], idx[c] = vals[child], idx[child]
                c = child
            vals[c], idx[c] = v, j
    return size


@njit(cache=True, fastmath=False)
def mean_pool(out, x, n, dim):
    for j in range(dim):
        total = 0.0
        for i in range(n):
            total += np.float64(x[i * dim + j])
        out[j] = total / n


@njit(cache=True, fastmath=False)
def l2_normalize(x, dim):
    total = 0.0
    for j in range(dim):
        total += np.float64(x[j]) * np.float64(x[j])
    norm = math.sqrt(total)
    if norm > 0.0:
        for j in range(dim):
            x[j] = np.float64(x[j]) / norm
