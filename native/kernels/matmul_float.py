"""Float weights: F32 (against x as is), F16 and BF16 (against x rounded to fp16 / bf16 first, as ggml converts
the activation row to the weight's type; the products are then exact in float32).

One row dot for the three, `float_dot`, with the type's loaders from its traits: four f32x8 accumulators (32
elements a step), then 8 at a time, then one at a time for rows whose length is not a multiple of 8. The types'
entries in TRAITS give the loaders and the rounding of x; their matmul and get_rows are the family's (`drivers`).
"""

from __future__ import annotations

from numba import njit

from llamay.ggml_types import GGMLType

from .activations import round_bf16_rows, round_f16_rows
from .simd import fmul_add, fsum, fzero, load_bf16, load_bf16x8, load_f16, load_f16x8, load_f32, load_f32x8
from .traits import FLOAT, Traits

LANES = 8


@njit(cache=True, fastmath=False, inline="always")
def float_dot(tr, w, wo, x, xo, n_in):
    """Weight row at byte wo of w (type tr) · x[xo .. xo + n_in)."""
    eb = tr.elem_bytes
    a0, a1, a2, a3 = fzero(), fzero(), fzero(), fzero()
    j = 0
    while j + 4 * LANES <= n_in:
        o = wo + j * eb
        a0 = fmul_add(a0, tr.load8(w, o), load_f32x8(x, xo + j))
        a1 = fmul_add(a1, tr.load8(w, o + 8 * eb), load_f32x8(x, xo + j + 8))
        a2 = fmul_add(a2, tr.load8(w, o + 16 * eb), load_f32x8(x, xo + j + 16))
        a3 = fmul_add(a3, tr.load8(w, o + 24 * eb), load_f32x8(x, xo + j + 24))
        j += 4 * LANES
    while j + LANES <= n_in:
        a0 = fmul_add(a0, tr.load8(w, wo + j * eb), load_f32x8(x, xo + j))
        j += LANES
    s = fsum(a0) + fsum(a1) + fsum(a2) + fsum(a3)
    for k in range(j, n_in):
        s += tr.load1(w, wo + k * eb) * x[xo + k]
    return s


# -- the activation rows as each type's dot reads them: (x, count, xr) -> x itself, or xr holding x rounded


@njit(cache=True, fastmath=False, inline="always")
def as_f32(x, count, xr):
    return x


@njit(cache=True, fastmath=False, inline="always")
def as_f16(x, count, xr):
    round_f16_rows(x, count, xr)
    return xr


@njit(cache=True, fastmath=False, inline="always")
def as_bf16(x, count, xr):
    round_bf16_rows(x, count, xr)
    return xr


# -- the family's types: their entries of the traits table ---------------------------------------------------

TRAITS = {
    t: Traits(t, FLOAT, load8=load8, load1=load1, rounded=rounded)
    for t, load8, load1, rounded in (
        (GGMLType.F32, load_f32x8, load_f32, as_f32),
        (GGMLType.F16, load_f16x8, load_f16, as_f16),
        (GGMLType.BF16, load_bf16x8, load_bf16, as_bf16),
    )
}
