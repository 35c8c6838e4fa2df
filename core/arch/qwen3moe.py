"""`qwen3moe`: the qwen3 block (QK-norm, NeoX rotary) with a mixture of experts for its FFN (softmax router, the
chosen experts' weights renormalised to sum to one)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..gguf import GGUFFile
from . import moe
from .config import ModelConfig
from .qwen2 import config as qwen2_config
from .tensors import decoder, decoder_block

TENSORS = decoder(moe.replace_ffn(decoder_block(qk_norm=True), moe.moe_tensors()))


@dataclass(frozen=True)
class Params(moe.MoEParams):
    qkv_bias: bool = False
    qk_norm: bool = True
    norm_w: bool = True


def config(f: GGUFFile, arch: str = "qwen3moe") -> ModelConfig:
    cfg = qwen2_config(f, arch, Params)
    p = moe.check(cfg.params, f.name, arch)
    if not p.n_ff_exp:  # llama.cpp's qwen3moe default: the dense width shared among the used experts
        p = dataclasses.replace(p, n_ff_exp=cfg.n_ff // p.n_expert_used)
    return dataclasses.replace(cfg, params=p)
