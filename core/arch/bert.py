"""`bert`: an encoder for embeddings. Token + position + token-type embeddings, LayerNorm, post-norm blocks
(norm after each residual add), biases everywhere, GELU FFN without a gate, pooled output."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ModelError
from ..gguf import GGUFFile, Keys
from .config import POOLING_TYPES, Activation, ModelConfig, Norm, Pooling, Rope, RopeConfig
from .layers import Pass, attention, ffn, norm
from .meta import MAX_VOCAB, Meta
from .names import T
from .params import key, read_params
from .scratch import Buffer
from .tensors import TOKEN_EMBD, b, norm_w, w
from .weights import LayerWeights

TOKEN_TYPE_COUNT = "tokenizer.ggml.token_type_count"


@dataclass(frozen=True)
class Params:
    pooling: Pooling = key(Keys.POOLING_TYPE, "int", 1, lo=0, hi=max(POOLING_TYPES), convert=POOLING_TYPES.get)
    causal: bool = key(Keys.CAUSAL, "bool", False)
    n_token_types: int = key(TOKEN_TYPE_COUNT, "int", 2, hi=MAX_VOCAB)
    qkv_bias: bool = True
    n_cls_out: int = 1  # a reranker's scores per pair (llama.cpp's default without classifier.output_labels)


def _ranks(cfg: ModelConfig) -> bool:
    return cfg.params.pooling == Pooling.RANK


def config(f: GGUFFile, arch: str = "bert") -> ModelConfig:
    m = Meta(f, arch)
    common = m.common()
    norm_eps = m.eps(Keys.LAYERNORM_EPS)
    params = read_params(m, Params)
    return ModelConfig(
        **common,
        norm=Norm.LAYER,
        norm_eps=norm_eps,
        rope=RopeConfig(kind=Rope.NONE),
        act=Activation.GELU,
        gated_ffn=False,
        causal=params.causal,
        params=params,
    )


SCRATCH = (
    Buffer("zero_ids", "i32", ("n_batch",), "token type 0 for every token"),
    Buffer("tmp_e", "f32", ("n_batch", "n_embd"), "position / token-type embeddings"),
    Buffer("pooled", "f32", ("n_embd",), "the pooled sentence embedding (a reranker's scores)"),
    Buffer("cls_hidden", "f32", ("n_embd",), "a reranker's classifier input, then its hidden state"),
)
TENSORS = (
    TOKEN_EMBD,
    w(T.TOKEN_TYPES, "n_embd", "n_token_types", slot="token_types"),
    w(T.POS_EMBD, "n_embd", "n_ctx_train", slot="pos_embd"),
    *norm_w(T.TOKEN_EMBD_NORM, "embd_norm", with_bias=True),
    w(T.ATTN_Q, "n_embd", "n_q", slot="attn.q"),
    b(T.ATTN_Q, "n_q", slot="attn.q_bias"),
    w(T.ATTN_K, "n_embd", "n_embd_k_gqa", slot="attn.k"),
    b(T.ATTN_K, "n_embd_k_gqa", slot="attn.k_bias"),
    w(T.ATTN_V, "n_embd", "n_embd_v_gqa", slot="attn.v"),
    b(T.ATTN_V, "n_embd_v_gqa", slot="attn.v_bias"),
    w(T.ATTN_OUT, "n_o", "n_embd", slot="attn.o"),
    b(T.ATTN_OUT, "n_embd", slot="attn.o_bias"),
    *norm_w(T.ATTN_OUT_NORM, "attn_out_norm", with_bias=True),
    w(T.FFN_UP, "n_embd", "n_ff", slot="ffn.up"),
    b(T.FFN_UP, "n_ff", slot="ffn.up_bias"),
    w(T.FFN_DOWN, "n_ff", "n_embd", slot="ffn.down"),
    b(T.FFN_DOWN, "n_embd", slot="ffn.down_bias"),
    *norm_w(T.LAYER_OUT_NORM, "layer_out_norm", with_bias=True),
    # a reranker's classifier head (rank pooling): the hidden projection is optional, as in llama.cpp
    w(T.CLS, "n_embd", "n_embd", slot="cls", required=False, when=_ranks),
    b(T.CLS, "n_embd", slot="cls_bias", required=False, when=_ranks),
    w(T.CLS_OUT, "n_embd", "n_cls_out", slot="cls_out", when=_ranks),
    b(T.CLS_OUT, "n_cls_out", slot="cls_out_bias", required=False, when=_ranks),
)


def embed(p: Pass) -> None:
    """x (n, n_embd) = LayerNorm(token + position + token-type-0 embeddings); no position embeddings for an
    encoder with rotary positions (nomic-bert)."""
    be, st, count = p.be, p.st, p.n * p.cfg.n_embd
    be.get_rows(st.x, p.w.token_embd, st.ids, p.n)
    if p.w.pos_embd is not None:
        be.get_rows(st.scratch.tmp_e, p.w.pos_embd, st.pos, p.n)
        be.add(st.x, st.x, st.scratch.tmp_e, count)
    be.get_rows(st.scratch.tmp_e, p.w.token_types, st.scratch.zero_ids, p.n)  # every token has type 0
    be.add(st.x, st.x, st.scratch.tmp_e, count)
    norm(p, st.x, st.x, p.w.embd_norm)


def block(p: Pass, layer: LayerWeights, il: int) -> None:
    """Post-norm block: x = norm(x + attn(x)); x = norm(x + ffn(x))."""
    st, count = p.st, p.n * p.cfg.n_embd
    attention(p, layer.attn, il, st.x, st.xb2)
    p.be.add(st.xb2, st.xb2, st.x, count)
    norm(p, st.x, st.xb2, layer.attn_out_norm)
    ffn(p, layer.ffn, st.x, st.xb2)
    p.be.add(st.xb2, st.xb2, st.x, count)
    norm(p, st.x, st.xb2, layer.layer_out_norm)


def output(p: Pass) -> None:
    """pooled (n_embd) = the sequence's token states pooled (mean, first or last token), L2-normalised; with no
    pooling the token states themselves (x: n × n_embd) are the output."""
    be, st, e = p.be, p.st, p.cfg.n_embd
    pooling = p.cfg.params.pooling
    if pooling == Pooling.NONE:
        return
    if pooling == Pooling.RANK:
        rank(p)
        return
    if pooling == Pooling.MEAN:
        be.mean_pool(st.scratch.pooled, st.x, p.n, e)
    elif pooling == Pooling.CLS:
        be.copy(st.scratch.pooled, 0, st.x, 0, e)
    elif pooling == Pooling.LAST:
        be.copy(st.scratch.pooled, 0, st.x, (p.n - 1) * e, e)
    else:
        raise ModelError(f"{p.cfg.arch}: pooling {pooling.value!r} gives no sentence embedding")
    be.l2_normalize(st.scratch.pooled, e)


def rank(p: Pass) -> None:
    """pooled[:n_cls_out] = cls_out · tanh(cls · x[0] + cls_bias) + cls_out_bias: the first token's state through
    the classifier head (the tanh layer only where the file has it), unnormalised: the pair's scores."""
    be, st, wt, e = p.be, p.st, p.w, p.cfg.n_embd
    h = st.scratch.cls_hidden
    be.copy(h, 0, st.x, 0, e)  # the first token ([CLS])
    if wt.cls is not None:
        be.matmul(st.scratch.pooled, wt.cls, h, 1)
        if wt.cls_bias is not None:
            be.add_bias(st.scratch.pooled, wt.cls_bias, 1)
        # tanh of one n_embd vector per pair, on the host: no backend has a tanh kernel
        be.write_f32(h, [math.tanh(v) for v in be.read_f32(st.scratch.pooled, 0, e)])
    be.matmul(st.scratch.pooled, wt.cls_out, h, 1)
    if wt.cls_out_bias is not None:
        be.add_bias(st.scratch.pooled, wt.cls_out_bias, 1)
