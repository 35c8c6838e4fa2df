"""Rotary scaling (`core/arch/rope.py`): the YaRN arguments the kernel gets, and the scaling Meta reads (the
tiny models' llama.cpp goldens check the whole; tests/arch/test_variants.py that the scaling changes them)."""

from __future__ import annotations

import math

import pytest

from llamay.arch import load_config
from llamay.arch.config import Rope, RopeConfig
from llamay.arch.rope import RopeArgs, corr_dims, rope_args
from llamay.gguf import GGUFFile
from tests.models.tiny import ROPE_ARCHES, build_tiny


def _double_corr_dim(n_dims: int, n_ctx_orig: int, turns: float, base: float) -> float:
    return n_dims * math.log(n_ctx_orig / (turns * 2 * math.pi)) / (2 * math.log(base))


@pytest.mark.parametrize(("n_dims", "n_ctx_orig", "base"), [(16, 128, 1e4), (16, 32, 1e6), (128, 4096, 1e6)])
def test_corr_dims_are_the_floor_and_ceiling_of_yarns_formula(n_dims, n_ctx_orig, base):
    low, high = corr_dims(n_dims, n_ctx_orig, base, 32.0, 1.0)
    assert low == max(0, math.floor(_double_corr_dim(n_dims, n_ctx_orig, 32.0, base)))
    assert high == min(n_dims - 1, math.ceil(_double_corr_dim(n_dims, n_ctx_orig, 1.0, base)))


def test_yarn_magnitude_is_one_plus_a_tenth_of_log_factor_times_the_files_attn_factor():
    rope = RopeConfig(Rope.NORMAL, 16, 1e4, 0.25, scaling="yarn", ext_factor=1.0, attn_factor=0.5, n_ctx_orig=128)
    y = rope_args(rope, rope.base, rope.scale)
    assert y.ext_factor == 1.0
    assert y.mscale == pytest.approx(0.5 * (1 + 0.1 * math.log(4.0)), rel=1e-6)
    assert (y.corr_low, y.corr_high) == (0.0, 3.0)


def test_without_yarn_the_kernel_rotates_plainly_times_attn_factor():
    for scaling in ("none", "linear", "longrope"):
        rope = RopeConfig(Rope.NEOX, 16, 1e4, 0.5, scaling=scaling, attn_factor=1.25)
        assert rope_args(rope, rope.base, rope.scale) == RopeArgs(0.0, 1.25, 0.0, 0.0)


def test_meta_reads_the_scaling_as_llamacpp():
    configs = {n: load_config(GGUFFile.from_buffer(build_tiny(n).to_bytes(), n))[1].rope for n in ROPE_ARCHES}
    assert configs["llama-yarn"].ext_factor == 1.0 and configs["llama-yarn"].n_ctx_orig == 128  # trained context
    assert configs["qwen2-yarn"].n_ctx_orig == 32 and configs["qwen2-yarn"].scale == 0.25
    assert configs["llama-linear"].ext_factor == 0.0 and configs["llama-linear"].scale == 0.5
    assert configs["gemma3-linear"].layer(swa=True) == (10000.0, 1.0)  # sliding layers: own base, unscaled
    assert configs["gemma3-linear"].layer(swa=False) == (1e6, 0.125)
    assert configs["phi3-longrope"].scale == 1.0 and configs["phi3-longrope"].n_ctx_orig == 16
