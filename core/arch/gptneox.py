"""`gptneox` (GPT-NeoX, Pythia): LayerNorms with biases, fused QKV with bias, partial NeoX rotary, a GELU FFN
with biases; attention and FFN in parallel when `use_parallel_residual` says so (Pythia), else in sequence."""

from __future__ import annotations

from dataclasses import dataclass

from ..gguf import GGUFFile
from .blocks import parallel, sequential
from .config import Activation, ModelConfig, Norm, Rope
from .family import decoder_config
from .layers import Pass
from .params import key
from .tensors import decoder, decoder_block
from .weights import LayerWeights


@dataclass(frozen=True)
class Params:
    parallel: bool = key("{arch}.use_parallel_residual", "bool", False)  # llama.cpp's default when absent


def config(f: GGUFFile, arch: str = "gptneox") -> ModelConfig:
    return decoder_config(
        f, arch, norm=Norm.LAYER, rope=Rope.NEOX, act=Activation.GELU, gated_ffn=False, params=Params
    )  # fmt: skip


TENSORS = decoder(
    decoder_block(fused_qkv=True, qkv_bias=True, o_bias=True, norm_bias=True, gated=False, ffn_bias=True),
    norm_bias=True,
)


def block(p: Pass, layer: LayerWeights, il: int) -> None:
    (parallel if p.cfg.params.parallel else sequential)(p, layer, il)
