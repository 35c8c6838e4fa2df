"""The kernel interface: what a backend implements so the model code can run on it.

The model is a straight line of these calls over buffers allocated once per State (the ops are declared once, in
`ops.py`: names, parameters in order, kinds; the methods below are checked against it). Buffers are flat float32
(or int32) arrays owned by the backend (`array('f')` for portable, numpy for numba, pointers into linear memory
for wasm); the model never indexes them, it only passes them with their dimensions. Every 2-D buffer is
row-major `(rows, dim)`: row i of an activation buffer is token i of the batch.

Numerics follow llama.cpp's CPU backend, so greedy text can match it: a matmul first rounds each activation
row to the weight type's `vec_dot_type` (Q8_0, Q8_1, Q8_K, F16, BF16 or F32; see `activations.py`), then takes
dot products with the weight rows. `portable` is the definition; every other backend is tested against it.

The KV cache is paged. A cache holds `(n_layer, n_slots, kv_dim)` float32; the slot of position p of sequence s
is `pages[page_off[s] + p // page_size] * page_size + p % page_size`. A batch is a set of tokens, each with a
position and a sequence; attention of token i reads the keys of its own sequence only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..ggml_types import GGMLType

Buf = Any  # a float32 buffer of the backend
IBuf = Any  # an int32 buffer of the backend
Experts = tuple  # an MoE layer's 3-D tensor bound as one Weight per expert (`model._experts`)


@dataclass
class Weight:
    """A tensor bound to a backend: a matrix `(n_out rows of n_in)` or a vector `(n_in,)` (n_out = 1).

    `handle` is the backend's own view of the bytes (zero-copy where the platform allows).
    """

    name: str
    type: GGMLType
    n_in: int
    n_out: int
    handle: Any


@dataclass
class BatchView:
    """Where each token of a batch sits, as backend int32 buffers (held and filled by `core/kv/group.py`).

    pos[i], seq[i] for token i < n; for sequence s: page_off[s] (into pages), seq_len[s] (keys a non-causal
    sequence attends to). slots[i] is the KV slot token i writes.
    """

    n: int
    pos: IBuf
    seq: IBuf
    slots: IBuf
    pages: IBuf
    page_off: IBuf
    seq_len: IBuf
    page_size: int


class Backend(Protocol):
    name: str
    runnable_types: frozenset[GGMLType]

    # -- memory ---------------------------------------------------------------------------------------------
    def alloc_f32(self, n: int) -> Buf: ...
    def alloc_i32(self, n: int) -> IBuf: ...
    def write_f32(self, buf: Buf, values: Any, offset: int = 0) -> None: ...
    def write_i32(self, buf: IBuf, values: Any, offset: int = 0) -> None: ...
    def read_f32(self, buf: Buf, offset: int, n: int) -> list[float]: ...
    def read_bytes(self, buf: IBuf, offset: int, n: int) -> bytes:
        """The raw bytes of n int32 words of buf from word `offset` (a bitmask, read in one piece)."""

    def copy(self, dst: Buf, dst_off: int, src: Buf, src_off: int, n: int) -> None: ...
    def sync(self) -> None:
        """A flush point: every kernel called so far has run when this returns. `forward` calls it at the end of
        a pass, so a backend may queue its kernels and run a whole pass as one command list (kernel threads over
        shared memory, see docs/wasm.md); the backends that run each kernel when it is called return at once. Such
        a backend runs `copy` (buffer to buffer) in order with the kernels, and flushes before the host reads or
        writes a buffer and before a kernel with a result (argmax, top_k)."""

    # -- weights --------------------------------------------------------------------------------------------
    def bind(self, name: str, t: GGMLType, shape: tuple[int, ...], data: memoryview) -> Weight: ...

    # -- kernels (shapes in comments; n = rows of the batch) ------------------------------------------------
    def get_rows(self, out: Buf, w: Weight, ids: IBuf, n: int) -> None:
        """out (n, w.n_in) = rows ids[0..n) of w, dequantised."""

    def matmul(self, out: Buf, w: Weight, x: Buf, n: int) -> None:
        """out (n, w.n_out) = x (n, w.n_in) · wᵀ, with x rounded to w's vec_dot_type first."""

    def qkv(self, q: Buf, k: Buf, v: Buf, wq: Weight, wk: Weight, wv: Weight, x: Buf, n: int) -> None:
        """q (n, wq.n_out), k (n, wk.n_out), v (n, wv.n_out) = x (n, n_in) times each weight, bit for bit the
        three `matmul`s (`compose.qkv`); the weights share n_in."""

    def add_bias(self, x: Buf, b: Weight, n: int) -> None:
        """x (n, b.n_in) += b, broadcast over rows."""

    def rms_norm(self, out: Buf, x: Buf, w: Weight | None, n: int, dim: int, eps: float) -> None:
        """out (n, dim) = x / sqrt(mean(x²) + eps) · w."""

    def layer_norm(self, out: Buf, x: Buf, w: Weight, b: Weight | None, n: int, dim: int, eps: float) -> None:
        """out (n, dim) = (x - mean) / sqrt(var + eps) · w + b."""

    def head_rms_norm(self, x: Buf, w: Weight, n: int, n_heads: int, head_dim: int, eps: float) -> None:
        """In place, each head of x (n, n_heads·head_dim) RMS-normalised and scaled by w (head_dim)."""

    def rope(
        self,
        x: Buf,
        pos: IBuf,
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
        """In place rotary embedding of x (n, n_heads·head_dim) at positions pos[0..n): pair j turns by
        pos / base^(2j/n_rot) / freq_factors[j] · scale, YaRN-mixed with the unscaled angle by
        ramp(j) · ext_factor (ramp 1 below corr_low, 0 above corr_high), cos and sin times mscale (ggml's
        rope_yarn; ext_factor 0 and mscale 1 are plain rope)."""

    def scale(self, x: Buf, s: float, count: int) -> None:
        """x[0..count) *= s."""

    def add(self, out: Buf, a: Buf, b: Buf, count: int) -> None:
        """out = a + b elementwise (out may be a)."""

    def swiglu(self, out: Buf, gate: Buf, up: Buf, count: int) -> None:
        """out = silu(gate) · up."""

    def swiglu_oai(self, out: Buf, gate: Buf, up: Buf, count: int, alpha: float, limit: float) -> None:
        """out = g·sigmoid(alpha·g) · (u + 1) with g = min(gate, limit), u = clamp(up, ±limit) (gpt-oss, ggml's
        swiglu_oai)."""

    def geglu(self, out: Buf, gate: Buf, up: Buf, count: int) -> None:
        """out = gelu(gate) · up (tanh GELU)."""

    def gelu(self, x: Buf, count: int) -> None:
        """In place tanh GELU."""

    def softcap(self, x: Buf, cap: float, count: int) -> None:
        """In place x = cap·tanh(x / cap) (gemma2's final logits)."""

    def kv_store(self, cache: Buf, layer: int, n_slots: int, slots: IBuf, src: Buf, n: int, dim: int) -> None:
        """cache[layer, slots[i], :] = src[i, :] for i < n; cache is (n_layer, n_slots, dim)."""

    def attention(
        self,
        out: Buf,
        q: Buf,
        k_cache: Buf,
        v_cache: Buf,
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
        """out (n, n_head·head_dim_v): softmax(s) · v over the keys of each token's sequence, the score of key j
        s = q·k_j·kq_scale, then softcap·tanh(s / softcap) (softcap 0: none; gemma2), then - slope_h·|p_j - p|
        (ALiBi, max_bias 0: none; slope_h as ggml's soft_max, `alibi_slope`); sinks (n_head,): a logit per head
        joined to the softmax's denominator only (gpt-oss; None: none).

        Causal: token at position p sees positions max(0, p - window + 1) .. p (window 0: all of 0 .. p).
        Non-causal: it sees positions 0 .. seq_len[seq] - 1. Query head h reads KV head h // (n_head / n_head_kv).
        """

    def argmax(self, x: Buf, offset: int, n: int) -> int: ...

    def top_k(self, x: Buf, offset: int, n: int, k: int) -> list[tuple[int, float]]:
        """The k largest values of x[offset .. offset+n) as (index, value), largest first, ties by index."""

    def mean_pool(self, out: Buf, x: Buf, n: int, dim: int) -> None:
        """out (dim) = mean of the n rows of x (n, dim)."""

    def l2_normalize(self, x: Buf, dim: int) -> None: ...

    def gather_rows(self, out: Buf, x: Buf, rows: IBuf, n: int, dim: int) -> None:
        """out (n, dim): out[j] = x[rows[j]] (the batch rows routed to one expert)."""

    def add_rows_scaled(self, out: Buf, x: Buf, rows: IBuf, scales: Buf, n: int, dim: int) -> None:
        """out[rows[j]] += scales[j] · x[j] for j < n, rows (n, dim) of x; the product rounded to float32 before the
        sum, as ggml multiplies an expert's output by its weight, then adds."""

    def moe_route(
        self,
        ids: IBuf,
        weights: Buf,
        logits: Buf,
        router: Weight,
        x: Buf,
        k: int,
        gating: int,
        norm_w: bool,
        w_scale: float,
    ) -> None:
        """One row's router: logits (router.n_out) = x (router.n_in) · routerᵀ, ids (k) = the k most probable
        experts in id order, weights (k) = theirs, bit for bit `compose.moe_route` (gating: compose.GATING_*)."""

    def moe_experts(
        self,
        out: Buf,
        gate: Experts,
        up: Experts,
        down: Experts,
        x: Buf,
        ids: IBuf,
        weights: Buf,
        k: int,
        h: Buf,
        y: Buf,
    ) -> None:
        """One token's mixture of experts: out (n_embd) = Σ_j weights[j] · down[e]·swiglu(gate[e]·x, up[e]·x),
        e = ids[j], for j = 0 .. k-1 in that order from 0 (the products rounded to float32 before each sum, as
        add_rows_scaled), x (n_embd) one row; every matmul rounds its input as `matmul` does. Bit for bit the
        gather / matmul / swiglu / add_rows_scaled sequence of `arch.moe` over one row. Scratch: h (2, k, n_ff)
        the gate and up activations, y (n_embd) one expert's output."""

    def clamp(self, x: Buf, lo: float, hi: float, count: int) -> None:
        """x[0..count) clamped to [lo, hi] in place (lo and hi float32, as ggml_clamp)."""

    def pda(self, vocab: IBuf, arena: IBuf) -> int:
        """Run the grammar automaton's operation named in `arena` (a start state, a token, a token mask) over a
        vocabulary's tables (layouts and results: `pda_layout.py`; the reference: `pda.py`); returns DONE, or
        NEED_GROW (the caller grows the arena and calls again) or LIMIT_PASSED."""
