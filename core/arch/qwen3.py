"""`qwen3`: the qwen2 block without QKV biases, with per-head RMSNorm on Q and K (QK-norm)."""

from __future__ import annotations

import dataclasses

from ..gguf import GGUFFile
from .config import ModelConfig
from .qwen2 import bind
from .qwen2 import config as qwen2_config

__all__ = ["bind", "config"]


def config(f: GGUFFile, arch: str = "qwen3") -> ModelConfig:
    return dataclasses.replace(qwen2_config(f, arch), qkv_bias=False, qk_norm=True)
