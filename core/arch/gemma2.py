"""`gemma2`: gemma's sandwich block (pre- and post-norms around attention and FFN, GeGLU, embeddings scaled by
√n_embd, NeoX rotary, a tied head) with attention scores and final logits soft-capped (cap·tanh(x / cap)), and
sliding-window attention on every other layer (even layers slide, as llama.cpp's pattern of 2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..gguf import GGUFFile, Keys
from .config import Activation, ModelConfig, Norm, Rope, swa_pattern
from .family import decoder_config
from .meta import MAX_CONTEXT
from .params import key
from .tensors import decoder, decoder_block

SWA_PERIOD = 2  # llama.cpp's gemma2 pattern: layers i with i % 2 < 1 use the sliding window
LAYERS_27B = 46  # llama.cpp scales Gemma-2-27B's queries by 1/sqrt(n_embd / n_head), the others by 1/sqrt(head_dim)


@dataclass(frozen=True)
class Params:
    sliding_window: int = key(Keys.SLIDING_WINDOW, "int", 4096, lo=0, hi=MAX_CONTEXT)  # llama.cpp's default
    attn_logit_softcapping: float = key("{arch}.attn_logit_softcapping", "float", 50.0, none=True)
    final_logit_softcapping: float = key("{arch}.final_logit_softcapping", "float", 30.0, none=True)


def _attn_scale(m, common: dict, p: Params) -> float:
    width = common["n_embd"] // common["n_head"] if common["n_layer"] == LAYERS_27B else common["head_dim"]
    return 1.0 / math.sqrt(width)


def config(f: GGUFFile, arch: str = "gemma2") -> ModelConfig:
    return decoder_config(
        f, arch, norm=Norm.RMS, rope=Rope.NEOX, act=Activation.GELU, params=Params, tied_output=True,
        embed_scale=lambda m, common, p: math.sqrt(common["n_embd"]),
        attn_scale=_attn_scale,
        sliding_window=lambda m, common, p: p.sliding_window,
        swa_layers=lambda m, common, p: swa_pattern(common["n_layer"], SWA_PERIOD),
        attn_softcap=lambda m, common, p: p.attn_logit_softcapping,
        final_softcap=lambda m, common, p: p.final_logit_softcapping,
    )  # fmt: skip


TENSORS = decoder(decoder_block(post_norms=True))
