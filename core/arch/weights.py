"""Weight structures shared by every architecture, and their assembly from a tensor declaration.

An architecture declares its tensors (`tensors.py`), each with the slot it fills here; `bind_declared` binds
them and assembles these structures, so no architecture writes a binder. Shapes are ggml order: `(n_in, n_out)`
for a matrix.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass
from typing import Any

from .binder import Binder, Tensor
from .config import ModelConfig
from .tensors import Declaration


@dataclass(frozen=True)
class NormWeights:
    weight: Tensor
    bias: Tensor | None = None  # LayerNorm only


@dataclass(frozen=True)
class AttentionWeights:
    q: Tensor  # (n_embd, n_head * head_dim)
    k: Tensor  # (n_embd, n_head_kv * head_dim)
    v: Tensor  # (n_embd, n_head_kv * head_dim_v)
    o: Tensor  # (n_head * head_dim_v, n_embd)
    q_bias: Tensor | None = None
    k_bias: Tensor | None = None
    v_bias: Tensor | None = None
    o_bias: Tensor | None = None
    q_norm: NormWeights | None = None  # (head_dim,) shared by every head
    k_norm: NormWeights | None = None
    sinks: Tensor | None = None  # (n_head,): a logit per head joined to the softmax denominator (gpt-oss)


@dataclass(frozen=True)
class FFNWeights:
    up: Tensor  # (n_embd, n_ff)
    down: Tensor  # (n_ff, n_embd)
    gate: Tensor | None = None  # (n_embd, n_ff): gated FFNs (SwiGLU, GeGLU)
    up_bias: Tensor | None = None
    down_bias: Tensor | None = None


@dataclass(frozen=True)
class MoEWeights:
    """A mixture-of-experts FFN (`moe.py`). Each `*_exps` is one 3-D file tensor (n_in, n_out, n_expert), bound as a
    tuple of one matrix per expert (`model._to_backend`: zero-copy slices), so a token reads only its experts."""

    router: Tensor  # ffn_gate_inp: (n_embd, n_expert)
    up: Any  # (n_embd, n_ff_exp, n_expert); bound: a tuple of (n_embd, n_ff_exp)
    down: Any  # (n_ff_exp, n_embd, n_expert)
    gate: Any = None  # (n_embd, n_ff_exp, n_expert)
    shared: FFNWeights | None = None  # the shared expert every token runs (qwen2moe, deepseek)
    shared_gate: Tensor | None = None  # ffn_gate_inp_shexp (n_embd,): sigmoid gate of the shared expert (qwen2moe)
    router_bias: Tensor | None = None  # (n_expert,): gpt-oss
    gate_bias: Any = None  # (n_ff_exp, n_expert); bound: a tuple of (n_ff_exp,) vectors, one per expert
    up_bias: Any = None  # (n_ff_exp, n_expert)
    down_bias: Any = None  # (n_embd, n_expert)


@dataclass(frozen=True)
class LayerWeights:
    attn: AttentionWeights
    ffn: FFNWeights | None = None  # None on a mixture-of-experts layer (`moe`)
    attn_norm: NormWeights | None = None  # pre-norm before attention
    ffn_norm: NormWeights | None = None  # pre-norm before the FFN
    attn_post_norm: NormWeights | None = None  # norm of the attention output (gemma)
    ffn_post_norm: NormWeights | None = None  # norm of the FFN output (gemma)
    attn_out_norm: NormWeights | None = None  # norm after the attention residual add (BERT post-norm)
    layer_out_norm: NormWeights | None = None  # norm after the FFN residual add (BERT post-norm)
    moe: MoEWeights | None = None  # a mixture-of-experts FFN in place of `ffn`


@dataclass(frozen=True)
class ModelWeights:
    token_embd: Tensor  # (n_embd, n_vocab)
    layers: tuple[LayerWeights, ...]
    output_norm: NormWeights | None = None
    output: Tensor | None = None  # (n_embd, n_vocab); None: tied to token_embd
    output_bias: Tensor | None = None  # (n_vocab,): phi2
    token_types: Tensor | None = None  # (n_embd, n_token_types): BERT
    pos_embd: Tensor | None = None  # (n_embd, n_ctx): BERT
    embd_norm: NormWeights | None = None  # norm right after the embeddings: BERT
    cls: Tensor | None = None  # (n_embd, n_embd): a reranker's classifier head (BERT, rank pooling)
    cls_bias: Tensor | None = None  # (n_embd,)
    cls_out: Tensor | None = None  # (n_embd, n_cls_out)
    cls_out_bias: Tensor | None = None  # (n_cls_out,)
    rope_freqs: Tensor | None = None  # (rope_dims / 2,): per-frequency divisors (llama 3.1 style)
    rope_long: Tensor | None = None  # (rope_dims / 2,): LongRoPE's divisors past the original context
    rope_short: Tensor | None = None  # (rope_dims / 2,): and within it

    @property
    def lm_head(self) -> Tensor:
        return self.output if self.output is not None else self.token_embd


def bind_declared(b: Binder, decls: Declaration, cfg: ModelConfig) -> ModelWeights:
    """The model's weights as its tensor declaration lays them out (each tensor at its slot)."""
    top, layers = b.bind(decls, cfg)
    return assemble(ModelWeights, {**top, "layers": tuple(assemble(LayerWeights, layer) for layer in layers)})


def assemble(cls: type, flat: dict[str, Any]) -> Any:
    """`cls` filled from dotted slots ("attn.q" → attn=AttentionWeights(q=...)); a sub-structure none of whose
    tensors is present is None (an absent optional norm)."""
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {}
    for path, value in flat.items():
        head, _, rest = path.partition(".")
        if rest:
            groups.setdefault(head, {})[rest] = value
        else:
            kwargs[head] = value
    for head, sub in groups.items():
        present = any(v is not None for v in sub.values())
        kwargs[head] = assemble(_structure(cls, head, hints[head]), sub) if present else None
    return cls(**kwargs)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _structure(cls: type, name: str, hint: Any) -> type:
    """The dataclass a field holds (`NormWeights | None` → NormWeights)."""
    for t in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(t) and t is not Tensor:
            return t
    raise TypeError(f"{cls.__name__}.{name} holds no weight structure")
