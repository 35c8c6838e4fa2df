"""Hyper-parameters of a model, read from GGUF metadata with clear errors for missing or odd keys."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..errors import ModelError
from ..gguf import GGUFFile, Keys


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


POOLING_TYPES = {0: Pooling.NONE, 1: Pooling.MEAN, 2: Pooling.CLS, 3: Pooling.LAST}


@dataclass(frozen=True)
class RopeConfig:
    kind: Rope
    n_dims: int = 0  # leading dimensions of each head that rotate
    base: float = 10000.0
    scale: float = 1.0  # linear position scale (1 / rope.scaling.factor)
    base_swa: float | None = None  # sliding-window layers' own base (gemma3)


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
    qkv_bias: bool = False
    qk_norm: bool = False
    post_norms: bool = False  # gemma: norms on the attention and FFN outputs before the residual add
    embed_scale: float = 1.0
    attn_scale: float = 0.0  # 0 → 1/sqrt(head_dim)
    tied_output: bool = False
    causal: bool = True
    pooling: Pooling = Pooling.NONE
    sliding_window: int = 0
    swa_layers: tuple[bool, ...] = field(default_factory=tuple)  # per layer: uses the sliding window

    @property
    def kq_scale(self) -> float:
        return self.attn_scale or 1.0 / math.sqrt(self.head_dim)

    @property
    def n_embd_k_gqa(self) -> int:
        return self.head_dim * self.n_head_kv

    @property
    def n_embd_v_gqa(self) -> int:
        return self.head_dim_v * self.n_head_kv


class Meta:
    """Typed access to `{arch}.*` metadata keys; a missing required key is a ModelError naming it."""

    def __init__(self, f: GGUFFile, arch: str) -> None:
        self.f = f
        self.arch = arch

    def key(self, template: str) -> str:
        return template.format(arch=self.arch)

    def get(self, template: str, default: Any = None) -> Any:
        return self.f.get(self.key(template), default)

    def require(self, template: str) -> Any:
        k = self.key(template)
        v = self.f.get(k)
        if v is None:
            raise ModelError(f"{self.f.name}: architecture {self.arch!r} needs metadata key {k!r}, which is missing")
        return v

    def int(self, template: str, default: int | None = None) -> int:
        v = self.require(template) if default is None else self.get(template, default)
        if isinstance(v, list):  # per-layer arrays (e.g. head counts): take the common value
            if len(set(v)) != 1:
                raise ModelError(f"{self.f.name}: {self.key(template)} varies per layer ({v}), not supported yet")
            v = v[0]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ModelError(f"{self.f.name}: {self.key(template)} must be a non-negative integer, got {v!r}")
        return v

    def float(self, template: str, default: float | None = None) -> float:
        v = self.require(template) if default is None else self.get(template, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ModelError(f"{self.f.name}: {self.key(template)} must be a number, got {v!r}")
        return float(v)

    def n_vocab(self) -> int:
        tokens = self.f.get(Keys.TOKENS)
        n = self.get(Keys.VOCAB_SIZE)
        if n is None and tokens is None:
            raise ModelError(f"{self.f.name}: neither {self.key(Keys.VOCAB_SIZE)!r} nor {Keys.TOKENS!r} is present")
        return int(n) if n is not None else len(tokens)

    def common(self) -> dict[str, Any]:
        """The hyper-parameters every transformer here shares, as ModelConfig keyword arguments."""
        n_embd = self.int(Keys.EMBEDDING_LENGTH)
        n_head = self.int(Keys.HEAD_COUNT)
        if n_head == 0:
            raise ModelError(f"{self.f.name}: {self.key(Keys.HEAD_COUNT)} is 0")
        n_head_kv = self.int(Keys.HEAD_COUNT_KV, n_head)
        if n_head_kv == 0 or n_head % n_head_kv:
            raise ModelError(f"{self.f.name}: {n_head} query heads cannot share {n_head_kv} key/value heads")
        head_dim = self.int(Keys.KEY_LENGTH, n_embd // n_head)
        return dict(
            arch=self.arch,
            n_vocab=self.n_vocab(),
            n_embd=n_embd,
            n_layer=self.int(Keys.BLOCK_COUNT),
            n_head=n_head,
            n_head_kv=n_head_kv,
            head_dim=head_dim,
            head_dim_v=self.int(Keys.VALUE_LENGTH, head_dim),
            n_ff=self.int(Keys.FEED_FORWARD_LENGTH),
            n_ctx_train=self.int(Keys.CONTEXT_LENGTH),
        )

    def rope(self, kind: Rope, head_dim: int, base_swa: float | None = None) -> RopeConfig:
        scaling = self.get(Keys.ROPE_SCALING_TYPE, "none")
        factor = self.float(Keys.ROPE_SCALING_FACTOR, 0.0)
        scale = 1.0
        if scaling == "linear" and factor > 0:
            scale = 1.0 / factor
        elif scaling not in ("none", "linear"):
            raise ModelError(f"{self.f.name}: rope scaling {scaling!r} is not supported (supported: none, linear)")
        return RopeConfig(
            kind=kind,
            n_dims=self.int(Keys.ROPE_DIMENSION_COUNT, head_dim),
            base=self.float(Keys.ROPE_FREQ_BASE, 10000.0),
            scale=scale,
            base_swa=base_swa,
        )
