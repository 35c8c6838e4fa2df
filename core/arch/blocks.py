"""Decoder block wirings shared by many families, built from `layers.py`'s norm, attention and FFN (or mixture
of experts): the sequential block (pre-norms, optional output norms, granite's residual scale) and the parallel
block (attention and FFN read the same input, falcon / gptneox / phi2 / command-r), plus learned absolute
positions (gpt2) and a norm of the embeddings (bloom)."""

from __future__ import annotations

from typing import Any

from .layers import Pass, attention, embed_tokens, ffn, norm
from .moe import feed_forward
from .weights import LayerWeights, NormWeights


def _pre(p: Pass, out: Any, x: Any, nw: NormWeights | None) -> Any:
    """norm(x) into out, or x itself for a block without pre-norms (olmo2)."""
    if nw is None:
        return x
    norm(p, out, x, nw)
    return out


def _residual(p: Pass, branch: Any, post: NormWeights | None) -> None:
    """x += residual_scale · post_norm(branch)."""
    count = p.n * p.cfg.n_embd
    if post is not None:
        norm(p, branch, branch, post)
    if p.cfg.residual_scale != 1.0:
        p.be.scale(branch, p.cfg.residual_scale, count)
    p.be.add(p.st.x, p.st.x, branch, count)


def sequential(p: Pass, layer: LayerWeights, il: int) -> None:
    """x += s·post(attn(norm(x))); x += s·post(ffn(norm(x))), each norm where the file has it; the FFN is a
    mixture of experts on the layers that have one (olmoe, granitemoe)."""
    st = p.st
    attention(p, layer.attn, il, _pre(p, st.xb, st.x, layer.attn_norm), st.xb2)
    _residual(p, st.xb2, layer.attn_post_norm)
    feed_forward(p, layer, _pre(p, st.xb, st.x, layer.ffn_norm), st.xb2)
    _residual(p, st.xb2, layer.ffn_post_norm)


def parallel(p: Pass, layer: LayerWeights, il: int) -> None:
    """x += attn(norm(x)) + ffn(norm'(x)): both branches read the block's input; norm' is the FFN's own norm
    (gptneox) or the attention's (falcon, phi2, command-r)."""
    st, count = p.st, p.n * p.cfg.n_embd
    norm(p, st.xb, st.x, layer.attn_norm)
    attention(p, layer.attn, il, st.xb, st.xb2)
    if layer.ffn_norm is not None:
        norm(p, st.xb, st.x, layer.ffn_norm)
    ffn(p, layer.ffn, st.xb, st.xb)  # in place: the FFN has read its input before it writes the output
    p.be.add(st.xb2, st.xb2, st.xb, count)
    p.be.add(st.x, st.x, st.xb2, count)


def embed_positions(p: Pass) -> None:
    """x (n, n_embd) = token embeddings + learned position embeddings (gpt2, starcoder)."""
    embed_tokens(p)
    p.be.get_rows(p.st.xb, p.w.pos_embd, p.st.pos, p.n)
    p.be.add(p.st.x, p.st.x, p.st.xb, p.n * p.cfg.n_embd)


def embed_norm(p: Pass) -> None:
    """x (n, n_embd) = norm(token embeddings) with `token_embd_norm` (bloom)."""
    embed_tokens(p)
    norm(p, p.st.x, p.st.x, p.w.embd_norm)
