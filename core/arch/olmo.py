"""`olmo` (OLMo 1): the llama block with LayerNorms that have neither weights nor biases (constant 1s, not in
the file), adjacent-pair rotary, SwiGLU. A file that clamps Q, K and V (`attention.clamp_kqv`, OLMo-7B-0424)
is refused by that key: the clamp is not built."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelError
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
    cfg = decoder_config(f, arch, norm=Norm.LAYER, rope=Rope.NORMAL, params=Params)
    if cfg.params.clamp_kqv:
        raise ModelError(
            f"{f.name}: key {CLAMP_KQV.format(arch=arch)!r} = {cfg.params.clamp_kqv:g}: clamping Q, K and V is "
            "not supported yet (OLMo files without the key run)"
        )
    return cfg


def _weightless(decls: Declaration) -> Declaration:
    """Every norm weight replaced by a constant 1s vector (the file holds none)."""
    norms = ("attn_norm.weight", "ffn_norm.weight", "output_norm.weight")
    return tuple(
        constant(d.name.removesuffix(".weight"), d.slot, 1.0, d.shape[0]) if d.slot in norms else d for d in decls
    )


TENSORS = _weightless(decoder(decoder_block()))
