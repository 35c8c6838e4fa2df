"""The row kernels of a mixture-of-experts FFN (`llamay.arch.moe`): gather the batch rows routed to one expert
into a contiguous block (so its matmuls run over just those rows), and add its weighted output back. They follow
`llamay.kernels.portable` bit for bit: the product is rounded to float32 before the sum, as ggml's mul then add."""

from __future__ import annotations

import numpy as np
from numba import njit

from llamay.ggml_types import GGMLType

from .matmul_float import TRAITS as FLOAT_TRAITS
from .matmul_float import float_dot

# compose.GATING_SIGMOID, compose.GATING_SOFTMAX_WEIGHT and compose.WEIGHTS_SUM_MIN (llama.cpp's), written here:
# numba's cache follows this folder's sources only (tests/kernels/test_compose runs every gating on numba)
GATING_SIGMOID, GATING_SOFTMAX_WEIGHT = 2, 3
WEIGHTS_SUM_MIN = 6.103515625e-5
F32 = FLOAT_TRAITS[GGMLType.F32]


@njit(cache=True, fastmath=False)
def gather_rows(out, x, rows, n, dim):
    """out (n, dim) = x[rows[j]]."""
    for j in range(n):
        r = rows[j] * dim
        o = j * dim
        for c in range(dim):
            out[o + c] = x[r + c]


@njit(cache=True, fastmath=False)
def add_rows_scaled(out, x, rows, scales, n, dim):
    """out[rows[j]] += scales[j] · x[j], x (n, dim)."""
    for j in range(n):
        r = rows[j] * dim
        o = j * dim
        s = np.float32(scales[j])
        for c in range(dim):
            out[r + c] = out[r + c] + np.float32(s * x[o + c])


@njit(cache=True, fastmath=False)
def _softmax(out, values, n):
    """out[:n] = the softmax of values[:n], in doubles, summed left to right (`compose._softmax`)."""
    top = values[0]
    for e in range(1, n):
        top = max(top, values[e])
    total = 0.0
    for e in range(n):
        out[e] = np.exp(values[e] - top)
        total += out[e]
    for e in range(n):
        out[e] = out[e] / total


@njit(cache=True, fastmath=False)
def _top_k(chosen, w, taken, probs, n_expert, k):
    """chosen (k), w (k) = the k largest of probs and their values, largest first; ties to the lower id, as a
    stable sort by -probability; taken (n_expert) marks them."""
    for j in range(k):
        best = -1
        for e in range(n_expert):
            if not taken[e] and (best < 0 or probs[e] > probs[best]):
                best = e
        taken[best] = True
        chosen[j] = best
        w[j] = probs[best]


@njit(cache=True, fastmath=False)
def moe_route(ids, weights, logits, n_expert, k, gating, norm_w, w_scale):
    """ids (k) = the k most probable experts of logits (n_expert), in id order, weights (k) = theirs: bit for bit
    `llamay.kernels.compose.moe_route` after its matmul (gating: 1 softmax, 2 sigmoid, 3 softmax over the k)."""
    raw = np.empty(n_expert, np.float64)
    for e in range(n_expert):
        raw[e] = logits[e]
    probs = raw.copy()
    if gating == GATING_SIGMOID:
        for e in range(n_expert):
            probs[e] = 1.0 / (1.0 + np.exp(-raw[e]))
    elif gating != GATING_SOFTMAX_WEIGHT:
        _softmax(probs, raw, n_expert)
    chosen, w, taken = np.empty(k, np.int64), np.empty(k, np.float64), np.zeros(n_expert, np.bool_)
    _top_k(chosen, w, taken, probs, n_expert, k)
    if gating == GATING_SOFTMAX_WEIGHT:
        _softmax(w, w.copy(), k)
    if norm_w:
        total = 0.0
        for j in range(k):
            total += w[j]
        total = max(total, WEIGHTS_SUM_MIN)
        for j in range(k):
            w[j] = w[j] / total
    scale = w_scale != 0.0 and w_scale != 1.0
    at = 0
    for e in range(n_expert):  # in id order
        for j in range(k):
            if taken[e] and chosen[j] == e:
                ids[at] = e
                weights[at] = np.float32(w[j] * w_scale if scale else w[j])
                at += 1


@njit(cache=True, fastmath=False)
def moe_route_f32(ids, weights, logits, w, row_bytes, x, n_expert, n_embd, k, gating, norm_w, w_scale):
    """`moe_route` with its F32 router's matmul (w: n_expert rows of row_bytes) on this thread: each logit is the
    F32 matmul's own `float_dot`, so bit for bit; a few thousand multiply-adds, where a parallel matmul's region
    between two-thread kernels cost ~15 µs of thread hand-over at 2 threads (a qwen3moe's decode: 12 a token)."""
    for e in range(n_expert):
        logits[e] = float_dot(F32, w, e * row_bytes, x, 0, n_embd)
    moe_route(ids, weights, logits, n_expert, k, gating, norm_w, w_scale)
