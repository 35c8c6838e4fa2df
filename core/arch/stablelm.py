"""`stablelm` (StableLM 2, StableLM-3B-4E1T): LayerNorms with biases, partial NeoX rotary, SwiGLU, Q/K/V
biases where the file has them (StableLM 2 1.6B) and none where it has not (3B)."""

from __future__ import annotations

import dataclasses

from ..gguf import GGUFFile
from .config import ModelConfig, Norm, Rope
from .family import decoder_config
from .tensors import decoder, decoder_block


def config(f: GGUFFile, arch: str = "stablelm") -> ModelConfig:
    return decoder_config(f, arch, norm=Norm.LAYER, rope=Rope.NEOX)


TENSORS = tuple(
    dataclasses.replace(d, required=False) if d.slot.endswith("_bias") else d
    for d in decoder(decoder_block(qkv_bias=True, norm_bias=True), norm_bias=True)
)
