"""Hyper-parameters of a model (read from GGUF metadata by `meta.Meta`, which checks every one).

`ModelConfig` holds what the shared layers, the KV cache and the kernels read (sizes, norm, rotary, activation,
attention layout); what only one architecture's module reads is that architecture's `params` (see `params.py`),
reachable as `cfg.params.x` (or `cfg.x`, which falls back to the params when ModelConfig has no such field)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Norm(StrEnum):
    RMS = "rms"
    LAYER = "layer"


class Rope(StrEnum):
    NONE = "none"  # absolute position embeddings (BERT)
    NORMAL = "normal"  # rotate adjacent pairs (x[2i], x[2i+1]): llama
    NEOX = "neox"  # rotate halves (x[i], x[i + d/2]): qwen, gemma


class Activation(StrEnum):
    SILU = "silu"
    GELU = "gelu"  # tanh approximation, as ggml_gelu


class Pooling(StrEnum):
    NONE = "none"
    MEAN = "mean"
    CLS = "cls"
    LAST = "last"
    RANK = "rank"  # the first token's state through the classifier head: a relevance score (rerankers)


POOLING_TYPES = {0: Pooling.NONE, 1: Pooling.MEAN, 2: Pooling.CLS, 3: Pooling.LAST, 4: Pooling.RANK}


def swa_pattern(n_layer: int, period: int) -> tuple[bool, ...]:
    """Per layer, whether it uses the sliding window, in llama.cpp's pattern: all but the last of each period."""
    return tuple(i % period < period - 1 for i in range(n_layer))


@dataclass(frozen=True)
class RopeConfig:
    kind: Rope
    n_dims: int = 0  # leading dimensions of each head that rotate
    base: float = 10000.0
    scale: float = 1.0  # position scale, float32 1 / rope.scaling.factor (every scaling type but none)
    base_swa: float | None = None  # sliding-window layers' own base (gemma3)
    scale_swa: float | None = None  # sliding-window layers' own scale (gemma3: 1, they are not scaled)
    scaling: str = "none"  # rope.scaling.type: none, linear, yarn, longrope
    ext_factor: float = 0.0  # YaRN's extrapolation mix: 1 with yarn (llama.cpp's yarn_ext_factor)
    attn_factor: float = 1.0  # rope.scaling.attn_factor: cos and sin times this (LongRoPE's magnitude)
    n_ctx_orig: int = 0  # rope.scaling.original_context_length: YaRN's ramp, LongRoPE's long/short choice
    beta_fast: float = 32.0  # YaRN's ramp ends, in turns over the original context (llama.cpp's defaults)
    beta_slow: float = 1.0

    def layer(self, swa: bool) -> tuple[float, float]:
        """(base, scale) of a layer, a sliding-window one taking its own where the architecture has them."""
        if not swa:
            return self.base, self.scale
        return self.base_swa or self.base, self.scale if self.scale_swa is None else self.scale_swa


@dataclass(frozen=True)
class ModelConfig:
    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int  # key/query head size
    head_dim_v: int
    n_ff: int
    n_ctx_train: int
    norm: Norm
    norm_eps: float
    rope: RopeConfig
    act: Activation = Activation.SILU
    gated_ffn: bool = True
    embed_scale: float = 1.0
    attn_scale: float = 0.0  # 0 → 1/sqrt(head_dim)
    tied_output: bool = False
    causal: bool = True
    sliding_window: int = 0
    swa_layers: tuple[bool, ...] = field(default_factory=tuple)  # per layer: uses the sliding window
    nope_layers: tuple[bool, ...] = field(default_factory=tuple)  # per layer: no rotary (smollm3's NoPE layers)
    residual_scale: float = 1.0  # each block output times this before its residual add (granite)
    logit_scale: float = 1.0  # logits times this (granite: 1 / its logit_scale key; command-r: the key)
    attn_softcap: float = 0.0  # attention scores soft-capped: cap·tanh(s / cap) (gemma2); 0: none
    max_alibi_bias: float = 0.0  # ALiBi's max bias, its per-head slopes (mpt, bloom); 0: none
    final_softcap: float = 0.0  # logits soft-capped: cap·tanh(logit / cap) (gemma2); 0: none
    clamp_kqv: float = 0.0  # Q, K and V clamped to ±this after their projections (olmo); 0: not clamped
    params: Any = None  # the architecture's own hyper-parameters (its Params dataclass)

    def __getattr__(self, name: str) -> Any:
        # only reached when ModelConfig has no such field: the architecture's own (cfg.pooling for BERT)
        params = self.__dict__.get("params")
        if params is None or name.startswith("__"):
            raise AttributeError(name)
        try:
            return getattr(params, name)
        except AttributeError:
            raise AttributeError(f"{self.arch!r} has no hyper-parameter {name!r}") from None

    def as_dict(self) -> dict[str, Any]:
        """Every hyper-parameter, shared and the architecture's own, in one flat dict (`llamay info`)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "params"}
        d["rope"] = dataclasses.asdict(self.rope)
        if self.params is not None:
            d.update(dataclasses.asdict(self.params))
        return d

    @property
    def n_q(self) -> int:
        return self.n_head * self.head_dim

    @property
    def n_o(self) -> int:
        """Width of the attention output before its projection."""
        return self.n_head * self.head_dim_v

    @property
    def n_qkv(self) -> int:
        """Rows of a fused QKV matrix."""
        return self.n_q + self.n_embd_k_gqa + self.n_embd_v_gqa

    @property
    def n_ff_gate_up(self) -> int:
        """Rows of a fused gate/up matrix."""
        return 2 * self.n_ff

    @property
    def n_rope_freqs(self) -> int:
        return self.rope.n_dims // 2

    @property
    def kq_scale(self) -> float:
        return self.attn_scale or 1.0 / math.sqrt(self.head_dim)

    @property
    def n_embd_k_gqa(self) -> int:
        return self.head_dim * self.n_head_kv

    @property
    def n_embd_v_gqa(self) -> int:
        return self.head_dim_v * self.n_head_kv
