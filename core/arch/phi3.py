"""`phi3` (Phi-3, Phi-4): the llama block with one fused QKV matrix, one fused gate/up matrix, NeoX rotary.
Its `attention.sliding_window` (2047 in Phi-3-mini) is not applied, as llama.cpp does not apply it (the tiny
model has a window of 8 and matches llama.cpp with every layer global). LongRoPE: `rope_factors_long` and
`rope_factors_short`, chosen by context length against `rope.scaling.original_context_length`, and the
`rope.scaling.attn_factor` its converter writes."""

from __future__ import annotations

from ..gguf import GGUFFile
from .config import ModelConfig, Norm, Rope
from .family import decoder_config
from .llama import LONGROPE
from .tensors import decoder, decoder_block


def config(f: GGUFFile, arch: str = "phi3") -> ModelConfig:
    return decoder_config(f, arch, norm=Norm.RMS, rope=Rope.NEOX)


TENSORS = (*decoder(decoder_block(fused_qkv=True, fused_gate_up=True)), *LONGROPE)
