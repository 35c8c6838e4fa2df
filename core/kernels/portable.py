"""The portable backend: every kernel in pure Python over `array('f')`. Slow, always available, the definition.

Each optimised backend (numba, wasm) is tested against these functions. Float sums run in Python floats
(double) and are stored as float32, so the reference is at least as accurate as any fast path.
"""

from __future__ import annotations

import math
import operator
import struct
from array import array
from typing import Any

from ..ggml_types import GGMLType, block_size, row_bytes, type_size
from ..quants import SUPPORTED_DEQUANTIZE, dequantize
from ..quants.minifloat import f32 as _f32
from . import compose
from .activations import QK8_0, VEC_DOT_TYPE, round_row
from .gelu import gelu as _gelu
from .interface import BatchView, Weight
from .pda import pda as _pda

# weights up to this many elements are dequantised once and kept (the stories260K fixtures, norms, biases)
CACHE_ELEMENTS = 1 << 22
_HALF = struct.Struct("<e")
EXP_MAX = 88.7  # float32 exp overflows above this
MIN_OFFSET = 2  # byte offset of the fp16 min `m` in Q4_1 / Q5_1 blocks (after the fp16 scale d)


def alibi_slope(h: int, n_head: int, max_bias: float) -> float:
    """ALiBi's slope of head h, as ggml's soft_max computes it (float32): heads below the largest power of two
    n2 <= n_head get m0^(h+1), the rest m1^(2(h - n2) + 1), with m0 = 2^(-max_bias / n2), m1 = 2^(-max_bias / 2n2)."""
    n2 = 1 << (n_head.bit_length() - 1)
    if h < n2:
        return _f32(_f32(2.0 ** _f32(-max_bias / n2)) ** (h + 1))
    return _f32(_f32(2.0 ** _f32(-(max_bias / 2.0) / n2)) ** (2 * (h - n2) + 1))


def _yarn_mix(j: int, ext_factor: float, low: float, high: float) -> float:
    """ggml's rope_yarn_ramp(low, high, 2j) · ext_factor in float32: 1 for the fast pairs below `low`
    (extrapolated), 0 above `high` (interpolated), linear between."""
    y = _f32((j - low) / max(_f32(0.001), _f32(high - low)))
    return _f32(_f32(1.0 - min(1.0, max(0.0, y))) * ext_factor)


def _zeros(n: int) -> array:
    return array("f", bytes(4 * n))


class _Handle:
    """A weight's bytes and, for small weights, its float32 values decoded once."""

    def __init__(self, t: GGMLType, data: memoryview, n_in: int, n_out: int) -> None:
        self.type = t
        self.data = data
        self.row_bytes = row_bytes(t, n_in)
        self.vec_dot_type = VEC_DOT_TYPE.get(t, GGMLType.F32)
        self.values: array | None = None
        if n_in * n_out <= CACHE_ELEMENTS:
            self.values = dequantize(t, data, n_in * n_out)

    def row(self, r: int, n_in: int) -> array:
        if self.values is not None:
            return self.values[r * n_in : (r + 1) * n_in]
        return dequantize(self.type, self.data[r * self.row_bytes : (r + 1) * self.row_bytes], n_in)

    def block_mins(self, r: int) -> list[float]:
        """The fp16 min `m` of each block of row r (Q4_1, Q5_1)."""
        start = r * self.row_bytes
        ts = type_size(self.type)
        return [_HALF.unpack_from(self.data, b + MIN_OFFSET)[0] for b in range(start, start + self.row_bytes, ts)]


