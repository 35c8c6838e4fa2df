"""Batched matmuls (prefill) of the 32-element block types: weight panels unpacked once, tiles of 2 rows × 4 tokens.

At one token a matmul reads each weight block once and the row dots read the packed bytes directly. With many
tokens the same blocks meet every token, so a panel of PANEL rows is first unpacked by its type's `unpack_*`
into a thread's scratch, one row after another:
    q (PANEL, n_in)  the quants, one per byte (uint8; int8 for the signed types),
    d (PANEL, nb)    the block scales,        e (PANEL, nb)   the block's constant term
and then every token meets the panel through this module's generic tiles, whatever the weight type: a block's
contribution is d·dx·(q·x) + e·ex, with ex the activation's matching term (Q8_1's s for the types with a min,
xd·Σq for the types with an offset, e = 0 for the signed types). A 2 × 4 tile loads each weight vector once
for 4 tokens and each activation vector once for 2 rows: eight dot4s per six loads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .quantops import dot, iadd, ihalves, imul, izero, load_q32, quad_sums
from .simd import fma, fma_i32, fsum, fzero, load_i8x32, load_i32x8

PANEL = 32  # weight rows unpacked at a time (a multiple of 2)
TILE_TOKENS = 4  # tokens per tile; below this many tokens the row dots read the packed weights directly
QK = 32


@njit(cache=True, fastmath=False, inline="always")
def dot_unpacked(q, qo, d, e, do, nb, xq, xo, xd, xe, so):
    """One unpacked row (quants at q[qo], scales at d[do], e[do]) · one token (xq[xo], xd[so], xe[so])."""
    acc = fzero()
    extra = np.float32(0.0)
    for b in range(nb):
        acc = fma_i32(acc, dot(load_q32(q, qo + QK * b), load_i8x32(xq, xo + QK * b)), d[do + b] * xd[so + b])
        extra = fma(e[do + b], xe[so + b], extra)
    return fsum(acc) + extra


@njit(cache=True, fastmath=False, inline="always")
def tile_2x4(q, qo, d, e, do, n_in, nb, xq, xo, xd, xe, so, out, oo, n_out):
    """Rows k, k+1 of the panel (quants from q[qo], scales from d[do]) · tokens i..i+3 (quants from xq[xo],
    scales from xd[so]): out[oo + t·n_out + {0, 1}] for t < 4."""
    a00, a01, a02, a03 = fzero(), fzero(), fzero(), fzero()
    a10, a11, a12, a13 = fzero(), fzero(), fzero(), fzero()
    c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = np.float32(0.0)
    for b in range(nb):
        q0, q1 = load_q32(q, qo + QK * b), load_q32(q, qo + n_in + QK * b)
        d0, d1, e0, e1 = d[do + b], d[do + nb + b], e[do + b], e[do + nb + b]
        x = load_i8x32(xq, xo + QK * b)
        dx, ex = xd[so + b], xe[so + b]
        a00, a10 = fma_i32(a00, dot(q0, x), d0 * dx), fma_i32(a10, dot(q1, x), d1 * dx)
        c00, c10 = fma(e0, ex, c00), fma(e1, ex, c10)
        x = load_i8x32(xq, xo + n_in + QK * b)
        dx, ex = xd[so + nb + b], xe[so + nb + b]
        a01, a11 = fma_i32(a01, dot(q0, x), d0 * dx), fma_i32(a11, dot(q1, x), d1 * dx)
        c01, c11 = fma(e0, ex, c01), fma(e1, ex, c11)
        x = load_i8x32(xq, xo + 2 * n_in + QK * b)
        dx, ex = xd[so + 2 * nb + b], xe[so + 2 * nb + b]
        a02, a12 = fma_i32(a02, dot(q0, x), d0 * dx), fma_i32(a12, dot(q1, x), d1 * dx)
        c02, c12 = fma(e0, ex, c02), fma(e1, ex, c12)
        x = load_i8x32(xq, xo + 3 * n_in + QK * b)
        dx, ex = xd[so + 3 * nb + b], xe[so + 3 * nb + b]
        a03, a13 = fma_i32(a03, dot(q0, x), d0 * dx), fma_i32(a13, dot(q1, x), d1 * dx)
        c03, c13 = fma(e0, ex, c03), fma(e1, ex, c13)
    out[oo], out[oo + 1] = fsum(a00) + c00, fsum(a10) + c10
    out[oo + n_out], out[oo + n_out + 1] = fsum(a01) + c01, fsum(a11) + c11
    out[oo + 2 * n_out], out[oo + 2 * n_out + 1] = fsum(a02) + c02, fsum(a12) + c12
    out[oo + 3 * n_out], out[oo + 3 * n_out + 1] = fsum(a03) + c03, fsum(a13) + c13


@njit(cache=True, fastmath=False, inline="always")
def panel_matmul(q, d, e, rows, r0, n_in, xq, xd, xe, n, out, n_out):
    """out[:, r0 .. r0 + rows) for every token, from an unpacked panel of `rows` rows."""
    nb = n_in // QK
    n4 = n - n % TILE_TOKENS
    for k in range(0, rows - rows % 2, 2):
        for i in range(0, n4, TILE_TOKENS):
            tile_2x4(q, k * n_in, d, e, k * nb, n_in, nb, xq, i * n_in, xd, xe, i * nb, out, i * n_out + r0 + k, n_out)
        for i in range(n4, n):
            for j in range(2):
                out[i * n_out + r0 + k + j] = dot_unpacked(
                    q, (k + j) * n_in, d, e, (k + j) * nb, nb, xq, i * n_in, xd, xe, i * nb
                )
    if rows % 2:
        k = rows - 1
        for i in range(n):
            out[i * n_out + r0 + k] = dot_unpacked(q, k * n_in, d, e, k * nb, nb, xq, i * n_in, xd, xe, i * nb)


# -- the 256-element super-block types (Q8_K activations) ---------------------------------------------------
# An unpacked row: q (n_in) quants, one per byte; per 16-element group g: sc[g] its integer scale and e[g] the
# integer that multiplies the group's Σx (bsum); per super-block: d and f. The row · x is
#     Σ_sb  d·dx·Σ_g sc[g]·(q·x)_g  +  f·dx·Σ_g e[g]·bsum[g]
# (Q4_K / Q5_K: e = -min, f = dmin; Q3_K / Q6_K / IQ4_XS: signed q, offsets included, e = 0). Every step is
# the row dots' (same integers in the same lanes, same float operations), so a batch gives what one token gives:
# bit for bit, but for Q2_K (its mins are one scalar sum per super-block in the row dot).

QK_K = 256
GROUP = 16  # elements per group (Q8_K's bsum)


@njit(cache=True, fastmath=False, inline="always")
def _k_terms(e, g, bsum, gb):
    """Σ e·bsum of a super-block's 16 groups, four groups a lane (lanes 4..7 zero): the integers the row dots of
    Q4_K / Q5_K convert for their mins (`pair_lanes`), so their float steps, and results, are the same."""
    return quad_sums(imul(load_i32x8(e, g), load_i32x8(bsum, gb)), imul(load_i32x8(e, g + 8), load_i32x8(bsum, gb + 8)))


@njit(cache=True, fastmath=False, inline="always")
def dot_unpacked_k(q, qo, sc, e, go, d, f, bo, n_in, xq, xo, kd, bsum, so, gx):
    """One unpacked row (quants at q[qo], group ints at sc/e[go], floats at d/f[bo]) · one Q8_K token."""
    acc, extra = fzero(), fzero()
    for sb in range(n_in // QK_K):
        total = izero()
        for ch in range(QK_K // QK):
            base, g = QK_K * sb + QK * ch, go + GROUP * sb + 2 * ch
            p = dot(load_q32(q, qo + base), load_i8x32(xq, xo + base))
            total = iadd(total, imul(p, ihalves(sc[g], sc[g + 1])))
        dx = kd[so + sb]
        g, gb = go + GROUP * sb, gx + GROUP * sb
        acc = fma_i32(acc, total, d[bo + sb] * dx)
        extra = fma_i32(extra, _k_terms(e, g, bsum, gb), f[bo + sb] * dx)
    return fsum(acc) + fsum(extra)


@njit(cache=True, fastmath=False, inline="always")
def ktile_2x4(q, qo, sc, e, go, d, f, bo, n_in, xq, xo, kd, bsum, so, gx, out, oo, n_out):
    """Rows k, k+1 of an unpacked panel · tokens i..i+3 (Q8_K): out[oo + t·n_out + {0, 1}] for t < 4."""
    ng, nsb = n_in // GROUP, n_in // QK_K
    a00, a01, a02, a03 = fzero(), fzero(), fzero(), fzero()
    a10, a11, a12, a13 = fzero(), fzero(), fzero(), fzero()
    c00, c01, c02, c03 = fzero(), fzero(), fzero(), fzero()
    c10, c11, c12, c13 = fzero(), fzero(), fzero(), fzero()
    for sb in range(nsb):
        t00, t01, t02, t03 = izero(), izero(), izero(), izero()
        t10, t11, t12, t13 = izero(), izero(), izero(), izero()
        for ch in range(QK_K // QK):
            base, g = QK_K * sb + QK * ch, go + GROUP * sb + 2 * ch
            q0, q1 = load_q32(q, qo + base), load_q32(q, qo + n_in + base)
            s0, s1 = ihalves(sc[g], sc[g + 1]), ihalves(sc[g + ng], sc[g + ng + 1])
            x = load_i8x32(xq, xo + base)
            t00, t10 = iadd(t00, imul(dot(q0, x), s0)), iadd(t10, imul(dot(q1, x), s1))
            x = load_i8x32(xq, xo + n_in + base)
            t01, t11 = iadd(t01, imul(dot(q0, x), s0)), iadd(t11, imul(dot(q1, x), s1))
            x = load_i8x32(xq, xo + 2 * n_in + base)
            t02, t12 = iadd(t02, imul(dot(q0, x), s0)), iadd(t12, imul(dot(q1, x), s1))
            x = load_i8x32(xq, xo + 3 * n_in + base)
            t03, t13 = iadd(t03, imul(dot(q0, x), s0)), iadd(t13, imul(dot(q1, x), s1))
        d0, d1, f0, f1 = d[bo + sb], d[bo + nsb + sb], f[bo + sb], f[bo + nsb + sb]
        g0, g1, gb = go + GROUP * sb, go + ng + GROUP * sb, gx + GROUP * sb
        dx = kd[so + sb]
        a00, a10 = fma_i32(a00, t00, d0 * dx), fma_i32(a10, t10, d1 * dx)
        c00, c10 = fma_i32(c00, _k_terms(e, g0, bsum, gb), f0 * dx), fma_i32(c10, _k_terms(e, g1, bsum, gb), f1 * dx)
        dx, gb = kd[so + nsb + sb], gb + ng
        a01, a11 = fma_i32(a01, t01, d0 * dx), fma_i32(a11, t11, d1 * dx)
        c01, c11 = fma_i32(c01, _k_terms(e, g0, bsum, gb), f0 * dx), fma_i32(c11, _k_terms(e, g1, bsum, gb), f1 * dx)
        dx, gb = kd[so + 2 * nsb + sb], gb + ng
        a02, a12 = fma_i32(a02, t02, d0 * dx), fma_i32(a12, t12, d1 * dx)
        c02, c12 = fma_i32(c02, _k_terms(e, g0, bsum, gb), f0 * dx), fma_i32(c12, _k_terms(e, g1, bsum, gb), f1 * dx)
        dx, gb = kd[so + 3 * nsb + sb], gb + ng
        a03, a13 = fma_i32(a03, t03, d0 * dx), fma_i32(a13, t13, d1 * dx)
        c03, c13 = fma_i32(c03, _k_terms(e, g0, bsum, gb), f0 * dx), fma_i32(c13, _k_terms(e, g1, bsum, gb), f1 * dx)
    out[oo], out[oo + 1] = fsum(a00) + fsum(c00), fsum(a10) + fsum(c10)
    out[oo + n_out], out[oo + n_out + 1] = fsum(a01) + fsum(c01), fsum(a11) + fsum(c11)
    out[oo + 2 * n_out], out[oo + 2 * n_out + 1] = fsum(a02) + fsum(c02), fsum(a12) + fsum(c12)
    out[oo + 3 * n_out], out[oo + 3 * n_out + 1] = fsum(a03) + fsum(c03), fsum(a13) + fsum(c13)


@njit(cache=True, fastmath=False, inline="always")
def panel_matmul_k(q, sc, e, d, f, rows, r0, n_in, xq, kd, bsum, n, out, n_out):
    """out[:, r0 .. r0 + rows) for every token, from an unpacked panel of a super-block type."""
    ng, nsb = n_in // GROUP, n_in // QK_K
    n4 = n - n % TILE_TOKENS
    for k in range(0, rows - rows % 2, 2):
        for i in range(0, n4, TILE_TOKENS):
            ktile_2x4(q, k * n_in, sc, e, k * ng, d, f, k * nsb, n_in, xq, i * n_in, kd, bsum, i * nsb, i * ng,
                      out, i * n_out + r0 + k, n_out)  # fmt: skip
        for i in range(n4, n):
            for j in range(2):
                out[i * n_out + r0 + k + j] = dot_unpacked_k(
                    q, (k + j) * n_in, sc, e, (k + j) * ng, d, f, (k + j) * nsb, n_in,
                    xq, i * n_in, kd, bsum, i * nsb, i * ng,
                )  # fmt: skip
    if rows % 2:
        k = rows - 1
        for i in range(n):
            out[i * n_out + r0 + k] = dot_unpacked_k(
                q, k * n_in, sc, e, k * ng, d, f, k * nsb, n_in, xq, i * n_in, kd, bsum, i * nsb, i * ng
            )
