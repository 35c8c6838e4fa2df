"""Typed, range-checked access to the metadata an architecture reads.

Every hyper-parameter is checked before anything uses it: its GGUF type (an integer key stored as a float, a
string or a bool is refused, as llama.cpp refuses a key of the wrong type), and its range (positive sizes, head
counts that divide, rotary dimensions within the head, finite positive epsilons and bases, bounded counts). The
bounds sit far above any released model and far below what would exhaust memory, so no size read from a file
reaches an allocation unchecked. Each refusal is one ModelError naming the file, the key, its type and value.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ModelError
from ..gguf import GGUFFile, GGUFValueType, Keys, MetadataField
from ..quants.minifloat import f32
from .config import Rope, RopeConfig

V = GGUFValueType
INTEGER_TYPES = frozenset({V.UINT8, V.INT8, V.UINT16, V.INT16, V.UINT32, V.INT32, V.UINT64, V.INT64})
FLOAT_TYPES = frozenset({V.FLOAT32, V.FLOAT64})

MAX_LAYERS = 1 << 12  # blocks (released models have at most a few hundred)
MAX_DIM = 1 << 20  # embedding, feed-forward and head widths
MAX_HEADS = 1 << 12  # attention heads
MAX_CONTEXT = 1 << 24  # trained context length, sliding window
MAX_VOCAB = 1 << 24  # tokens
EPS_MAX = 1.0  # a norm epsilon above 1 is no epsilon
ROPE_BASE_MIN = 1.0  # a base below 1 makes the rotation faster for higher dimensions: no model has one
ROPE_FACTOR_RANGE = (1e-6, 1e6)  # positions times 1/factor stay finite in float32
ROPE_SCALING_TYPES = ("none", "linear", "yarn", "longrope")  # all llama.cpp knows


class Meta:
    """Typed access to `{arch}.*` metadata keys; a missing required key is a ModelError naming it."""

    def __init__(self, f: GGUFFile, arch: str) -> None:
        self.f = f
        self.arch = arch
        self.n_layer: int | None = None  # set by `common`: the length per-layer arrays must have

    def key(self, template: str) -> str:
        return template.format(arch=self.arch)

    def field(self, template: str) -> MetadataField | None:
        return self.f.fields.get(self.key(template))

    def fail(self, field: MetadataField, why: str) -> ModelError:
        return ModelError(f"{self.f.name}: key {field.key!r} = {field.shown()}: {why}")

    def refuse(self, template: str, value: Any, why: str) -> ModelError:
        """A refusal of a key's value, or of the default it takes when absent (derived from other keys)."""
        fld = self.field(template)
        if fld is not None:
            return self.fail(fld, why)
        return ModelError(f"{self.f.name}: key {self.key(template)!r} is absent and defaults to {value!r}, which {why}")

    def _required(self, template: str) -> MetadataField:
        fld = self.field(template)
        if fld is None:
            raise ModelError(
                f"{self.f.name}: architecture {self.arch!r} needs metadata key {self.key(template)!r}, which is missing"
            )
        return fld

    def int(
        self,
        template: str,
        default: int | None = None,
        *,
        lo: int = 1,
        hi: int = MAX_DIM,
        hi_what: str = "",
        per_layer: bool = False,
    ) -> int:
        """An integer key in [lo, hi]; `per_layer` also takes an array with one equal value per layer."""
        fld = self.field(template)
        if fld is None and default is not None:
            value = default
        else:
            fld = fld or self._required(template)
            value = self._int_value(fld, per_layer)
        if not lo <= value <= hi:
            raise self.refuse(template, value, f"must be at least {lo} and at most {hi_what or hi}")
        return value

    def _int_value(self, fld: MetadataField, per_layer: bool) -> int:
        if fld.type == V.ARRAY and per_layer:
            items = fld.value
            if items.item_type not in INTEGER_TYPES:
                raise self.fail(fld, "must be an integer (or an array of integers, one per layer)")
            if self.n_layer is not None and len(items) != self.n_layer:
                raise self.fail(fld, f"a per-layer array must have one value for each of the {self.n_layer} layers")
            if len(set(items)) != 1:
                raise self.fail(fld, "varies per layer, which is not supported yet")
            return items[0]
        if fld.type not in INTEGER_TYPES:
            raise self.fail(fld, "must be an integer")
        return fld.value

    def float(
        self,
        template: str,
        default: float | None = None,
        *,
        lo: float = 0.0,
        hi: float = math.inf,
        lo_open: bool = True,
        none: bool = False,
    ) -> float:
        """A finite float key in (lo, hi] ([lo, hi] without `lo_open`); with `none`, 0 also (it means "not set",
        as llama.cpp reads it)."""
        fld = self.field(template)
        if fld is None and default is not None:
            return default
        fld = fld or self._required(template)
        if fld.type not in FLOAT_TYPES:
            raise self.fail(fld, "must be a float (FLOAT32)")
        v = fld.value
        if none and v == 0:
            return 0.0
        if not (math.isfinite(v) and (lo < v if lo_open else lo <= v) and v <= hi):
            if hi == math.inf:
                bound = f"{'>' if lo_open else '>='} {lo:g}"
            else:
                bound = f"in {'(' if lo_open else '['}{lo:g}, {hi:g}]"
            raise self.fail(fld, f"must be {'0 (none) or ' if none else ''}a finite number {bound}")
        return float(v)

    def bool(self, template: str, default: bool) -> bool:
        return self._typed(template, default, V.BOOL)

    def str(self, template: str, default: str) -> str:
        return self._typed(template, default, V.STRING)

    def _typed(self, template: str, default: Any, vtype: GGUFValueType) -> Any:
        fld = self.field(template)
        if fld is None:
            return default
        if fld.type != vtype:
            raise self.fail(fld, f"must be a {vtype.name}")
        return fld.value

    def eps(self, template: str) -> float:
        """A norm epsilon: finite, in (0, 1]."""
        return self.float(template, hi=EPS_MAX)

    def n_vocab(self) -> int:
        """The vocabulary size: the token list's length; `{arch}.vocab_size`, when present, must agree."""
        tokens = self.f.fields.get(Keys.TOKENS)
        if tokens is not None and (tokens.type != V.ARRAY or tokens.value.item_type != V.STRING):
            raise self.fail(tokens, "must be an ARRAY of STRING (the token texts)")
        if tokens is not None and not 1 <= len(tokens.value) <= MAX_VOCAB:
            raise self.fail(tokens, f"must hold 1 to {MAX_VOCAB} tokens")
        size = self.field(Keys.VOCAB_SIZE)
        if size is None:
            if tokens is None:
                raise ModelError(f"{self.f.name}: neither {self.key(Keys.VOCAB_SIZE)!r} nor {Keys.TOKENS!r} is present")
            return len(tokens.value)
        n = self.int(Keys.VOCAB_SIZE, hi=MAX_VOCAB)
        if tokens is not None and n != len(tokens.value):
            raise self.fail(size, f"but the token list ({Keys.TOKENS}) has {len(tokens.value)} tokens")
        return n

    def common(self) -> dict[str, Any]:
        """The hyper-parameters every transformer here shares, as ModelConfig keyword arguments."""
        self.n_layer = self.int(Keys.BLOCK_COUNT, hi=MAX_LAYERS)
        n_embd = self.int(Keys.EMBEDDING_LENGTH)
        n_head = self.int(Keys.HEAD_COUNT, hi=MAX_HEADS, per_layer=True)
        n_head_kv = self.int(Keys.HEAD_COUNT_KV, n_head, hi=n_head, hi_what=f"head_count {n_head}", per_layer=True)
        if n_head % n_head_kv:
            raise self.refuse(Keys.HEAD_COUNT_KV, n_head_kv, f"must divide head_count {n_head} (heads share KV heads)")
        if self.field(Keys.KEY_LENGTH) is None and n_embd % n_head:
            raise self.refuse(
                Keys.EMBEDDING_LENGTH,
                n_embd,
                f"is not a multiple of head_count {n_head}, and {self.key(Keys.KEY_LENGTH)} is not given",
            )
        head_dim = self.int(Keys.KEY_LENGTH, n_embd // n_head)
        return dict(
            arch=self.arch,
            n_vocab=self.n_vocab(),
            n_embd=n_embd,
            n_layer=self.n_layer,
            n_head=n_head,
            n_head_kv=n_head_kv,
            head_dim=head_dim,
            head_dim_v=self.int(Keys.VALUE_LENGTH, head_dim),
            n_ff=self.int(Keys.FEED_FORWARD_LENGTH, per_layer=True),
            n_ctx_train=self.int(Keys.CONTEXT_LENGTH, hi=MAX_CONTEXT),
        )

    def rope(
        self, kind: Rope, head_dim: int, base_swa: float | None = None, scale_swa: float | None = None
    ) -> RopeConfig:
        """Rotary and its scaling as llama.cpp reads them: type (default linear), factor (or the older
        `rope.scale_linear`), attn_factor, original context (default the trained one)."""
        scaling = self.str(Keys.ROPE_SCALING_TYPE, "linear")
        if scaling not in ROPE_SCALING_TYPES:
            raise self.refuse(Keys.ROPE_SCALING_TYPE, scaling, f"is not supported ({', '.join(ROPE_SCALING_TYPES)})")
        factor_key = Keys.ROPE_SCALING_FACTOR if self.field(Keys.ROPE_SCALING_FACTOR) else Keys.ROPE_SCALE_LINEAR
        factor = self.float(factor_key, 0.0, lo=ROPE_FACTOR_RANGE[0], hi=ROPE_FACTOR_RANGE[1], lo_open=False,
                            none=True)  # fmt: skip
        n_dims = self.int(Keys.ROPE_DIMENSION_COUNT, head_dim, lo=2, hi=head_dim, hi_what=f"the head size {head_dim}")
        if n_dims % 2:
            raise self.refuse(Keys.ROPE_DIMENSION_COUNT, n_dims, "must be even: dimensions rotate in pairs")
        n_ctx_train = self.int(Keys.CONTEXT_LENGTH, hi=MAX_CONTEXT)
        return RopeConfig(
            kind=kind,
            n_dims=n_dims,
            base=self.float(Keys.ROPE_FREQ_BASE, 10000.0, lo=ROPE_BASE_MIN, lo_open=False),
            scale=f32(1.0 / factor) if scaling != "none" and factor > 0 else 1.0,
            base_swa=base_swa,
            scale_swa=scale_swa,
            scaling=scaling,
            ext_factor=1.0 if scaling == "yarn" else 0.0,
            attn_factor=self.float(Keys.ROPE_SCALING_ATTN_FACTOR, 1.0, hi=ROPE_FACTOR_RANGE[1]),
            n_ctx_orig=self.int(Keys.ROPE_SCALING_ORIG_CTX, n_ctx_train, lo=0, hi=MAX_CONTEXT) or n_ctx_train,
        )
