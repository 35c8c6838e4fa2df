"""Tensor names as llama.cpp's GGUF files spell them (gguf-py `MODEL_TENSOR` names); `{bid}` is the block index.

A tensor is stored as `NAME.weight` or `NAME.bias`.
"""

from __future__ import annotations


class T:
    TOKEN_EMBD = "token_embd"
    TOKEN_TYPES = "token_types"
    CLS = "cls"  # a classifier head's hidden projection (rerankers)
    CLS_OUT = "cls.output"  # and its output projection: one score per label
    POS_EMBD = "position_embd"
    TOKEN_EMBD_NORM = "token_embd_norm"
    OUTPUT_NORM = "output_norm"
    OUTPUT = "output"
    ROPE_FREQS = "rope_freqs"
    ROPE_FACTORS_LONG = "rope_factors_long"  # LongRoPE (phi3): factors for contexts past the original one
    ROPE_FACTORS_SHORT = "rope_factors_short"  # and within it

    ATTN_NORM = "blk.{bid}.attn_norm"
    ATTN_Q = "blk.{bid}.attn_q"
    ATTN_K = "blk.{bid}.attn_k"
    ATTN_V = "blk.{bid}.attn_v"
    ATTN_QKV = "blk.{bid}.attn_qkv"  # Q, K and V stacked in one matrix (rows: n_q, then K's, then V's)
    ATTN_NORM_2 = "blk.{bid}.attn_norm_2"  # Falcon-40B: the FFN's own norm in the parallel block
    ATTN_OUT = "blk.{bid}.attn_output"
    ATTN_Q_NORM = "blk.{bid}.attn_q_norm"
    ATTN_K_NORM = "blk.{bid}.attn_k_norm"
    ATTN_OUT_NORM = "blk.{bid}.attn_output_norm"  # BERT: LayerNorm after the attention residual
    ATTN_POST_NORM = "blk.{bid}.post_attention_norm"  # Gemma: RMSNorm on the attention output
    FFN_NORM = "blk.{bid}.ffn_norm"
    FFN_GATE = "blk.{bid}.ffn_gate"
    FFN_UP = "blk.{bid}.ffn_up"
    FFN_DOWN = "blk.{bid}.ffn_down"
    FFN_POST_NORM = "blk.{bid}.post_ffw_norm"  # Gemma: RMSNorm on the FFN output
    LAYER_OUT_NORM = "blk.{bid}.layer_output_norm"  # BERT: LayerNorm after the FFN residual
    # mixture of experts (moe.py): the router, the experts stacked in 3-D tensors, the shared expert
    FFN_GATE_INP = "blk.{bid}.ffn_gate_inp"  # router: (n_embd, n_expert)
    FFN_GATE_EXPS = "blk.{bid}.ffn_gate_exps"  # (n_embd, n_ff_exp, n_expert)
    FFN_UP_EXPS = "blk.{bid}.ffn_up_exps"
    FFN_DOWN_EXPS = "blk.{bid}.ffn_down_exps"  # (n_ff_exp, n_embd, n_expert)
    FFN_GATE_INP_SHEXP = "blk.{bid}.ffn_gate_inp_shexp"  # the shared expert's sigmoid gate: (n_embd,)
    FFN_GATE_SHEXP = "blk.{bid}.ffn_gate_shexp"
    FFN_UP_SHEXP = "blk.{bid}.ffn_up_shexp"
    FFN_DOWN_SHEXP = "blk.{bid}.ffn_down_shexp"


def weight(name: str, bid: int | None = None) -> str:
    return (name.format(bid=bid) if bid is not None else name) + ".weight"


def bias(name: str, bid: int | None = None) -> str:
    return (name.format(bid=bid) if bid is not None else name) + ".bias"
