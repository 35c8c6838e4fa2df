"""`gpt-oss`: the llama block with Q/K/V/O biases, attention sinks (`attn_sinks`: a logit per head in the softmax
denominator), sliding-window attention on every other layer (even layers slide, llama.cpp's pattern of 2), NeoX
rotary (YaRN-scaled in the released files), and a mixture of experts for its FFN: a router with a bias, the top-k
experts by raw logit weighted by a softmax over those k, every expert matrix with a bias, and ggml's swiglu_oai
(the gate capped at 7, the up clamped to ±7, g·sigmoid(1.702 g)·(u + 1)). The FFN's pre-norm is stored as
`post_attention_norm`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..gguf import GGUFFile, Keys
from . import moe
from .config import ModelConfig, Norm, Rope, swa_pattern
from .family import decoder_config
from .meta import MAX_CONTEXT
from .names import T, weight
from .params import key
from .tensors import Declaration, decoder, decoder_block, w

SWA_PERIOD = 2  # llama.cpp: layers i with i % 2 < 1 use the sliding window
SWIGLU_ALPHA, SWIGLU_LIMIT = 1.702, 7.0  # llama.cpp's LLM_FFN_SWIGLU_OAI_MOE constants
ATTN_SINKS = "blk.{bid}.attn_sinks"


@dataclass(frozen=True)
class Params(moe.MoEParams):
    sliding_window: int = key(Keys.SLIDING_WINDOW, "int", lo=0, hi=MAX_CONTEXT)  # required, as llama.cpp reads it
    gating: int = moe.GATING_SOFTMAX_WEIGHT
    swiglu_alpha: float = SWIGLU_ALPHA
    swiglu_limit: float = SWIGLU_LIMIT


def config(f: GGUFFile, arch: str = "gpt-oss") -> ModelConfig:
    cfg = decoder_config(
        f, arch, norm=Norm.RMS, rope=Rope.NEOX, params=Params,
        sliding_window=lambda m, common, p: p.sliding_window,
        swa_layers=lambda m, common, p: swa_pattern(common["n_layer"], SWA_PERIOD),
    )  # fmt: skip
    p = moe.check(cfg.params, f.name, arch)
    return dataclasses.replace(cfg, params=p)


def _gpt_oss_block(block: Declaration) -> Declaration:
    """The block with the sinks after the attention's output projection, and the FFN's pre-norm under the name
    gpt-oss files give it."""
    out = []
    for d in block:
        if d.slot == "ffn_norm.weight":
            d = dataclasses.replace(d, name=weight(T.ATTN_POST_NORM))
        out.append(d)
        if d.slot == "attn.o_bias":
            out.append(w(ATTN_SINKS, "n_head", slot="attn.sinks"))
    return tuple(out)


TENSORS = decoder(
    _gpt_oss_block(moe.replace_ffn(decoder_block(qkv_bias=True, o_bias=True), moe.moe_tensors(biases=True)))
)
