"""The shared pieces every architecture's block is wired from: norms, attention, feed-forward, embeddings,
the LM head. Each is a straight line of kernel calls over the State's buffers; shapes in comments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..kernels import Backend
from .config import Activation, ModelConfig, Norm, Rope
from .rope import rope_args
from .weights import AttentionWeights, FFNWeights, NormWeights

if TYPE_CHECKING:
    from ..model.state import State


@dataclass
class Pass:
    """One forward pass over a batch of n tokens."""

    be: Backend
    cfg: ModelConfig
    st: State
    w: Any  # ModelWeights bound to the backend (fields are kernel Weights)
    n: int
    n_out: int = 0  # rows to take logits for (their batch indices are in out_rows)
    out_rows: tuple[int, ...] = ()


def norm(p: Pass, out: Any, x: Any, nw: NormWeights, n: int | None = None) -> None:
    """out (n, n_embd) = norm(x) with the model's norm kind."""
    n = p.n if n is None else n
    if p.cfg.norm == Norm.RMS:
        p.be.rms_norm(out, x, nw.weight, n, p.cfg.n_embd, p.cfg.norm_eps)
    else:
        p.be.layer_norm(out, x, nw.weight, nw.bias, n, p.cfg.n_embd, p.cfg.norm_eps)


def layer_rope(p: Pass, il: int) -> tuple | None:
    """Layer il's be.rope arguments after (x, pos, n, heads), None for a layer without rotary: worked out for every
    layer once per state and the weights it runs with (LongRoPE's factors depend on both), not on every pass (a
    decode step runs the layer loop for one token: these lookups were a good part of its Python)."""
    cache = p.st.__dict__.setdefault("_layer_rope", [None, ()])
    if cache[0] is not p.w:
        cfg, rope = p.cfg, p.cfg.rope
        per_layer = []
        for i in range(cfg.n_layer):
            swa = bool(cfg.swa_layers) and cfg.swa_layers[i]
            nope = bool(cfg.nope_layers) and cfg.nope_layers[i]  # a layer without positions (smollm3)
            args = None
            if rope.kind != Rope.NONE and not nope:
                base, scale = rope.layer(swa)
                y = rope_args(rope, base, scale)  # YaRN's mix and the cos/sin magnitude (rope.py)
                args = (cfg.head_dim, rope.n_dims, base, scale, rope.kind == Rope.NEOX, rope_factors(p), y.ext_factor,
                        y.mscale, y.corr_low, y.corr_high)  # fmt: skip
            per_layer.append(args)
        cache[:] = [p.w, tuple(per_layer)]
    return cache[1][il]


def attention(p: Pass, a: AttentionWeights, il: int, inp: Any, out: Any) -> None:
    """out (n, n_embd) = self-attention of inp (n, n_embd) at layer il, through the KV cache."""
    be, cfg, st, n = p.be, p.cfg, p.st, p.n
    be.qkv(st.q, st.k, st.v, a.q, a.k, a.v, inp, n)  # (n, n_head·head_dim), (n, n_head_kv·head_dim), (.., head_dim_v)
    if a.q_bias is not None:
        be.add_bias(st.q, a.q_bias, n)
        be.add_bias(st.k, a.k_bias, n)
        be.add_bias(st.v, a.v_bias, n)
    if cfg.clamp_kqv:  # olmo's attention.clamp_kqv, after the projections (and their biases), as llama.cpp
        for x, width in ((st.q, cfg.n_q), (st.k, cfg.n_embd_k_gqa), (st.v, cfg.n_embd_v_gqa)):
            be.clamp(x, -cfg.clamp_kqv, cfg.clamp_kqv, n * width)
    if a.q_norm is not None and a.q_norm.weight.n_in == cfg.head_dim:  # QK-norm: RMSNorm of every head
        be.head_rms_norm(st.q, a.q_norm.weight, n, cfg.n_head, cfg.head_dim, cfg.norm_eps)
        be.head_rms_norm(st.k, a.k_norm.weight, n, cfg.n_head_kv, cfg.head_dim, cfg.norm_eps)
    elif a.q_norm is not None:  # over the full width of Q and of K (olmo2): one "head" each
        be.head_rms_norm(st.q, a.q_norm.weight, n, 1, cfg.n_q, cfg.norm_eps)
        be.head_rms_norm(st.k, a.k_norm.weight, n, 1, cfg.n_embd_k_gqa, cfg.norm_eps)
    rope = layer_rope(p, il)
    if rope is not None:
        be.rope(st.q, st.pos, n, cfg.n_head, *rope)
        be.rope(st.k, st.pos, n, cfg.n_head_kv, *rope)
    g = st.kv.group_of[il]  # the KV group holding this layer (window layers apart from global ones)
    li = g.index[il]
    be.kv_store(g.k, li, g.n_slots, g.slots, st.k, n, cfg.n_embd_k_gqa)
    be.kv_store(g.v, li, g.n_slots, g.slots, st.v, n, cfg.n_embd_v_gqa)
    be.attention(
        st.att, st.q, g.k, g.v, li, g.n_slots, g.batch,
        cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.head_dim_v, cfg.kq_scale, cfg.causal, g.window,
        cfg.attn_softcap, cfg.max_alibi_bias, a.sinks,
    )  # fmt: skip
    be.matmul(out, a.o, st.att, n)  # (n, n_embd)
    if a.o_bias is not None:
        be.add_bias(out, a.o_bias, n)


