"""`falcon` (Falcon-7B style): a parallel block under one LayerNorm with bias, fused QKV (multi-query), NeoX
rotary, a GELU FFN without biases. Falcon-40B's second norm (`attn_norm_2`) is not wired: the audit refuses it."""

from __future__ import annotations

from ..gguf import GGUFFile
from .config import Activation, ModelConfig, Norm, Rope
from .family import decoder_config
from .tensors import decoder, decoder_block


def config(f: GGUFFile, arch: str = "falcon") -> ModelConfig:
    return decoder_config(f, arch, norm=Norm.LAYER, rope=Rope.NEOX, act=Activation.GELU, gated_ffn=False)


TENSORS = decoder(decoder_block(fused_qkv=True, norm_bias=True, ffn_norm=False, gated=False), norm_bias=True)
