"""The row kernels of a mixture-of-experts FFN (`llamay.arch.moe`): gather the batch rows routed to one expert
into a contiguous block (so its matmuls run over just those rows), and add its weighted output back. They follow
`llamay.kernels.portable` bit for bit: the product is rounded to float32 before the sum, as ggml's mul then add."""

from __future__ import annotations

import numpy as np
from numba import njit


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
