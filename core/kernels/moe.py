"""`Backend.moe_experts` made of other ops, for the backends (and weight types) without a fused kernel: the
sequence `arch.moe` runs for one row, with the k experts' gate and up matmuls first so that one SwiGLU call
covers them all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def compose_experts(
    be: Any,
    out: Any,
    gate: tuple,
    up: tuple,
    down: tuple,
    x: Any,
    chosen: list[int],
    weights: Any,
    h: Any,
    y: Any,
    row0: Any,
    at: Callable[[Any, int], Any],
) -> None:
    """out = the experts `chosen` of x, weighted (`moe_experts`); row0: an int buffer holding 0 (the one row of
    add_rows_scaled); at(buf, i): buf from element i on (a view, or an address)."""
    f, dim, k = gate[0].n_out, down[0].n_out, len(chosen)
    for j, e in enumerate(chosen):
        be.matmul(at(h, j * f), gate[e], x, 1)
        be.matmul(at(h, (k + j) * f), up[e], x, 1)
    be.swiglu(h, h, at(h, k * f), k * f)
    be.scale(out, 0.0, dim)
    for j, e in enumerate(chosen):
        be.matmul(y, down[e], at(h, j * f), 1)
        be.add_rows_scaled(out, y, row0, at(weights, j), 1, dim)
