"""Fused ops made of other ops: the definition of each (portable runs them so) and what a backend without a fused
kernel for them (or for a weight's type) runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .interface import Weight

Matmul = Callable[[Any, Weight, Any, int], None]  # a backend's matmul(out, w, x, n)


def qkv(matmul: Matmul, q: Any, k: Any, v: Any, wq: Weight, wk: Weight, wv: Weight, x: Any, n: int) -> None:
    """`Backend.qkv`: the three projections of x (n, n_in), one matmul each."""
    matmul(q, wq, x, n)  # (n, wq.n_out)
    matmul(k, wk, x, n)  # (n, wk.n_out)
    matmul(v, wv, x, n)  # (n, wv.n_out)
