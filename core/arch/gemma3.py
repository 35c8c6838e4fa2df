"""`gemma3`: QK-norm, pre- and post-norms around attention and FFN, GeGLU (tanh GELU), embeddings scaled by
√n_embd, and interleaved sliding-window layers with their own RoPE base (every sixth layer is global)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..gguf import GGUFFile, Keys
from .config import Activation, ModelConfig, Norm, Rope, swa_pattern
from .layers import Pass, attention, ffn, norm
from .meta import MAX_CONTEXT, Meta
from .params import key, read_params
from .tensors import decoder, decoder_block
from .weights import LayerWeights

SWA_PERIOD = 6  # llama.cpp's gemma3 pattern: layers i with i % 6 < 5 use the sliding window
ROPE_BASE_SWA = 10000.0  # local layers' RoPE base; not stored in the GGUF, fixed by the model family


@dataclass(frozen=True)
class Params:
    sliding_window: int = key(Keys.SLIDING_WINDOW, "int", 0, lo=0, hi=MAX_CONTEXT)  # 0: every layer global
    qk_norm: bool = True
    post_norms: bool = True  # norms on the attention and FFN outputs before the residual add


def config(f: GGUFFile, arch: str = "gemma3") -> ModelConfig:
    m = Meta(f, arch)
    common = m.common()
    n_layer = common["n_layer"]
    norm_eps = m.eps(Keys.LAYERNORM_RMS_EPS)
    rope = m.rope(Rope.NEOX, common["head_dim"], ROPE_BASE_SWA, scale_swa=1.0)  # local layers are never scaled
    params = read_params(m, Params)
    return ModelConfig(
        **common,
        norm=Norm.RMS,
        norm_eps=norm_eps,
        rope=rope,
        act=Activation.GELU,
        embed_scale=math.sqrt(common["n_embd"]),
        tied_output=True,
        sliding_window=params.sliding_window,
        swa_layers=swa_pattern(n_layer, SWA_PERIOD),
        params=params,
    )


TENSORS = decoder(decoder_block(qk_norm=True, post_norms=True))


def block(p: Pass, layer: LayerWeights, il: int) -> None:
    """Sandwich norms: x += norm(attn(norm(x))); x += norm(ffn(norm(x)))."""
    st, count = p.st, p.n * p.cfg.n_embd
    norm(p, st.xb, st.x, layer.attn_norm)
    attention(p, layer.attn, il, st.xb, st.xb2)
    norm(p, st.xb2, st.xb2, layer.attn_post_norm)
    p.be.add(st.x, st.x, st.xb2, count)
    norm(p, st.xb, st.x, layer.ffn_norm)
    ffn(p, layer.ffn, st.xb, st.xb2)
    norm(p, st.xb2, st.xb2, layer.ffn_post_norm)
    p.be.add(st.x, st.x, st.xb2, count)
