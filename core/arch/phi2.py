"""`phi2`: a parallel block (attention and a GELU FFN read one LayerNorm), fused QKV, biases everywhere,
partial NeoX rotary, an LM head with a bias."""

from __future__ import annotations

from ..gguf import GGUFFile
from .config import Activation, ModelConfig, Norm, Rope
from .family import decoder_config
from .tensors import decoder, decoder_block


def config(f: GGUFFile, arch: str = "phi2") -> ModelConfig:
    return decoder_config(f, arch, norm=Norm.LAYER, rope=Rope.NEOX, act=Activation.GELU, gated_ffn=False)


TENSORS = decoder(
    decoder_block(fused_qkv=True, qkv_bias=True, o_bias=True, norm_bias=True, ffn_norm=False, gated=False,
                  ffn_bias=True),
    norm_bias=True,
    output_bias=True,
)  # fmt: skip
