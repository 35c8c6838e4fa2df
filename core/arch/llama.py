"""`llama`: pre-RMSNorm, rotary (adjacent pairs), GQA, SwiGLU. Also Mistral, TinyLlama, SmolLM, stories."""

from __future__ import annotations

from ..gguf import GGUFFile, Keys
from .binder import Binder
from .config import ModelConfig, Norm, Rope
from .layers import Pass, attention, ffn, norm
from .meta import Meta
from .names import T, weight
from .params import NoParams
from .weights import LayerWeights, ModelWeights, bind_attention, bind_ffn, bind_norm, bind_output


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


def bind(b: Binder, cfg: ModelConfig) -> ModelWeights:
    token_embd, output_norm, output = bind_output(b, cfg)
    layers = tuple(
        LayerWeights(
            attn_norm=bind_norm(b, T.ATTN_NORM, cfg.n_embd, i),
            attn=bind_attention(b, cfg, i),
            ffn_norm=bind_norm(b, T.FFN_NORM, cfg.n_embd, i),
            ffn=bind_ffn(b, cfg, i),
        )
        for i in range(cfg.n_layer)
    )
    rope_freqs = b.optional(weight(T.ROPE_FREQS), (cfg.rope.n_dims // 2,))
    return ModelWeights(token_embd, layers, output_norm, output, rope_freqs=rope_freqs)


def block(p: Pass, layer: LayerWeights, il: int) -> None:
    """Pre-norm residual block: x += attn(norm(x)); x += ffn(norm(x))."""
    st, count = p.st, p.n * p.cfg.n_embd
    norm(p, st.xb, st.x, layer.attn_norm)
    attention(p, layer.attn, il, st.xb, st.xb2)
    p.be.add(st.x, st.x, st.xb2, count)
    norm(p, st.xb, st.x, layer.ffn_norm)
    ffn(p, layer.ffn, st.xb, st.xb2)
    p.be.add(st.x, st.x, st.xb2, count)