class PortableBackend:
    name = "portable"
    runnable_types = SUPPORTED_DEQUANTIZE - {GGMLType.I8, GGMLType.I16, GGMLType.I32, GGMLType.I64}

    # -- memory ---------------------------------------------------------------------------------------------

    def alloc_f32(self, n: int) -> array:
        return _zeros(n)

    def alloc_i32(self, n: int) -> array:
        return array("i", bytes(4 * n))

    def write_f32(self, buf: array, values: Any, offset: int = 0) -> None:
        vals = array("f", values)
        buf[offset : offset + len(vals)] = vals

    def write_i32(self, buf: array, values: Any, offset: int = 0) -> None:
        vals = array("i", values)
        buf[offset : offset + len(vals)] = vals

    def read_f32(self, buf: array, offset: int, n: int) -> list[float]:
        return buf[offset : offset + n].tolist()

    def read_bytes(self, buf: array, offset: int, n: int) -> bytes:
        return buf[offset : offset + n].tobytes()

    def copy(self, dst: array, dst_off: int, src: array, src_off: int, n: int) -> None:
        dst[dst_off : dst_off + n] = src[src_off : src_off + n]

    def sync(self) -> None:  # every kernel runs when it is called
        pass

    # -- weights --------------------------------------------------------------------------------------------

    def bind(self, name: str, t: GGMLType, shape: tuple[int, ...], data: memoryview) -> Weight:
        n_in = shape[0]
        n_out = 1
        for d in shape[1:]:
            n_out *= d
        if n_in % block_size(t):
            raise ValueError(f"{name}: rows of {n_in} are not whole {t.name} blocks")
        return Weight(name, t, n_in, n_out, _Handle(t, data, n_in, n_out))

    # -- kernels --------------------------------------------------------------------------------------------

    def get_rows(self, out: array, w: Weight, ids: array, n: int) -> None:
        d = w.n_in
        for i in range(n):
            out[i * d : (i + 1) * d] = w.handle.row(ids[i], d)

    def matmul(self, out: array, w: Weight, x: array, n: int) -> None:
        h: _Handle = w.handle
        d_in, d_out = w.n_in, w.n_out
        xq = _zeros(d_in)
        with_mins = h.vec_dot_type == GGMLType.Q8_1
        corr = _zeros(d_in // QK8_0)
        mul = operator.mul
        for i in range(n):
            round_row(h.vec_dot_type, x[i * d_in : (i + 1) * d_in], xq, corr)
            base = i * d_out
            for r in range(d_out):
                acc = sum(map(mul, h.row(r, d_in), xq))
                if with_mins:  # Q4_1/Q5_1 · Q8_1: the min term uses Q8_1's fp16-rounded block sum
                    acc += sum(map(mul, h.block_mins(r), corr))
                out[base + r] = acc

    def qkv(self, q: array, k: array, v: array, wq: Weight, wk: Weight, wv: Weight, x: array, n: int) -> None:
        compose.qkv(self.matmul, q, k, v, wq, wk, wv, x, n)

    def add_bias(self, x: array, b: Weight, n: int) -> None:
        bias = b.handle.row(0, b.n_in)
        d = b.n_in
        for i in range(n):
            x[i * d : (i + 1) * d] = array("f", map(operator.add, x[i * d : (i + 1) * d], bias))

    def rms_norm(self, out: array, x: array, w: Weight | None, n: int, dim: int, eps: float) -> None:
        g = w.handle.row(0, dim) if w is not None else None
        for i in range(n):
            row = x[i * dim : (i + 1) * dim]
            # ggml sums squares in ggml_float (double), then scales in float32
            s = 1.0 / math.sqrt(sum(v * v for v in row) / dim + eps)
            scaled = array("f", (v * s for v in row))
            out[i * dim : (i + 1) * dim] = array("f", map(operator.mul, scaled, g)) if g is not None else scaled

    def layer_norm(self, out: array, x: array, w: Weight, b: Weight | None, n: int, dim: int, eps: float) -> None:
        g = w.handle.row(0, dim)
        beta = b.handle.row(0, dim) if b is not None else None
        for i in range(n):
            row = x[i * dim : (i + 1) * dim]
            mean = sum(row) / dim
            centred = array("f", (v - mean for v in row))
            var = sum(v * v for v in centred) / dim
            s = 1.0 / math.sqrt(var + eps)
            y = array("f", (v * s * gv for v, gv in zip(centred, g, strict=True)))
            if beta is not None:
                y = array("f", map(operator.add, y, beta))
            out[i * dim : (i + 1) * dim] = y

    def head_rms_norm(self, x: array, w: Weight, n: int, n_heads: int, head_dim: int, eps: float) -> None:
        self.rms_norm(x, x, w, n * n_heads, head_dim, eps)

    def rope(
        self,
        x: array,
        pos: array,
        n: int,
        n_heads: int,
        head_dim: int,
        n_rot: int,
        base: float,
        scale: float,
        neox: bool,
        freq_factors: Weight | None,
        ext_factor: float,
        mscale: float,
        corr_low: float,
        corr_high: float,
    ) -> None:
        ff = freq_factors.handle.row(0, n_rot // 2) if freq_factors is not None else None
        half = n_rot // 2
        # ggml: theta_scale = base^(-2/n_rot) in float32, theta multiplied by it once per pair, in float32
        theta_scale = _f32(base ** (-2.0 / n_rot))
        width = n_heads * head_dim
        mix = [_yarn_mix(j, ext_factor, corr_low, corr_high) for j in range(half)] if ext_factor else None
        for i in range(n):
            theta = _f32(float(pos[i]))
            cos_sin = []
            for j in range(half):
                t = theta / ff[j] if ff is not None else theta
                ti = _f32(t * scale)
                if mix is not None:  # YaRN: interpolated and extrapolated angles mixed (ggml's rope_yarn)
                    ti = _f32(_f32(ti * _f32(1.0 - mix[j])) + _f32(_f32(t) * mix[j]))
                cos_sin.append((math.cos(ti) * mscale, math.sin(ti) * mscale))
                theta = _f32(theta * theta_scale)
            row = i * width
            for h in range(n_heads):
                o = row + h * head_dim
                for j, (c, s) in enumerate(cos_sin):
                    a, b = (o + j, o + j + half) if neox else (o + 2 * j, o + 2 * j + 1)
                    x0, x1 = x[a], x[b]
                    x[a] = x0 * c - x1 * s
                    x[b] = x0 * s + x1 * c

    def clamp(self, x: array, lo: float, hi: float, count: int) -> None:
        lo, hi = _f32(lo), _f32(hi)
        x[:count] = array("f", (max(min(v, hi), lo) for v in x[:count]))

    def scale(self, x: array, s: float, count: int) -> None:
        x[:count] = array("f", (v * s for v in x[:count]))

    def add(self, out: array, a: array, b: array, count: int) -> None:
        out[:count] = array("f", map(operator.add, a[:count], b[:count]))

    def swiglu(self, out: array, gate: array, up: array, count: int) -> None:
        out[:count] = array("f", (g / (1.0 + math.exp(-g)) * u for g, u in zip(gate[:count], up[:count], strict=True)))

    def swiglu_oai(self, out: array, gate: array, up: array, count: int, alpha: float, limit: float) -> None:
        a, lim = _f32(alpha), _f32(limit)
        vals = []
        for g, u in zip(gate[:count], up[:count], strict=True):
            g = min(g, lim)
            u = min(max(u, -lim), lim)
            t = _f32(a * -g)
            vals.append(_f32(g / _f32(1.0 + (math.exp(t) if t < EXP_MAX else math.inf))) * (u + 1.0))
        out[:count] = array("f", vals)

    def geglu(self, out: array, gate: array, up: array, count: int) -> None:
        out[:count] = array("f", (_gelu(g) * u for g, u in zip(gate[:count], up[:count], strict=True)))

    def gelu(self, x: array, count: int) -> None:
        x[:count] = array("f", map(_gelu, x[:count]))

    def kv_store(self, cache: array, layer: int, n_slots: int, slots: array, src: array, n: int, dim: int) -> None:
        base = layer * n_slots * dim
        for i in range(n):
            o = base + slots[i] * dim
            cache[o : o + dim] = src[i * dim : (i + 1) * dim]

    def softcap(self, x: array, cap: float, count: int) -> None:
        x[:count] = array("f", (cap * math.tanh(v / cap) for v in x[:count]))

    def attention(
        self,
        out: array,
        q: array,
        k_cache: array,
        v_cache: array,
        layer: int,
        n_slots: int,
        batch: BatchView,
        n_head: int,
        n_head_kv: int,
        head_dim: int,
        head_dim_v: int,
        kq_scale: float,
        causal: bool,
        window: int,
        softcap: float,
        max_bias: float,
        sinks: Weight | None,
    ) -> None:
        group = n_head // n_head_kv
        kdim, vdim = n_head_kv * head_dim, n_head_kv * head_dim_v
        kbase, vbase = layer * n_slots * kdim, layer * n_slots * vdim
        ps = batch.page_size
        sink = sinks.handle.row(0, n_head) if sinks is not None else None
        slopes = [alibi_slope(h, n_head, max_bias) for h in range(n_head)] if max_bias > 0 else None
        for i in range(batch.n):
            p, s = batch.pos[i], batch.seq[i]
            if causal:
                lo, hi = (max(0, p - window + 1) if window else 0), p + 1
            else:
                lo, hi = 0, batch.seq_len[s]
            off = batch.page_off[s]
            slots = [batch.pages[off + j // ps] * ps + j % ps for j in range(lo, hi)]
            for h in range(n_head):
                kv = h // group
                qh = q[(i * n_head + h) * head_dim : (i * n_head + h + 1) * head_dim]
                scores = [
                    sum(
                        map(
                            operator.mul,
                            qh,
                            k_cache[kbase + sl * kdim + kv * head_dim : kbase + sl * kdim + (kv + 1) * head_dim],
                        )
                    )
                    * kq_scale
                    for sl in slots
                ]
                if softcap:
                    scores = [softcap * math.tanh(v / softcap) for v in scores]
                if slopes is not None:  # ggml's mask holds -|p_j - p|, soft_max adds slope times it
                    scores = [v - slopes[h] * abs(lo + j - p) for j, v in enumerate(scores)]
                m = max(scores) if sink is None else max(*scores, sink[h])
                e = [math.exp(v - m) for v in scores]
                total = sum(e) + (math.exp(sink[h] - m) if sink is not None else 0.0)
                acc = [0.0] * head_dim_v
                for wgt, sl in zip(e, slots, strict=True):
                    vo = vbase + sl * vdim + kv * head_dim_v
                    vrow = v_cache[vo : vo + head_dim_v]
                    p_ = wgt / total
                    acc = [a + p_ * v for a, v in zip(acc, vrow, strict=True)]
                o = (i * n_head + h) * head_dim_v
                out[o : o + head_dim_v] = array("f", acc)

    def argmax(self, x: array, offset: int, n: int) -> int:
        seg = x[offset : offset + n]
        return max(range(n), key=seg.__getitem__)

    def top_k(self, x: array, offset: int, n: int, k: int) -> list[tuple[int, float]]:
        seg = x[offset : offset + n]
        order = sorted(range(n), key=lambda j: (-seg[j], j))[:k]
        return [(j, seg[j]) for j in order]

    def mean_pool(self, out: array, x: array, n: int, dim: int) -> None:
        out[:dim] = array("f", (sum(x[i * dim + j] for i in range(n)) / n for j in range(dim)))

    def l2_normalize(self, x: array, dim: int) -> None:
        norm = math.sqrt(sum(v * v for v in x[:dim]))
        if norm > 0:
            x[:dim] = array("f", (v / norm for v in x[:dim]))

    def gather_rows(self, out: array, x: array, rows: array, n: int, dim: int) -> None:
        for j in range(n):
            r = rows[j] * dim
            out[j * dim : (j + 1) * dim] = x[r : r + dim]

    def add_rows_scaled(self, out: array, x: array, rows: array, scales: array, n: int, dim: int) -> None:
        for j in range(n):
            r = rows[j] * dim
            products = array("f", (scales[j] * v for v in x[j * dim : (j + 1) * dim]))  # float32, as ggml_mul
            out[r : r + dim] = array("f", map(operator.add, out[r : r + dim], products))

    def moe_route(
        self,
        ids: array,
        weights: array,
        logits: array,
        router: Weight,
        x: array,
        k: int,
        gating: int,
        norm_w: bool,
        w_scale: float,
    ) -> None:
        compose.moe_route(self, self.matmul, ids, weights, logits, router, x, k, gating, norm_w, w_scale)

    def moe_experts(
        self,
        out: array,
        gate: tuple,
        up: tuple,
        down: tuple,
        x: array,
        ids: array,
        weights: array,
        k: int,
        h: array,
        y: array,
    ) -> None:
        f, dim = gate[0].n_out, down[0].n_out
        a, b = array("f", bytes(4 * f)), array("f", bytes(4 * f))
        out[:dim] = array("f", bytes(4 * dim))
        row0 = array("i", [0])  # the one row of add_rows_scaled
        for j in range(k):  # the sequence arch.moe runs for one row, expert by expert
            e = ids[j]
            self.matmul(a, gate[e], x, 1)
            self.matmul(b, up[e], x, 1)
            self.swiglu(a, a, b, f)
            self.matmul(y, down[e], a, 1)
            self.add_rows_scaled(out, y, row0, weights[j : j + 1], 1, dim)

    def pda(self, vocab: array, arena: array) -> int:
        return _pda(vocab, arena)
