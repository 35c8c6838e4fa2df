"""`gemma` (Gemma 1): the llama block with GeGLU, NeoX rotary, embeddings scaled by √n_embd, a tied head."""

from __future__ import annotations

import math

from ..gguf import GGUFFile
from .config import Activation, ModelConfig, Norm, Rope
from .family import decoder_config
from .tensors import decoder, decoder_block


def config(f: GGUFFile, arch: str = "gemma") -> ModelConfig:
    return decoder_config(
        f, arch, norm=Norm.RMS, rope=Rope.NEOX, act=Activation.GELU, tied_output=True,
        embed_scale=lambda m, common, p: math.sqrt(common["n_embd"]),
    )  # fmt: skip


TENSORS = decoder(decoder_block())
