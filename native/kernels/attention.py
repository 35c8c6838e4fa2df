"""Attention over the paged KV cache (layout in `llamay.kernels.interface`), in float32.

Each (token, head) pair is independent: scores q·k over the keys the token sees (its own sequence only; causal
with an optional sliding window, or the whole sequence), soft-capped and ALiBi-biased when asked, softmax with the
max subtracted (a head's sink logit joins the max and the denominator), then the weighted sum
of the values, 64 dimensions at a time in eight registers across all keys (then 8 at a time). The pairs are
split into one contiguous chunk per thread; each chunk owns a row of the scratch (scores and the keys' cache
slots), so nothing is allocated here.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .simd import fmul, fmul_add, fsplat, fsum, fzero, load_f32x8, store_f32x8

LANES = 8
WIDE = 8 * LANES  # value dimensions summed together (each lane's sum over the keys is in the same order)


@njit(cache=True, fastmath=False, inline="always")
def dot(a, ao, b, bo, n):
    """Σ a[ao + j] · b[bo + j] for j < n, float32 arrays, in two f32x8 accumulators."""
    a0, a1 = fzero(), fzero()
    j = 0
    while j + 2 * LANES <= n:
        a0 = fmul_add(a0, load_f32x8(a, ao + j), load_f32x8(b, bo + j))
        a1 = fmul_add(a1, load_f32x8(a, ao + j + LANES), load_f32x8(b, bo + j + LANES))
        j += 2 * LANES
    if j + LANES <= n:
        a0 = fmul_add(a0, load_f32x8(a, ao + j), load_f32x8(b, bo + j))
        j += LANES
    s = fsum(a0) + fsum(a1)
    for k in range(j, n):
        s += a[ao + k] * b[bo + k]
    return s


@njit(cache=True, fastmath=False, inline="always")
def _fill_slots(slots, pages, off, page_size, lo, hi):
    """slots[p - lo] = the cache slot of position p, for lo <= p < hi (one division, then counting)."""
    page, within = lo // page_size, lo % page_size
    for p in range(hi - lo):
        slots[p] = pages[off + page] * page_size + within
        within += 1
        if within == page_size:
            page, within = page + 1, 0


@njit(cache=True, fastmath=False, inline="always")
def _one_head(out, oo, q, qo, k_cache, kstart, kdim, head_dim, v_cache, vstart, vdim, head_dim_v, kq_scale, m,
              scores, slots, softcap, slope, dist0, sink):  # fmt: skip
    """out[oo..+head_dim_v) = softmax(q[qo..] · kᵀ · kq_scale) · v over the m keys at cache slots[0..m); scores
    soft-capped (softcap > 0), minus slope·|dist0 + p| for key p (ALiBi, slope > 0), a sink logit in the
    denominator (sink > -inf)."""
    best = sink
    for p in range(m):
        s = dot(q, qo, k_cache, kstart + slots[p] * kdim, head_dim) * kq_scale
        if softcap > 0:
            s = softcap * np.tanh(s / softcap)
        if slope > 0:
            s -= slope * np.float32(abs(dist0 + p))
        scores[p] = s
        best = max(best, s)
    total = np.float32(0.0) if sink == -np.inf else np.exp(sink - best)
    for p in range(m):
        e = np.exp(scores[p] - best)
        scores[p] = e
        total += e
    inv = np.float32(1.0) / total
    d = 0
    while d + WIDE <= head_dim_v:  # eight accumulators a key: eight independent FMA chains, not one
        a0, a1, a2, a3, a4, a5, a6, a7 = fzero(), fzero(), fzero(), fzero(), fzero(), fzero(), fzero(), fzero()
        for p in range(m):
            s, vo = fsplat(scores[p]), vstart + slots[p] * vdim + d
            a0 = fmul_add(a0, s, load_f32x8(v_cache, vo))
            a1 = fmul_add(a1, s, load_f32x8(v_cache, vo + LANES))
            a2 = fmul_add(a2, s, load_f32x8(v_cache, vo + 2 * LANES))
            a3 = fmul_add(a3, s, load_f32x8(v_cache, vo + 3 * LANES))
            a4 = fmul_add(a4, s, load_f32x8(v_cache, vo + 4 * LANES))
            a5 = fmul_add(a5, s, load_f32x8(v_cache, vo + 5 * LANES))
            a6 = fmul_add(a6, s, load_f32x8(v_cache, vo + 6 * LANES))
            a7 = fmul_add(a7, s, load_f32x8(v_cache, vo + 7 * LANES))
        scale = fsplat(inv)
        store_f32x8(out, oo + d, fmul(a0, scale))
        store_f32x8(out, oo + d + LANES, fmul(a1, scale))
        store_f32x8(out, oo + d + 2 * LANES, fmul(a2, scale))
        store_f32x8(out, oo + d + 3 * LANES, fmul(a3, scale))
        store_f32x8(out, oo + d + 4 * LANES, fmul(a4, scale))
        store_f32x8(out, oo + d + 5 * LANES, fmul(a5, scale))
        store_f32x8(out, oo + d + 6 * LANES, fmul(a6, scale))
        store_f32x8(out, oo + d + 7 * LANES, fmul(a7, scale))
        d += WIDE
    while d + LANES <= head_dim_v:
        acc = fzero()
        for p in range(m):
            acc = fmul_add(acc, fsplat(scores[p]), load_f32x8(v_cache, vstart + slots[p] * vdim + d))
        store_f32x8(out, oo + d, fmul(acc, fsplat(inv)))
        d += LANES
    for j in range(d, head_dim_v):
        acc1 = np.float32(0.0)
        for p in range(m):
            acc1 += scores[p] * v_cache[vstart + slots[p] * vdim + j]
        out[oo + j] = acc1 * inv


@njit(cache=True, fastmath=False, inline="always")
def alibi_slope(h, n_head, max_bias):
    """ALiBi's slope of head h, as ggml's soft_max (`llamay.kernels.portable.alibi_slope`); 0 without ALiBi."""
    if max_bias <= 0:
        return np.float32(0.0)
    n2 = 1
    while n2 * 2 <= n_head:
        n2 *= 2
    if h < n2:
        return np.float32(np.float32(2.0) ** np.float32(-max_bias / n2)) ** np.float32(h + 1)
    return np.float32(np.float32(2.0) ** np.float32(-(max_bias / 2) / n2)) ** np.float32(2 * (h - n2) + 1)


@njit(cache=True, fastmath=False, parallel=True)
def attention(out, q, k_cache, v_cache, layer, n_slots, batch, shape, kq_scale, causal, window, bias, sinks,
              scores, slots):  # fmt: skip
    """out (n, n_head·head_dim_v). batch = (n, pos, seq, pages, page_off, seq_len, page_size);
    shape = (n_head, n_head_kv, head_dim, head_dim_v); bias = (softcap, max_bias, has_sinks), sinks (n_head,);
    scores (n_chunks, n_slots) float32 and slots (n_chunks, n_slots) int32 scratch, one row per chunk of
    (token, head) pairs."""
    n, pos, seq, pages, page_off, seq_len, page_size = batch
    n_head, n_head_kv, head_dim, head_dim_v = shape
    softcap, max_bias, has_sinks = bias
    group = n_head // n_head_kv
    kdim, vdim = n_head_kv * head_dim, n_head_kv * head_dim_v
    kbase, vbase = layer * n_slots * kdim, layer * n_slots * vdim
    n_work = n * n_head
    n_chunks = min(scores.shape[0], n_work)
    for c in prange(n_chunks):
        last = -1
        m = 0
        for wi in range(c * n_work // n_chunks, (c + 1) * n_work // n_chunks):
            i, h = wi // n_head, wi % n_head
            if i != last:  # the keys token i sees, shared by its heads
                p, s = pos[i], seq[i]
                if causal:
                    lo, hi = (max(0, p - window + 1) if window > 0 else 0), p + 1
                else:
                    lo, hi = 0, seq_len[s]
                m = hi - lo
                dist0 = lo - p
                _fill_slots(slots[c], pages, page_off[s], page_size, lo, hi)
                last = i
            kv = h // group
            sink = sinks[h] if has_sinks else np.float32(-np.inf)
            _one_head(out, (i * n_head + h) * head_dim_v, q, (i * n_head + h) * head_dim,
                      k_cache, kbase + kv * head_dim, kdim, head_dim,
                      v_cache, vbase + kv * head_dim_v, vdim, head_dim_v, kq_scale, m, scores[c], slots[c],
                      softcap, alibi_slope(h, n_head, max_bias), dist0, sink)  # fmt: skip
