"""Weights of the 32-element block types repacked at load time in strips of eight rows, and their matmul.

In a file a row's blocks follow one another, and a row dot keeps 8 float lanes per block (ggml's vec_dot
order) because one row's integer dot of a block ends as 8 partial sums. Eight rows side by side instead give,
per block, one integer sum per row in one vector: lane vector l holds quad l (elements 4l..4l+3) of each of the
eight rows, so eight `dot4_add`s with quad l of the activation broadcast sum the whole block for all eight rows,
exactly, and one conversion and one FMA add it to the rows' float sums (llama.cpp's repacked gemv / gemm, as
it runs Q4_0, IQ4_NL and Q4_K on x86, has this order). Both a single token and a batch go through the same
code, so decode and prefill still agree bit for bit; a batch unpacks each strip-block once for all its tokens.

Strip s, block b is one record of `record_bytes` at (s·nb + b)·record_bytes:
    quants   NIBBLES (Q4_0, Q4_1, IQ4_NL): 4 planes of 32 bytes, plane j lane r = bytes 4j..4j+3 of row r's
             packed nibbles (low nibbles: quad j, high nibbles: quad j + 4), as in the file;
             BYTES (Q5_0, Q5_1, Q8_0): 8 lane vectors of 32 bytes, the quants as unsigned bytes (so Q8_0 keeps
             its size, Q5_0 / Q5_1 grow from 22 / 24 to 34 / 36 bytes a block: their fifth bits are unpacked);
    d        8 fp16 (row r's block scale), as in the file;
    m        8 fp16, only for the types with a min (Q4_1, Q5_1).
Quants are unsigned, stored as q + K where the type's value is d·(q - K) (K = 8 / 16 for Q4_0 / Q5_0, 128 for
Q8_0's int8 and IQ4_NL's levels); the kernel subtracts K·Σx of the activation block, in integers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from llamay.quants.layout import Block

from .activations import QK8_0, quantize_q8
from .elementwise import swiglu
from .quantops import bits_of, dot4_add, iadd, iq4_levels_biased, isplat, splat_quad
from .simd import (
    fadd_rows,
    fma_i32_rows,
    fma_rows,
    fmul,
    fsplat,
    fzero,
    izero,
    load_f16x8,
    load_f32x8,
    load_u8x32,
    prefetch,
    store_f32x8,
)

QK = QK8_0
ROWS = 8  # rows in a strip: the lanes of a vector
LANE = 32  # bytes of a lane vector (a quad of quants for each of the eight rows)
LANES = QK // 4  # lane vectors per block
NIBBLES, NIBBLES_IQ4, BYTES = 0, 1, 2  # how a record holds its quants
SCALES = 2 * ROWS  # bytes of eight fp16 scales
ACC = 2 * ROWS  # floats of scratch per token: the rows' sums and their mins' sums
CHUNK_ROWS = 4096  # rows repacked at a time
# bytes ahead of the record in use whose cache lines the matmul asks for: a weight streams from memory once per
# token, and the hardware prefetcher alone leaves the loads waiting (a qwen3moe's Q4_0 decode: 1.25x at 1 thread,
# 1.1x at 2 against no prefetch; 1024 and 4096 bytes gained less than 2048)
PREFETCH_AHEAD = 2048


@dataclass(frozen=True)
class StripFormat:
    fmt: int  # NIBBLES, NIBBLES_IQ4 or BYTES
    offset: int  # K: the type's value is d·(q - K), with q the stored unsigned quant
    has_min: bool  # a second fp16 per block (Q4_1, Q5_1): value d·q + m

    @property
    def quant_bytes(self) -> int:
        return LANE * (LANES if self.fmt == BYTES else LANES // 2)

    @property
    def record_bytes(self) -> int:
        return self.quant_bytes + SCALES * (2 if self.has_min else 1)


# A type's format is in its entry of the traits table (`Traits.strip`, matmul_legacy.TRAITS).


# -- repacking (numpy, once per weight at load) ------------------------------------------------------------------


def _field(blocks: np.ndarray, block: Block, name: str, size: int) -> np.ndarray:
    at = block.offset[name]
    return blocks[..., at : at + size]


def _side_by_side(v: np.ndarray, n_strips: int) -> np.ndarray:
    """(n_out, nb, k) items → (n_strips, nb, k, ROWS): item k of block b of the strip's eight rows together."""
    _, nb, k = v.shape
    return np.ascontiguousarray(v.reshape(n_strips, ROWS, nb, k).transpose(0, 2, 3, 1))


