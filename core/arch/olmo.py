"""`olmo` (OLMo 1): the llama block with LayerNorms that have neither weights nor biases (constant 1s, not in
the file), adjacent-pair rotary, SwiGLU, and Q, K and V clamped to ±`attention.clamp_kqv` when the file says so
(OLMo-7B-0424: 8), as llama.cpp reads that key for olmo."""

from __future__ import annotations

from dataclasses import dataclass

from ..gguf import GGUFFile
from .config import ModelConfig, Norm, Rope
from .family import decoder_config
from .params import key
from .tensors import Declaration, constant, decoder, decoder_block

CLAMP_KQV = "{arch}.attention.clamp_kqv"


@dataclass(frozen=True)
class Params:
    clamp_kqv: float = key(CLAMP_KQV, "float", 0.0, lo=0.0, none=True)  # 0: no clamp


def config(f: GGUFFile, arch: str = "olmo") -> ModelConfig:
    return decoder_config(
        f, arch, norm=Norm.LAYER, rope=Rope.NORMAL, params=Params, clamp_kqv=lambda m, c, p: p.clamp_kqv
    )


def _weightless(decls: Declaration) -> Declaration:
    """Every norm weight replaced by a constant 1s vector (the file holds none)."""
    norms = ("attn_norm.weight", "ffn_norm.weight", "output_norm.weight")
    return tuple(
        constant(d.name.removesuffix(".weight"), d.slot, 1.0, d.shape[0]) if d.slot in norms else d for d in decls
    )


TENSORS = _weightless(decoder(decoder_block()))
