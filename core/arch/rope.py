"""Rotary scaling as llama.cpp applies it: the four numbers the rope kernel takes besides base and scale.

llama.cpp's context turns the file's `rope.scaling.*` keys into `ext_factor` (1 for YaRN, else 0) and an
`attn_factor`; ggml's rope then mixes, pair by pair, the interpolated angle (position · scale) with the
extrapolated one (position) over a ramp between two "correction dims", and multiplies cos and sin by a magnitude.
Everything here is float32 arithmetic in ggml's order (`f32` after each step), so the kernels get the very values
ggml computes. For YaRN, llama.cpp sets attn_factor = mscale(factor) / (1 + 0.1 ln factor) · rope.scaling.attn_factor
and the kernel multiplies it by 1 + 0.1 ln(1 / scale) again: net cos and sin grow by 1 + 0.1 ln factor (times the
file's attn_factor). LongRoPE (phi3) is per-frequency factors chosen by context (see `layers.rope_factors`) and
the file's attn_factor, with no mixing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from ..quants.minifloat import f32
from .config import RopeConfig

YARN_MSCALE = f32(0.1)  # llama.cpp's magnitude slope, 0.1f: 1 + 0.1 ln(factor)


@dataclass(frozen=True)
class RopeArgs:
    """What `Backend.rope` takes after `neox` and the factors: YaRN's mix, the cos/sin magnitude, the ramp."""

    ext_factor: float = 0.0
    mscale: float = 1.0
    corr_low: float = 0.0
    corr_high: float = 0.0


def _corr_dim(n_dims: int, n_ctx_orig: int, n_rot: float, base: float) -> float:
    """ggml_rope_yarn_corr_dim: the dimension whose wavelength spans n_rot turns over the original context."""
    turns = f32(f32(f32(n_rot * 2.0) * f32(math.pi)))
    ratio = f32(n_ctx_orig / turns)
    return f32(f32(n_dims * f32(math.log(ratio))) / f32(2.0 * f32(math.log(base))))


def corr_dims(n_dims: int, n_ctx_orig: int, base: float, beta_fast: float, beta_slow: float) -> tuple[float, float]:
    """ggml_rope_yarn_corr_dims: the ramp's first and last pair index, clamped to the rotated dimensions."""
    start = math.floor(_corr_dim(n_dims, n_ctx_orig, beta_fast, base))
    end = math.ceil(_corr_dim(n_dims, n_ctx_orig, beta_slow, base))
    return float(max(0, start)), float(min(n_dims - 1, end))


def _mscale(scale: float) -> float:
    """llama.cpp's get_mscale(1 / scale, 1): 1 + 0.1 ln(factor), 1 when the factor is at most 1."""
    factor = f32(1.0 / scale)
    return 1.0 if factor <= 1.0 else f32(f32(YARN_MSCALE * f32(math.log(factor))) + 1.0)


def context_attn_factor(rope: RopeConfig) -> float:
    """cparams.yarn_attn_factor as llama_context computes it (the files here carry no yarn_log_multiplier: only
    the refused deepseek2 family reads it)."""
    attn = 1.0
    if rope.ext_factor != 0.0:
        factor = f32(1.0 / rope.scale)
        attn = f32(_mscale(rope.scale) * f32(1.0 / f32(1.0 + f32(YARN_MSCALE * f32(math.log(factor))))))
    return f32(attn * rope.attn_factor)


@cache
def rope_args(rope: RopeConfig, base: float, scale: float) -> RopeArgs:
    """The kernel's YaRN arguments for a layer rotating with this base and scale (ggml_compute_forward_rope's
    corr_dims and rope_yarn's mscale; with ext_factor 0 the kernel rotates as plain rope, cos and sin times
    attn_factor)."""
    attn = context_attn_factor(rope)
    if rope.ext_factor == 0.0:
        return RopeArgs(0.0, attn)
    low, high = corr_dims(rope.n_dims, rope.n_ctx_orig, base, rope.beta_fast, rope.beta_slow)
    mscale = f32(attn * f32(1.0 + f32(YARN_MSCALE * f32(math.log(f32(1.0 / scale))))))
    return RopeArgs(f32(rope.ext_factor), mscale, low, high)
