"""`llama`: pre-RMSNorm, rotary (adjacent pairs), GQA, SwiGLU. Also Mistral, TinyLlama, SmolLM, stories."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..gguf import GGUFFile, Keys
from . import moe
from .config import ModelConfig, Norm, Rope
from .layers import Pass, attention, norm
from .meta import Meta
from .moe import feed_forward
from .names import T, weight
from .params import read_params
from .tensors import decoder, decoder_block, w
from .weights import LayerWeights


@dataclass(frozen=True)
class Params(moe.MoEParams):
    """Mixtral-style files are `llama` with experts (`{arch}.expert_count` > 0): renormalised top-k weights."""

    norm_w: bool = True


def config(f: GGUFFile, arch: str = "llama") -> ModelConfig:
    m = Meta(f, arch)
    common = m.common()
    params = read_params(m, Params)
    if params.n_expert:
        params = moe.with_ff_exp(moe.check(params, f.name, arch), common["n_ff"])
    return ModelConfig(
        **common,
        norm=Norm.RMS,
        norm_eps=m.eps(Keys.LAYERNORM_RMS_EPS),
        rope=m.rope(Rope.NORMAL, common["head_dim"]),
        tied_output=weight(T.OUTPUT) not in f.tensors,
        params=params,
    )


ROPE_FREQS = w(T.ROPE_FREQS, "n_rope_freqs", slot="rope_freqs", required=False)  # llama 3.1 style scaling
# LongRoPE's two sets of factors (phi3 always may have them; llama when its scaling type says longrope)
LONGROPE = (
    w(T.ROPE_FACTORS_LONG, "n_rope_freqs", slot="rope_long", required=False),
    w(T.ROPE_FACTORS_SHORT, "n_rope_freqs", slot="rope_short", required=False),
)
_LONGROPE_LLAMA = tuple(dataclasses.replace(d, when=lambda c: c.rope.scaling == "longrope") for d in LONGROPE)
# dense, or experts in place of the FFN (Mixtral)
TENSORS = (
    *decoder(moe.replace_ffn(decoder_block(), moe.moe_tensors(when=moe.has_experts), when=moe.dense)),
    ROPE_FREQS,
    *_LONGROPE_LLAMA,
)


def block(p: Pass, layer: LayerWeights, il: int) -> None:
    """Pre-norm residual block: x += attn(norm(x)); x += ffn(norm(x)) (or its mixture of experts)."""
    st, count = p.st, p.n * p.cfg.n_embd
    norm(p, st.xb, st.x, layer.attn_norm)
    attention(p, layer.attn, il, st.xb, st.xb2)
    p.be.add(st.x, st.x, st.xb2, count)
    norm(p, st.xb, st.x, layer.ffn_norm)
    feed_forward(p, layer, st.xb, st.xb2)  # dense, or a mixture of experts (moe.py)
    p.be.add(st.x, st.x, st.xb2, count)
