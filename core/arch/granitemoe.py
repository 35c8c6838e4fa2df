"""`granitemoe` (IBM Granite 3 MoE): granite's block and four multipliers with a mixture of experts for its FFN
(softmax router, the chosen experts' weights renormalised), plus an ungated shared expert where the file gives
its width (Granite MoE "shared")."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..gguf import GGUFFile
from . import granite, moe
from .config import ModelConfig
from .tensors import decoder, decoder_block

TENSORS = decoder(moe.replace_ffn(decoder_block(), (*moe.moe_tensors(), *moe.shared_tensors(when=moe.has_shared))))


@dataclass(frozen=True)
class Params(granite.Params, moe.MoEParams):
    norm_w: bool = True


def config(f: GGUFFile, arch: str = "granitemoe") -> ModelConfig:
    cfg = granite.config(f, arch, Params)
    # llama.cpp reads granitemoe's experts as wide as feed_forward_length (the llama layout)
    p = moe.with_ff_exp(moe.check(cfg.params, f.name, arch), cfg.n_ff)
    return dataclasses.replace(cfg, params=p)