def rope_factors(p: Pass) -> Any:
    """llama.cpp's get_rope_factors: the file's rope_freqs, else LongRoPE's long factors when the context per
    sequence exceeds the original one, else its short ones (None when the file has none)."""
    w = p.w
    if w.rope_freqs is not None:
        return w.rope_freqs
    return w.rope_long if p.st.n_ctx > p.cfg.rope.n_ctx_orig else w.rope_short


def ffn(p: Pass, f: FFNWeights, inp: Any, out: Any) -> None:
    """out (n, n_embd) = feed-forward of inp (n, n_embd): gated (SwiGLU / GeGLU) or up-activation-down."""
    be, cfg, st, n = p.be, p.cfg, p.st, p.n
    count = n * cfg.n_ff
    if f.gate is not None:
        be.matmul(st.ff_a, f.gate, inp, n)  # (n, n_ff)
        be.matmul(st.ff_b, f.up, inp, n)  # (n, n_ff)
        if cfg.act == Activation.SILU:
            be.swiglu(st.ff_a, st.ff_a, st.ff_b, count)
        else:
            be.geglu(st.ff_a, st.ff_a, st.ff_b, count)
    else:
        be.matmul(st.ff_a, f.up, inp, n)
        if f.up_bias is not None:
            be.add_bias(st.ff_a, f.up_bias, n)
        be.gelu(st.ff_a, count)
    be.matmul(out, f.down, st.ff_a, n)  # (n, n_embd)
    if f.down_bias is not None:
        be.add_bias(out, f.down_bias, n)


def embed_tokens(p: Pass) -> None:
    """x (n, n_embd) = token embeddings of the batch, times the model's embedding scale."""
    p.be.get_rows(p.st.x, p.w.token_embd, p.st.ids, p.n)
    if p.cfg.embed_scale != 1.0:
        p.be.scale(p.st.x, p.cfg.embed_scale, p.n * p.cfg.n_embd)


def lm_head(p: Pass) -> None:
    """logits (n_out, n_vocab) for the output rows: final norm, then the LM head."""
    be, st, e = p.be, p.st, p.cfg.n_embd
    for j, row in enumerate(p.out_rows):
        be.copy(st.out_x, j * e, st.x, row * e, e)
    norm(p, st.out_x, st.out_x, p.w.output_norm, p.n_out)
    be.matmul(st.logits, p.w.lm_head, st.out_x, p.n_out)
    if p.w.output_bias is not None:
        be.add_bias(st.logits, p.w.output_bias, p.n_out)
    if p.cfg.logit_scale != 1.0:
        be.scale(st.logits, p.cfg.logit_scale, p.n_out * p.cfg.n_vocab)
    if p.cfg.final_softcap:
        be.softcap(st.logits, p.cfg.final_softcap, p.n_out * p.cfg.n_vocab)
