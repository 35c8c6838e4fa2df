"""`deepseek` (DeepSeek-MoE, V1): the llama block whose FFN is, after some leading dense layers, a mixture of
experts (softmax router, weights scaled by `expert_weights_scale`, not renormalised) plus shared experts every
token runs, ungated."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..gguf import GGUFFile
from . import moe
from .config import ModelConfig
from .llama import config as llama_config
from .meta import MAX_LAYERS, Meta
from .params import key, read_params
from .tensors import decoder, decoder_block


@dataclass(frozen=True)
class Params(moe.MoEParams):
    n_dense_lead: int = key(moe.LEADING_DENSE_BLOCK_COUNT, "int", 0, lo=0, hi=MAX_LAYERS)
    n_expert_shared: int = key(moe.EXPERT_SHARED_COUNT, "int", 0, lo=0, hi=moe.MAX_EXPERTS)
    w_scale: float = key(moe.EXPERT_WEIGHTS_SCALE, "float", 0.0)


def moe_layer(cfg: ModelConfig, il: int) -> bool:
    return il >= cfg.n_dense_lead


def dense_layer(cfg: ModelConfig, il: int) -> bool:
    return il < cfg.n_dense_lead


TENSORS = decoder(moe.replace_ffn(decoder_block(), moe.moe_tensors(shared=True, layers=moe_layer), layers=dense_layer))


def config(f: GGUFFile, arch: str = "deepseek") -> ModelConfig:
    cfg = llama_config(f, arch)
    p = moe.check(read_params(Meta(f, arch), Params), f.name, arch)
    # the shared experts run as one FFN of their summed width (llama.cpp: n_ff_exp · n_expert_shared)
    p = dataclasses.replace(p, n_ff_shexp=p.n_ff_exp * p.n_expert_shared)
    return dataclasses.replace(cfg, params=p)
