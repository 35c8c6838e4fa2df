"""`qwen2`: the llama block with biases on Q, K and V, NeoX rotary, and an untied LM head."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..gguf import GGUFFile
from .config import ModelConfig, Rope
from .llama import config as llama_config
from .meta import Meta
from .params import read_params
from .tensors import decoder, decoder_block


@dataclass(frozen=True)
class Params:
    qkv_bias: bool = True
    qk_norm: bool = False


def config(f: GGUFFile, arch: str = "qwen2", params: type = Params) -> ModelConfig:
    cfg = llama_config(f, arch)
    return dataclasses.replace(
        cfg, rope=dataclasses.replace(cfg.rope, kind=Rope.NEOX), params=read_params(Meta(f, arch), params)
    )


TENSORS = decoder(decoder_block(qkv_bias=True))
