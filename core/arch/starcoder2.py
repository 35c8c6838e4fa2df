"""`starcoder2`: the sequential block with LayerNorms and biases everywhere, NeoX rotary, a GELU FFN."""

from __future__ import annotations

from ..gguf import GGUFFile
from .config import Activation, ModelConfig, Norm, Rope
from .family import decoder_config
from .tensors import decoder, decoder_block


def config(f: GGUFFile, arch: str = "starcoder2") -> ModelConfig:
    return decoder_config(f, arch, norm=Norm.LAYER, rope=Rope.NEOX, act=Activation.GELU, gated_ffn=False)


TENSORS = decoder(decoder_block(qkv_bias=True, o_bias=True, norm_bias=True, gated=False, ffn_bias=True), norm_bias=True)
