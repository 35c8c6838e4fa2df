"""The config of a decoder built from the shared pieces: what differs between families is data (the norm kind
and its epsilon key, the rotary kind, the activation, the architecture's own Params), read here once."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..gguf import GGUFFile, Keys
from .config import Activation, ModelConfig, Norm, Rope, RopeConfig
from .meta import Meta
from .names import T, weight
from .params import NoParams, read_params

EPS_KEY = {Norm.RMS: Keys.LAYERNORM_RMS_EPS, Norm.LAYER: Keys.LAYERNORM_EPS}


def decoder_config(
    f: GGUFFile,
    arch: str,
    *,
    norm: Norm,
    rope: Rope,
    act: Activation = Activation.SILU,
    params: type = NoParams,
    **fields: Any,
) -> ModelConfig:
    """A decoder's ModelConfig: the common keys, its norm's epsilon, rotary (partial when
    `rope.dimension_count` says so), an LM head tied when the file has no `output.weight`; `fields` are
    ModelConfig fields the family fixes, or callables of (Meta, common, params) computing them."""
    m = Meta(f, arch)
    common = m.common()
    norm_eps = m.eps(EPS_KEY[norm])
    rope_cfg = m.rope(rope, common["head_dim"]) if rope != Rope.NONE else RopeConfig(kind=Rope.NONE)
    p = read_params(m, params)
    values = {k: v(m, common, p) if callable(v) else v for k, v in fields.items()}
    values.setdefault("tied_output", weight(T.OUTPUT) not in f.tensors)
    cfg = ModelConfig(**common, norm=norm, norm_eps=norm_eps, rope=rope_cfg, act=act, params=p)
    return dataclasses.replace(cfg, **values)
