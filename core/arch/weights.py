"""Weight structures shared by every architecture, and parameterised binders for them.

An architecture module picks the pieces its block uses (norm kind, biases, QK-norm, gated FFN, post-norms)
by passing flags here; it never copies a binder. Shapes are ggml order: `(n_in, n_out)` for a matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

from .binder import Binder, Tensor
from .config import ModelConfig
from .names import T, bias, weight


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


@dataclass(frozen=True)
class FFNWeights:
    up: Tensor  # (n_embd, n_ff)
    down: Tensor  # (n_ff, n_embd)
    gate: Tensor | None = None  # (n_embd, n_ff): gated FFNs (SwiGLU, GeGLU)
    up_bias: Tensor | None = None
    down_bias: Tensor | None = None


@dataclass(frozen=True)
class LayerWeights:
    attn: AttentionWeights
    ffn: FFNWeights
    attn_norm: NormWeights | None = None  # pre-norm before attention
    ffn_norm: NormWeights | None = None  # pre-norm before the FFN
    attn_post_norm: NormWeights | None = None  # norm of the attention output (gemma)
    ffn_post_norm: NormWeights | None = None  # norm of the FFN output (gemma)
    attn_out_norm: NormWeights | None = None  # norm after the attention residual add (BERT post-norm)
    layer_out_norm: NormWeights | None = None  # norm after the FFN residual add (BERT post-norm)


@dataclass(frozen=True)
class ModelWeights:
    token_embd: Tensor  # (n_embd, n_vocab)
    layers: tuple[LayerWeights, ...]
    output_norm: NormWeights | None = None
    output: Tensor | None = None  # (n_embd, n_vocab); None: tied to token_embd
    token_types: Tensor | None = None  # (n_embd, n_token_types): BERT
    pos_embd: Tensor | None = None  # (n_embd, n_ctx): BERT
    embd_norm: NormWeights | None = None  # norm right after the embeddings: BERT
    rope_freqs: Tensor | None = None  # (rope_dims / 2,): per-frequency divisors (llama 3.1 style)

    @property
    def lm_head(self) -> Tensor:
        return self.output if self.output is not None else self.token_embd


def bind_norm(b: Binder, name: str, dim: int, bid: int | None = None, *, with_bias: bool = False) -> NormWeights:
    w = b.get(weight(name, bid), (dim,))
    return NormWeights(w, b.get(bias(name, bid), (dim,)) if with_bias else None)


def bind_optional_norm(b: Binder, name: str, dim: int, bid: int | None = None) -> NormWeights | None:
    w = b.optional(weight(name, bid), (dim,))
    return None if w is None else NormWeights(w, b.optional(bias(name, bid), (dim,)))


def bind_attention(
    b: Binder, cfg: ModelConfig, bid: int, *, qkv_bias: bool = False, o_bias: bool = False, qk_norm: bool = False
) -> AttentionWeights:
    n_q, n_k, n_v = cfg.n_head * cfg.head_dim, cfg.n_embd_k_gqa, cfg.n_embd_v_gqa

    def opt_bias(name: str, dim: int, wanted: bool) -> Tensor | None:
        return b.get(bias(name, bid), (dim,)) if wanted else None

    return AttentionWeights(
        q=b.get(weight(T.ATTN_Q, bid), (cfg.n_embd, n_q)),
        k=b.get(weight(T.ATTN_K, bid), (cfg.n_embd, n_k)),
        v=b.get(weight(T.ATTN_V, bid), (cfg.n_embd, n_v)),
        o=b.get(weight(T.ATTN_OUT, bid), (cfg.n_head * cfg.head_dim_v, cfg.n_embd)),
        q_bias=opt_bias(T.ATTN_Q, n_q, qkv_bias),
        k_bias=opt_bias(T.ATTN_K, n_k, qkv_bias),
        v_bias=opt_bias(T.ATTN_V, n_v, qkv_bias),
        o_bias=opt_bias(T.ATTN_OUT, cfg.n_embd, o_bias),
        q_norm=bind_norm(b, T.ATTN_Q_NORM, cfg.head_dim, bid) if qk_norm else None,
        k_norm=bind_norm(b, T.ATTN_K_NORM, cfg.head_dim, bid) if qk_norm else None,
    )


def bind_ffn(b: Binder, cfg: ModelConfig, bid: int, *, gated: bool = True, biases: bool = False) -> FFNWeights:
    return FFNWeights(
        up=b.get(weight(T.FFN_UP, bid), (cfg.n_embd, cfg.n_ff)),
        down=b.get(weight(T.FFN_DOWN, bid), (cfg.n_ff, cfg.n_embd)),
        gate=b.get(weight(T.FFN_GATE, bid), (cfg.n_embd, cfg.n_ff)) if gated else None,
        up_bias=b.get(bias(T.FFN_UP, bid), (cfg.n_ff,)) if biases else None,
        down_bias=b.get(bias(T.FFN_DOWN, bid), (cfg.n_embd,)) if biases else None,
    )


def bind_output(b: Binder, cfg: ModelConfig) -> tuple[Tensor, NormWeights, Tensor | None]:
    """Token embeddings, the final norm and the LM head (None when tied to the embeddings)."""
    token_embd = b.get_vocab_matrix(weight(T.TOKEN_EMBD), cfg.n_embd, cfg.n_vocab)
    output_norm = bind_norm(b, T.OUTPUT_NORM, cfg.n_embd)
    output = None if cfg.tied_output else b.get_vocab_matrix(weight(T.OUTPUT), cfg.n_embd, cfg.n_vocab, required=False)
    return token_embd, output_norm, output
