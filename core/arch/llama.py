"""`llama`: pre-RMSNorm, rotary (adjacent pairs), GQA, SwiGLU. Also Mistral, TinyLlama, SmolLM, stories."""

from __future__ import annotations

from ..gguf import GGUFFile, Keys
from .config import ModelConfig, Norm, Rope
from .layers import Pass, attention, norm
from .meta import Meta
from .moe import feed_forward
from .names import T, weight
from .params import NoParams
from .tensors import decoder, decoder_block, w
from .weights import LayerWeights


def config(f: GGUFFile, arch: str = "llama") -> ModelConfig:
    m = Meta(f, arch)
    common = m.common()
    return ModelConfig(
        **common,
        norm=Norm.RMS,
        norm_eps=m.eps(Keys.LAYERNORM_RMS_EPS),
        rope=m.rope(Rope.NORMAL, common["head_dim"]),
        tied_output=weight(T.OUTPUT) not in f.tensors,
        params=NoParams(),
    )


ROPE_FREQS = w(T.ROPE_FREQS, "n_rope_freqs", slot="rope_freqs", required=False)  # llama 3.1 style scaling
TENSORS = (ROPE_FREQS, *decoder(decoder_block()))


def block(p: Pass, layer: LayerWeights, il: int) -> None:
    """Pre-norm residual block: x += attn(norm(x)); x += ffn(norm(x)) (or its mixture of experts)."""
    st, count = p.st, p.n * p.cfg.n_embd
    norm(p, st.xb, st.x, layer.attn_norm)
    attention(p, layer.attn, il, st.xb, st.xb2)
    p.be.add(st.x, st.x, st.xb2, count)
    norm(p, st.xb, st.x, layer.ffn_norm)
    feed_forward(p, layer, st.xb, st.xb2)  # dense, or a mixture of experts (moe.py)
    p.be.add(st.x, st.x, st.xb2, count)
