"""Fused ops made of other ops: the definition of each (portable runs them so) and what a backend without a fused
kernel for them (or for a weight's type) runs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .interface import Weight

Matmul = Callable[[Any, Weight, Any, int], None]  # a backend's matmul(out, w, x, n)


def qkv(matmul: Matmul, q: Any, k: Any, v: Any, wq: Weight, wk: Weight, wv: Weight, x: Any, n: int) -> None:
    """`Backend.qkv`: the three projections of x (n, n_in), one matmul each."""
    matmul(q, wq, x, n)  # (n, wq.n_out)
    matmul(k, wk, x, n)  # (n, wk.n_out)
    matmul(v, wv, x, n)  # (n, wv.n_out)


# -- a mixture of experts' router (core/arch/moe.py) --------------------------------------------------------

GATING_SOFTMAX, GATING_SIGMOID = 1, 2  # llama.cpp's llama_expert_gating_func_type
GATING_SOFTMAX_WEIGHT = 3  # the top-k by raw logit, their weights a softmax over those k (gpt-oss)
WEIGHTS_SUM_MIN = 6.103515625e-5  # llama.cpp clamps the sum it renormalises by (the smallest normal fp16)


def _total(values: list[float]) -> float:
    """Left to right in doubles: the numba and C kernels' order (Python's sum compensates from 3.12 on)."""
    total = 0.0
    for v in values:
        total += v
    return total


def _softmax(values: list[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = _total(exps)
    return [e / total for e in exps]


def route(logits: list[float], k: int, gating: int, norm_w: bool, w_scale: float) -> tuple[list[int], list[float]]:
    """One row's router logits → its k chosen experts (by probability, ties to the lower id) and their weights, in
    doubles: the probabilities (softmax or sigmoid), optionally renormalised to sum to one, optionally scaled."""
    if gating == GATING_SOFTMAX_WEIGHT:
        probs = logits
    elif gating == GATING_SIGMOID:
        probs = [1.0 / (1.0 + math.exp(-v)) for v in logits]
    else:
        probs = _softmax(logits)
    chosen = sorted(range(len(probs)), key=lambda e: -probs[e])[:k]
    weights = [probs[e] for e in chosen]
    if gating == GATING_SOFTMAX_WEIGHT:
        weights = _softmax(weights)
    if norm_w:
        total = max(_total(weights), WEIGHTS_SUM_MIN)
        weights = [v / total for v in weights]
    if w_scale not in (0.0, 1.0):
        weights = [v * w_scale for v in weights]
    return chosen, weights


def moe_route(
    be: Any,
    matmul: Matmul,
    ids: Any,
    weights: Any,
    logits: Any,
    router: Weight,
    x: Any,
    k: int,
    gating: int,
    norm_w: bool,
    w_scale: float,
) -> None:
    """`Backend.moe_route`: logits (router.n_out) = the router of x (one row); ids (k) = the chosen experts in id
    order (the order `moe_experts` adds their outputs in), weights (k) = theirs, rounded to float32."""
    matmul(logits, router, x, 1)
    chosen, w = route(be.read_f32(logits, 0, router.n_out), k, gating, norm_w, w_scale)
    order = sorted(range(k), key=chosen.__getitem__)
    be.write_i32(ids, [chosen[j] for j in order])
    be.write_f32(weights, [w[j] for j in order])
