"""`command-r` (Cohere Command-R): a parallel block under one LayerNorm without bias, adjacent-pair rotary,
SwiGLU, a tied head whose logits are multiplied by `logit_scale`."""

from __future__ import annotations

from dataclasses import dataclass

from ..gguf import GGUFFile
from .blocks import parallel
from .config import ModelConfig, Norm, Rope
from .family import decoder_config
from .params import key
from .tensors import decoder, decoder_block

block = parallel


@dataclass(frozen=True)
class Params:
    logit_scale: float = key("{arch}.logit_scale", "float", 1.0, lo=0.0, hi=1e6)


def config(f: GGUFFile, arch: str = "command-r") -> ModelConfig:
    return decoder_config(
        f, arch, norm=Norm.LAYER, rope=Rope.NORMAL, params=Params, logit_scale=lambda m, c, p: p.logit_scale
    )


TENSORS = decoder(decoder_block(ffn_norm=False))
