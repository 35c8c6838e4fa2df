"""`granite` (IBM Granite 3 dense): the llama block with four multipliers: embeddings, each block output before
its residual add, the attention scores (`attention.scale` for 1/√head_dim), and the logits (divided)."""

from __future__ import annotations

from dataclasses import dataclass

from ..gguf import GGUFFile
from .config import ModelConfig, Norm, Rope
from .family import decoder_config
from .params import key
from .tensors import decoder, decoder_block

SCALE_RANGE = dict(lo=0.0, hi=1e6)  # multipliers are positive and finite


@dataclass(frozen=True)
class Params:
    embedding_scale: float = key("{arch}.embedding_scale", "float", 1.0, **SCALE_RANGE)
    residual_scale: float = key("{arch}.residual_scale", "float", 1.0, **SCALE_RANGE)
    attention_scale: float = key("{arch}.attention.scale", "float", 0.0, none=True, **SCALE_RANGE)
    logit_divisor: float = key("{arch}.logit_scale", "float", None, **SCALE_RANGE)  # required, as in llama.cpp
    rope_finetuned: bool = key("{arch}.rope.scaling.finetuned", "bool", True)  # granite's switch for rotary at all


def config(f: GGUFFile, arch: str = "granite", params: type = Params) -> ModelConfig:
    """`params`: Params or a class deriving from it (granitemoe's, with the experts' keys)."""
    return decoder_config(
        f, arch, norm=Norm.RMS, rope=Rope.NORMAL, params=params,
        embed_scale=lambda m, c, p: p.embedding_scale,
        residual_scale=lambda m, c, p: p.residual_scale,
        attn_scale=lambda m, c, p: p.attention_scale,
        logit_scale=lambda m, c, p: 1.0 / p.logit_divisor,
        nope_layers=lambda m, c, p: () if p.rope_finetuned else (True,) * c["n_layer"],
    )  # fmt: skip


TENSORS = decoder(decoder_block())
