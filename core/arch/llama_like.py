"""Families whose files are llama's block under their own name: only the rotary kind (and, for smollm3, the
NoPE layers) differ. `internlm2` and `mistral3`, `smollm3` rotate adjacent pairs; `exaone` rotates halves."""

from __future__ import annotations

from ..gguf import GGUFFile
from .config import ModelConfig, Norm, Rope
from .family import decoder_config
from .llama import ROPE_FREQS
from .tensors import decoder, decoder_block

NO_ROPE_LAYER_STEP = 4  # smollm3: every fourth layer has no rotary (llama.cpp's n_no_rope_layer_step)


def internlm2_config(f: GGUFFile, arch: str = "internlm2") -> ModelConfig:
    return decoder_config(f, arch, norm=Norm.RMS, rope=Rope.NORMAL)


def mistral3_config(f: GGUFFile, arch: str = "mistral3") -> ModelConfig:
    return decoder_config(f, arch, norm=Norm.RMS, rope=Rope.NORMAL)


def exaone_config(f: GGUFFile, arch: str = "exaone") -> ModelConfig:
    return decoder_config(f, arch, norm=Norm.RMS, rope=Rope.NEOX)


def smollm3_config(f: GGUFFile, arch: str = "smollm3") -> ModelConfig:
    return decoder_config(
        f, arch, norm=Norm.RMS, rope=Rope.NORMAL,
        nope_layers=lambda m, c, p: tuple((i + 1) % NO_ROPE_LAYER_STEP == 0 for i in range(c["n_layer"])),
    )  # fmt: skip


TENSORS = decoder(decoder_block())
TENSORS_ROPE_FREQS = (ROPE_FREQS, *TENSORS)  # files that may carry llama 3.1 style rotary factors