def repack(f: StripFormat, block: Block, raw: np.ndarray, n_in: int, n_out: int) -> np.ndarray:
    """The weight's bytes (n_out rows of nb blocks of `block`, as in the file) as strip records in format f
    (module docstring), CHUNK_ROWS rows at a time so that the temporaries stay small beside a large embedding."""
    nb = n_in // QK
    blocks = raw[: n_out * nb * block.size].reshape(n_out, nb, block.size)
    out = np.empty((n_out // ROWS, nb, f.record_bytes), np.uint8)
    for r0 in range(0, n_out, CHUNK_ROWS):
        r1 = min(n_out, r0 + CHUNK_ROWS)
        _repack_rows(f, block, blocks[r0:r1], out[r0 // ROWS : r1 // ROWS])
    return out.reshape(-1)


def _repack_rows(f: StripFormat, block: Block, blocks: np.ndarray, out: np.ndarray) -> None:
    n_strips = out.shape[0]
    if f.fmt == BYTES:
        if "qh" not in block.offset:  # Q8_0: the quants are whole bytes already
            q = _field(blocks, block, "qs", QK) ^ np.uint8(f.offset)  # int8 + 128, as unsigned bytes
        else:  # Q5_0 / Q5_1: low nibbles (elements 0..15), high nibbles (16..31), bit j of qh is element j's 5th
            qs = _field(blocks, block, "qs", QK // 2)
            qh = _field(blocks, block, "qh", 4).copy().view("<u4")
            high = ((qh >> np.arange(QK, dtype=np.uint32)) & 1).astype(np.uint8) << 4
            q = np.concatenate([qs & 0xF, qs >> 4], axis=-1) | high
        quants = _side_by_side(np.ascontiguousarray(q).view("<u4"), n_strips)  # (strips, nb, lane, row) quads
    else:
        quants = _side_by_side(_field(blocks, block, "qs", QK // 2).copy().view("<u4"), n_strips)
    out[..., : f.quant_bytes] = quants.view(np.uint8).reshape(n_strips, -1, f.quant_bytes)
    for i, name in enumerate(("d", "m") if f.has_min else ("d",)):
        h = _side_by_side(_field(blocks, block, name, 2).copy().view("<u2"), n_strips)
        at = f.quant_bytes + SCALES * i
        out[..., at : at + SCALES] = h.view(np.uint8).reshape(n_strips, -1, SCALES)


# -- the matmul ----------------------------------------------------------------------------------------------------


@njit(cache=True, fastmath=False, inline="always")
def _nibble_lanes(ws, o, j, fmt):
    """Lane vectors j and j + 4 of a NIBBLES record: plane j's low and high nibbles (IQ4_NL: their levels)."""
    plane = load_u8x32(ws, o + LANE * j)
    lo, hi = bits_of(plane, 0, 15), bits_of(plane, 4, 15)
    if fmt == NIBBLES_IQ4:
        return iq4_levels_biased(lo), iq4_levels_biased(hi)
    return lo, hi


@njit(cache=True, fastmath=False, inline="always")
def _block_sums(l0, l1, l2, l3, l4, l5, l6, l7, xq, xo, correction):
    """i32x8: lane r = Σ over the block of row r's quants (lane vectors l0..l7) × the activation's (the block at
    xq[xo]) + correction; two chains of four `dot4_add`s, for latency."""
    s0 = dot4_add(izero(), l0, splat_quad(xq, xo))
    s1 = dot4_add(isplat(correction), l4, splat_quad(xq, xo + 16))
    s0 = dot4_add(s0, l1, splat_quad(xq, xo + 4))
    s1 = dot4_add(s1, l5, splat_quad(xq, xo + 20))
    s0 = dot4_add(s0, l2, splat_quad(xq, xo + 8))
    s1 = dot4_add(s1, l6, splat_quad(xq, xo + 24))
    s0 = dot4_add(s0, l3, splat_quad(xq, xo + 12))
    s1 = dot4_add(s1, l7, splat_quad(xq, xo + 28))
    return iadd(s0, s1)


@njit(cache=True, fastmath=False, inline="always")
def _strip(dst, at, stride, ws, s, fmt, offset, has_min, t0, n, n_in, xq, xd, xs, xsum, a):
    """Rows 8s .. 8s+7 of w (repacked: ws, fmt / offset / has_min) dotted with tokens t0 .. t0+n-1 of the
    quantised x (xq, xd, xs, xsum: `quantize_q8`'s, rows of n_in), into dst[at + (i - t0)·stride ..]; a (n·ACC)
    holds the sums. Per block: the lane vectors unpacked once, then every token."""
    nb = n_in // QK
    qb = LANE * (LANES if fmt == BYTES else LANES // 2)
    rb = qb + SCALES * (2 if has_min else 1)
    for i in range(n):
        store_f32x8(a, ACC * i, fzero())
        store_f32x8(a, ACC * i + ROWS, fzero())
    for b in range(nb):
        o = (s * nb + b) * rb
        ahead = o + PREFETCH_AHEAD  # the record's bytes there, a cache line (64 bytes) at a time
        prefetch(ws, ahead)
        prefetch(ws, ahead + 64)
        if rb > 128:
            prefetch(ws, ahead + 128)
        if rb > 192:
            prefetch(ws, ahead + 192)
        if fmt == BYTES:  # the eight lane vectors, in registers for every token
            l0, l1, l2, l3 = (
                load_u8x32(ws, o),
                load_u8x32(ws, o + LANE),
                load_u8x32(ws, o + 2 * LANE),
                load_u8x32(ws, o + 3 * LANE),
            )
            l4, l5, l6, l7 = (
                load_u8x32(ws, o + 4 * LANE),
                load_u8x32(ws, o + 5 * LANE),
                load_u8x32(ws, o + 6 * LANE),
                load_u8x32(ws, o + 7 * LANE),
            )
        else:
            l0, l4 = _nibble_lanes(ws, o, 0, fmt)
            l1, l5 = _nibble_lanes(ws, o, 1, fmt)
            l2, l6 = _nibble_lanes(ws, o, 2, fmt)
            l3, l7 = _nibble_lanes(ws, o, 3, fmt)
        d = load_f16x8(ws, o + qb)
        for i in range(n):
            k = (t0 + i) * nb + b
            sums = _block_sums(l0, l1, l2, l3, l4, l5, l6, l7, xq, (t0 + i) * n_in + QK * b, -offset * xsum[k])
            scale = fmul(d, fsplat(xd[k]))
            store_f32x8(a, ACC * i, fma_i32_rows(load_f32x8(a, ACC * i), sums, scale))
        if has_min:
            m = load_f16x8(ws, o + qb + SCALES)
            for i in range(n):
                k = ACC * i + ROWS
                store_f32x8(a, k, fma_rows(m, fsplat(xs[(t0 + i) * nb + b]), load_f32x8(a, k)))
    for i in range(n):
        store_f32x8(dst, at + i * stride, fadd_rows(load_f32x8(a, ACC * i), load_f32x8(a, ACC * i + ROWS)))


@njit(cache=True, fastmath=False, parallel=True)
def matmul_strips(out, ws, fmt, offset, has_min, n_out, x, n, n_in, xq, xd, xs, xsum, acc):
    """out (n, n_out) = x (n, n_in) · wᵀ for a weight repacked by `repack` (ws, its format's fmt / offset /
    has_min). x is quantised into xq (n, n_in) int8, xd / xs (n, nb) (Q8_0 / Q8_1: d, and fp16(d·Σq)) and
    xsum (n, nb) int32 (Σq, for the -K·Σq term); acc (threads, n·ACC) float32 holds each thread's sums."""
    quantize_q8(x, n, n_in, xq, xd, xs, xsum)
    n_strips = n_out // ROWS
    n_chunks = min(acc.shape[0], n_strips)
    for c in prange(n_chunks):
        for s in range(c * n_strips // n_chunks, (c + 1) * n_strips // n_chunks):
            _strip(out, s * ROWS, n_out, ws, s, fmt, offset, has_min, 0, n, n_in, xq, xd, xs, xsum, acc[c])


@njit(cache=True, fastmath=False, parallel=True)
def qkv_strips(q, k, v, wq, wk, wv, fmt, offset, has_min, n_q, n_k, n_v, x, n, n_in, xq, xd, xs, xsum, acc):
    """`Backend.qkv` over three weights repacked in one format: q (n, n_q), k (n, n_k), v (n, n_v) = x (n, n_in)
    times each. x is quantised once and the strips of all three matrices are shared among the threads in one
    parallel loop; each strip is `matmul_strips`' `_strip`, so each value is bit for bit the separate matmul's."""
    quantize_q8(x, n, n_in, xq, xd, xs, xsum)
    sq, sk = n_q // ROWS, n_k // ROWS
    units = sq + sk + n_v // ROWS
    n_chunks = min(acc.shape[0], units)
    for c in prange(n_chunks):
        for u in range(c * units // n_chunks, (c + 1) * units // n_chunks):
            if u < sq:
                _strip(q, u * ROWS, n_q, wq, u, fmt, offset, has_min, 0, n, n_in, xq, xd, xs, xsum, acc[c])
            elif u < sq + sk:
                s = u - sq
                _strip(k, s * ROWS, n_k, wk, s, fmt, offset, has_min, 0, n, n_in, xq, xd, xs, xsum, acc[c])
            else:
                s = u - sq - sk
                _strip(v, s * ROWS, n_v, wv, s, fmt, offset, has_min, 0, n, n_in, xq, xd, xs, xsum, acc[c])


@njit(cache=True, fastmath=False, parallel=True)
def moe_strips(out, mats, downs, fmt, offset, has_min, weights, k, x, n_embd, n_ff, h, xq, xd, xs, xsum, acc):
    """One token's chosen experts (`Backend.moe_experts`) over repacked weights: mats (2k): the k experts' gate
    strips then their up strips, downs (k): their down strips. x (n_embd) is quantised once; the rows of all 2k
    gate and up matrices are shared among the threads in one parallel loop (h (2, k, n_ff) gets them), SwiGLU
    and the k rows of its output quantised, then the down matrices' rows, each strip's k expert rows weighted
    and summed in expert order by the thread that made them. The same `_strip` as `matmul_strips`, so each
    value is bit for bit what k separate matmuls give."""
    quantize_q8(x, 1, n_embd, xq, xd, xs, xsum)
    per = n_ff // ROWS
    units = 2 * k * per
    n_chunks = min(acc.shape[0], units)
    for c in prange(n_chunks):
        for u in range(c * units // n_chunks, (c + 1) * units // n_chunks):
            m, s = u // per, u % per
            _strip(h, m * n_ff + s * ROWS, 0, mats[m], s, fmt, offset, has_min, 0, 1, n_embd, xq, xd, xs, xsum, acc[c])
    swiglu(h, h, h[k * n_ff :], k * n_ff)
    quantize_q8(h, k, n_ff, xq, xd, xs, xsum)
    n_strips = n_embd // ROWS
    n_chunks = min(acc.shape[0], n_strips)
    for c in prange(n_chunks):
        a = acc[c]
        for s in range(c * n_strips // n_chunks, (c + 1) * n_strips // n_chunks):
            for r in range(ROWS):
                out[s * ROWS + r] = np.float32(0.0)
            for j in range(k):
                _strip(a, ACC, 0, downs[j], s, fmt, offset, has_min, j, 1, n_ff, xq, xd, xs, xsum, a)
                w = np.float32(weights[j])
                for r in range(ROWS):
                    out[s * ROWS + r] = out[s * ROWS + r] + np.float32(w * a[ACC + r])
