"""`gpt2` and `starcoder` (StarCoder 1, SantaCoder): learned absolute positions, LayerNorms and biases
everywhere, fused QKV, a GELU FFN, the sequential block."""

from __future__ import annotations

from ..gguf import GGUFFile
from .config import Activation, ModelConfig, Norm, Rope
from .family import decoder_config
from .names import T
from .tensors import TOKEN_EMBD, decoder, decoder_block, w


def config(f: GGUFFile, arch: str = "gpt2") -> ModelConfig:
    return decoder_config(f, arch, norm=Norm.LAYER, rope=Rope.NONE, act=Activation.GELU, gated_ffn=False)


POS_EMBD = w(T.POS_EMBD, "n_embd", "n_ctx_train", slot="pos_embd")
_FILE = decoder(
    decoder_block(fused_qkv=True, qkv_bias=True, o_bias=True, norm_bias=True, gated=False, ffn_bias=True),
    norm_bias=True,
)
TENSORS = (TOKEN_EMBD, POS_EMBD, *_FILE[1:])  # the positions follow the token embeddings in the file
