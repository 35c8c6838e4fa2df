"""`olmo2`: no pre-norms; RMSNorm on each branch's output before the residual add, QK-norm over the full
width of Q and K, NeoX rotary, SwiGLU."""

from __future__ import annotations

from ..gguf import GGUFFile
from .config import ModelConfig, Norm, Rope
from .family import decoder_config
from .params import NoParams
from .tensors import decoder, decoder_block


def config(f: GGUFFile, arch: str = "olmo2", params: type = NoParams) -> ModelConfig:
    return decoder_config(f, arch, norm=Norm.RMS, rope=Rope.NEOX, params=params)


FULL_QK_NORM = dict(qk_norm=True, qk_norm_dim="n_q")  # RMSNorm over all of Q and all of K (olmoe's too)
TENSORS = decoder(decoder_block(pre_norms=False, post_norms=True, **FULL_QK_NORM))
