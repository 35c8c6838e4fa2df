"""Batched matmuls (prefill, batched decode) of the 32-element block types: weight panels unpacked once, then
met by every token eight rows at a time.

At one token a matmul reads each weight block once and the row dots read the packed bytes directly. With many
tokens the same blocks meet every token, so a panel of PANEL rows is first unpacked by its type's `unpack_*`
into a thread's scratch, one row after another:
    q (PANEL, n_in)  the quants, one per byte (uint8; int8 for the signed types),
    d (PANEL, nb)    the block scales,        e (PANEL, nb)   the block's constant term
and then every token meets the panel through this module's generic tiles, whatever the weight type: a block's
contribution is d·dx·(q·x) + e·ex, with ex the activation's matching term (Q8_1's s for the types with a min,
xd·Σq for the types with an offset, e = 0 for the signed types).

To give what the row dot gives (ggml's vec_dot order), each row keeps 8 float lanes per token, converted and
FMA'd once per block; a row at a time also pays a scalar scale product and a constant-term FMA per block. So the
rows are copied eight side by side (`interleave_panel`), and a vector holds one lane of eight rows: a block
costs eight dot4s, eight conversions and eight FMAs for eight rows, its scale product and constant term one
vector operation each (at 8 tokens of Q4_1, 1.25x the speed of the 2 × 4 tiles this replaced).

By default numba repacks matrices whose rows are a multiple of eight (`strips`, another summation order); the
panels serve the other matrices, and all of them under LLAMAY_REPACK=0.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .quantops import dot, iadd, ihalves, imul, interleave_rows8, load_q32, quad_sums, splat_quad
from .simd import (
    fadd_rows,
    fma,
    fma_i32,
    fma_i32_rows,
    fma_rows,
    fmul,
    fsplat,
    fsum,
    fsum_rows,
    fzero,
    izero,
    load_f32x8,
    load_i8x32,
    load_i32x8,
    store_f32x8,
)

PANEL = 32  # weight rows unpacked at a time (a multiple of ROWS)
ROWS = 8  # rows side by side in an interleaved strip: the lanes of a vector
TILE_TOKENS = 4  # panels from this many tokens up; below, the row dots read the packed weights directly
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
def interleave_panel(q, strips, n_in, qi):
    """Copy the quants of the first `strips` × 8 unpacked rows side by side: strip s, block b holds at
    q[qi + s·8·n_in + 256·b + 32·l + 4·r ..] the quad l of row 8s + r (`interleave_rows8`), so one vector load
    gives a lane for eight rows. (Their scales were unpacked side by side already: `scale_slot`.)"""
    for s in range(strips):
        for b in range(n_in // QK):
            interleave_rows8(q, s * ROWS * n_in + QK * b, n_in, q, qi + s * ROWS * n_in + ROWS * QK * b)


@njit(cache=True, fastmath=False, inline="always")
def scale_slot(k, rows, nb):
    """Where the unpacker puts row k's block scales, (first, stride): rows in a strip of eight side by side
    after PANEL rows' room (d[PANEL·nb + 8·(s·nb + b) + r] for row 8s + r), the rest row after row."""
    if k < rows - rows % ROWS:
        return PANEL * nb + ROWS * nb * (k // ROWS) + k % ROWS, ROWS
    return k * nb, 1


@njit(cache=True, fastmath=False, inline="always")
def tile_8x1(q, qo, d, e, do, nb, xq, xo, xd, xe, so, out, oo):
    """Eight interleaved rows (quants from q[qo], scales from d[do], e[do]) · one token (xq[xo], xd[so],
    xe[so]): out[oo .. oo + 8). Lane r of every vector is row r, and each lane takes `dot_unpacked`'s steps
    (a_l is its accumulator lane l), so each row's result is the row dot's, bit for bit."""
    a0, a1, a2, a3, a4, a5, a6, a7 = fzero(), fzero(), fzero(), fzero(), fzero(), fzero(), fzero(), fzero()
    extra = fzero()
    for b in range(nb):
        w, x = qo + ROWS * QK * b, xo + QK * b
        s = fmul(load_f32x8(d, do + ROWS * b), fsplat(xd[so + b]))
        a0 = fma_i32_rows(a0, dot(load_q32(q, w), splat_quad(xq, x)), s)
        a1 = fma_i32_rows(a1, dot(load_q32(q, w + 32), splat_quad(xq, x + 4)), s)
        a2 = fma_i32_rows(a2, dot(load_q32(q, w + 64), splat_quad(xq, x + 8)), s)
        a3 = fma_i32_rows(a3, dot(load_q32(q, w + 96), splat_quad(xq, x + 12)), s)
        a4 = fma_i32_rows(a4, dot(load_q32(q, w + 128), splat_quad(xq, x + 16)), s)
        a5 = fma_i32_rows(a5, dot(load_q32(q, w + 160), splat_quad(xq, x + 20)), s)
        a6 = fma_i32_rows(a6, dot(load_q32(q, w + 192), splat_quad(xq, x + 24)), s)
        a7 = fma_i32_rows(a7, dot(load_q32(q, w + 224), splat_quad(xq, x + 28)), s)
        extra = fma_rows(load_f32x8(e, do + ROWS * b), fsplat(xe[so + b]), extra)
    store_f32x8(out, oo, fadd_rows(fsum_rows(a0, a1, a2, a3, a4, a5, a6, a7), extra))


@njit(cache=True, fastmath=False, inline="always")
def panel_matmul(q, d, e, rows, r0, n_in, xq, xd, xe, n, out, n_out):
    """out[:, r0 .. r0 + rows) for every token, from an unpacked panel of `rows` rows (q, d, e hold PANEL rows
    row after row, then room for as many interleaved)."""
    nb = n_in // QK
    strips = rows // ROWS
    qi, di = PANEL * n_in, PANEL * nb
    interleave_panel(q, strips, n_in, qi)
    for st in range(strips):
        for i in range(n):
            oo = i * n_out + r0 + st * ROWS
            tile_8x1(q, qi + st * ROWS * n_in, d, e, di + st * ROWS * nb, nb, xq, i * n_in, xd, xe, i * nb, out, oo)
    for k in range(strips * ROWS, rows):
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
