"""Norms, rotary embeddings, activations and the small row kernels, over flat float32 arrays.

They follow `llamay.kernels.portable` operation by operation: sums of squares and means in float64 (as ggml's
ggml_float), each stored value rounded to float32 where portable rounds it, so most results are bit-identical.
SiLU runs in float32, as ggml's does. None of them is worth a thread launch at one token, so they are serial.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

GELU_COEF_A = 0.044715
SQRT_2_OVER_PI = 0.7978845608028654
ONE = np.float32(1.0)


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
def rope(x, pos, n, n_heads, head_dim, n_rot, theta_scale, base_scale, neox, ff, has_ff, cos_sin):
    """In place rotation of x (n, n_heads·head_dim); cos_sin (n_rot) is scratch. theta_scale = base^(-2/n_rot)
    in float32; theta is multiplied by it once per pair in float32, as ggml does."""
    half = n_rot // 2
    width = n_heads * head_dim
    for i in range(n):
        theta = np.float32(pos[i])
        for j in range(half):
            t = np.float64(theta) / np.float64(ff[j]) if has_ff else np.float64(theta)
            t = np.float64(np.float32(t * base_scale))
            cos_sin[2 * j] = math.cos(t)
            cos_sin[2 * j + 1] = math.sin(t)
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
def _gelu(v):
    """tanh GELU in float64, tanh(y) as (1 - e) / (1 + e) with e = exp(-2|y|): one exp, no tanh call."""
    y = SQRT_2_OVER_PI * v * (1.0 + GELU_COEF_A * v * v)
    e = math.exp(-2.0 * abs(y))
    return 0.5 * v * (1.0 + math.copysign((1.0 - e) / (1.0 + e), y))


@njit(cache=True, fastmath=False)
def geglu(out, gate, up, count):
    for i in range(count):
        out[i] = _gelu(np.float64(gate[i])) * np.float64(up[i])


@njit(cache=True, fastmath=False)
def gelu(x, count):
    for i in range(count):
        x[i] = _gelu(np.float64(x[i]))


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
    """Index of the largest of x[offset .. offset+n) (the first, on ties)."""
    best, at = x[offset], 0
    for j in range(1, n):
        if x[offset + j] > best:
            best, at = x[offset + j], j
    return at


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
