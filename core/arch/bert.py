"""`bert`: an encoder for embeddings. Token + position + token-type embeddings, LayerNorm, post-norm blocks
(norm after each residual add), biases everywhere, GELU FFN without a gate, pooled output."""

from __future__ import annotations

from ..errors import ModelError
from ..gguf import GGUFFile, Keys
from .binder import Binder
from .blocks import LayerWeights, ModelWeights, bind_attention, bind_ffn, bind_norm
from .config import POOLING_TYPES, Activation, Meta, ModelConfig, Norm, Rope, RopeConfig
from .names import T, weight

TOKEN_TYPE_COUNT = "tokenizer.ggml.token_type_count"


def config(f: GGUFFile, arch: str = "bert") -> ModelConfig:
    m = Meta(f, arch)
    pooling_id = m.int(Keys.POOLING_TYPE, 1)
    if pooling_id not in POOLING_TYPES:
        raise ModelError(f"{f.name}: unknown {m.key(Keys.POOLING_TYPE)} {pooling_id} (known: {sorted(POOLING_TYPES)})")
    return ModelConfig(
        **m.common(),
        norm=Norm.LAYER,
        norm_eps=m.float(Keys.LAYERNORM_EPS),
        rope=RopeConfig(kind=Rope.NONE),
        act=Activation.GELU,
        gated_ffn=False,
        qkv_bias=True,
        causal=bool(m.get(Keys.CAUSAL, False)),
        pooling=POOLING_TYPES[pooling_id],
    )


def bind(b: Binder, cfg: ModelConfig) -> ModelWeights:
    n_types = int(b.f.get(TOKEN_TYPE_COUNT, 2))
    layers = tuple(
        LayerWeights(
            attn=bind_attention(b, cfg, i, qkv_bias=True, o_bias=True),
            attn_out_norm=bind_norm(b, T.ATTN_OUT_NORM, cfg.n_embd, i, with_bias=True),
            ffn=bind_ffn(b, cfg, i, gated=False, biases=True),
            layer_out_norm=bind_norm(b, T.LAYER_OUT_NORM, cfg.n_embd, i, with_bias=True),
        )
        for i in range(cfg.n_layer)
    )
    return ModelWeights(
        token_embd=b.get(weight(T.TOKEN_EMBD), (cfg.n_embd, cfg.n_vocab)),
        layers=layers,
        token_types=b.get(weight(T.TOKEN_TYPES), (cfg.n_embd, n_types)),
        pos_embd=b.get(weight(T.POS_EMBD), (cfg.n_embd, cfg.n_ctx_train)),
        embd_norm=bind_norm(b, T.TOKEN_EMBD_NORM, cfg.n_embd, with_bias=True),
    )
