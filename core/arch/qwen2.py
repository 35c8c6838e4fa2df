"""`qwen2`: the llama block with biases on Q, K and V, NeoX rotary, and an untied LM head."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..gguf import GGUFFile
from .binder import Binder
from .config import ModelConfig, Rope
from .llama import config as llama_config
from .meta import Meta
from .names import T
from .params import read_params
from .weights import LayerWeights, ModelWeights, bind_attention, bind_ffn, bind_norm, bind_output


@dataclass(frozen=True)
class Params:
    qkv_bias: bool = True
    qk_norm: bool = False


def config(f: GGUFFile, arch: str = "qwen2", params: type = Params) -> ModelConfig:
    cfg = llama_config(f, arch)
    return dataclasses.replace(
        cfg, rope=dataclasses.replace(cfg.rope, kind=Rope.NEOX), params=read_params(Meta(f, arch), params)
    )


def bind(b: Binder, cfg: ModelConfig) -> ModelWeights:
    token_embd, output_norm, output = bind_output(b, cfg)
    layers = tuple(
        LayerWeights(
            attn_norm=bind_norm(b, T.ATTN_NORM, cfg.n_embd, i),
            attn=bind_attention(b, cfg, i, qkv_bias=cfg.params.qkv_bias, qk_norm=cfg.params.qk_norm),
            ffn_norm=bind_norm(b, T.FFN_NORM, cfg.n_embd, i),
            ffn=bind_ffn(b, cfg, i),
        )
        for i in range(cfg.n_layer)
    )
    return ModelWeights(token_embd, layers, output_norm, output)
