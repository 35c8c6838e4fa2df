"""`mpt` (MPT-7B/30B) and `bloom`: no rotary, ALiBi biases on the attention scores instead, LayerNorms, fused
QKV, a GELU FFN without a gate, the sequential block. MPT reads its ALiBi max bias from the file and, as MPT-7B,
has no biases; BLOOM has biases everywhere, a LayerNorm right after the embeddings (`token_embd_norm`) and a max
bias of 8 (fixed in llama.cpp, not in the file). MPT may clamp Q, K and V (`attention.clamp_kqv`, as olmo)."""

from __future__ import annotations

from dataclasses import dataclass

from ..gguf import GGUFFile
from . import olmo
from .config import Activation, ModelConfig, Norm, Rope
from .family import decoder_config
from .names import T
from .params import NoParams, key
from .tensors import TOKEN_EMBD, decoder, decoder_block, norm_w

BLOOM_MAX_ALIBI_BIAS = 8.0  # llama.cpp: "TODO: become GGUF KV parameter"


@dataclass(frozen=True)
class Params(olmo.Params):  # olmo's clamp_kqv
    max_alibi_bias: float = key("{arch}.attention.max_alibi_bias", "float")  # required, as llama.cpp reads it


def _alibi(f: GGUFFile, arch: str, params: type, max_bias, **fields) -> ModelConfig:
    return decoder_config(
        f, arch, norm=Norm.LAYER, rope=Rope.NONE, act=Activation.GELU, params=params, gated_ffn=False,
        max_alibi_bias=max_bias, **fields,
    )  # fmt: skip


def config(f: GGUFFile, arch: str = "mpt") -> ModelConfig:
    return _alibi(f, arch, Params, lambda m, common, p: p.max_alibi_bias, clamp_kqv=lambda m, common, p: p.clamp_kqv)


def bloom_config(f: GGUFFile, arch: str = "bloom") -> ModelConfig:
    return _alibi(f, arch, NoParams, BLOOM_MAX_ALIBI_BIAS)


TENSORS = decoder(decoder_block(fused_qkv=True, gated=False))
_BLOOM = decoder(
    decoder_block(fused_qkv=True, qkv_bias=True, o_bias=True, norm_bias=True, gated=False, ffn_bias=True),
    norm_bias=True,
)
BLOOM_TENSORS = (TOKEN_EMBD, *norm_w(T.TOKEN_EMBD_NORM, "embd_norm", with_bias=True), *_BLOOM[1:])
