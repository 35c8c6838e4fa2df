"""`qwen3`: the qwen2 block without QKV biases, with per-head RMSNorm on Q and K (QK-norm)."""

from __future__ import annotations

from dataclasses import dataclass

from ..gguf import GGUFFile
from .config import ModelConfig
from .qwen2 import config as qwen2_config
from .tensors import decoder, decoder_block

TENSORS = decoder(decoder_block(qk_norm=True))


@dataclass(frozen=True)
class Params:
    qkv_bias: bool = False
    qk_norm: bool = True


def config(f: GGUFFile, arch: str = "qwen3") -> ModelConfig:
    return qwen2_config(f, arch, Params)
