"""`qwen2moe`: the qwen2 block (QKV biases, NeoX rotary) with a mixture of experts for its FFN (softmax router,
weights not renormalised) plus a shared expert every token runs, scaled by its own sigmoid gate."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..gguf import GGUFFile
from . import moe
from .config import ModelConfig
from .qwen2 import config as qwen2_config
from .tensors import decoder, decoder_block

TENSORS = decoder(moe.replace_ffn(decoder_block(qkv_bias=True), moe.moe_tensors(shared=True, shared_gate=True)))


@dataclass(frozen=True)
class Params(moe.MoEParams):
    qkv_bias: bool = True
    qk_norm: bool = False


def config(f: GGUFFile, arch: str = "qwen2moe") -> ModelConfig:
    cfg = qwen2_config(f, arch, Params)
    p = moe.check(cfg.params, f.name, arch)
    # llama.cpp's qwen2moe defaults: the dense width shared among the used experts, the shared expert the dense
    p = dataclasses.replace(p, n_ff_exp=p.n_ff_exp or cfg.n_ff // p.n_expert_used, n_ff_shexp=p.n_ff_shexp or cfg.n_ff)
    return dataclasses.replace(cfg, params=p)
