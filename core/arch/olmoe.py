"""`olmoe` (OLMoE): the llama block with olmo2's QK-norm over the full width of Q and K and NeoX rotary, and a
mixture of experts for its FFN (softmax router, the chosen experts' weights not renormalised)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..gguf import GGUFFile
from . import moe
from .config import ModelConfig
from .olmo2 import FULL_QK_NORM
from .olmo2 import config as olmo2_config
from .tensors import decoder, decoder_block

TENSORS = decoder(moe.replace_ffn(decoder_block(**FULL_QK_NORM), moe.moe_tensors()))


@dataclass(frozen=True)
class Params(moe.MoEParams):
    norm_w: bool = False


def config(f: GGUFFile, arch: str = "olmoe") -> ModelConfig:
    cfg = olmo2_config(f, arch, Params)
    # llama.cpp's olmoe experts are as wide as feed_forward_length unless the file says otherwise
    p = moe.with_ff_exp(moe.check(cfg.params, f.name, arch), cfg.n_ff)
    return dataclasses.replace(cfg, params=p)
