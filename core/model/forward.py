"""One forward pass: place the batch in the KV cache, embed, run every block, produce logits (or a pooled
embedding for encoders). Prefill (many tokens) and decode (one token per sequence) are the same call, and a
batch may mix sequences at different positions (continuous batching)."""

from __future__ import annotations

from collections.abc import Sequence as Seq

from ..arch.layers import Pass
from ..errors import LlamayError
from .state import State


def place_batch(st: State, tokens: Seq[int], seqs: Seq[int]) -> None:
    """Give each token a position after its sequence's cached ones and a KV slot in every group; fill the
    batch buffers. Pages are allocated (and shared pages copied) here, before any kernel runs."""
    n = len(tokens)
    if n > st.n_batch:
        raise LlamayError(f"a batch of {n} tokens exceeds n_batch {st.n_batch}")
    counts: dict[int, int] = {}
    for s in seqs:
        counts[s] = counts.get(s, 0) + 1
    for s, c in counts.items():
        seq = st.kv.sequences[s]
        seq.active = True
        if seq.n_past + c > st.n_ctx:
            raise LlamayError(f"sequence {s}: {seq.n_past + c} positions exceed the context of {st.n_ctx}")
        for g, table in zip(st.kv.groups, seq.tables, strict=True):
            g.prepare_write(table, seq.n_past, seq.n_past + c)
    nxt = {s: st.kv.sequences[s].n_past for s in counts}
    positions = []
    for s in seqs:
        positions.append(nxt[s])
        nxt[s] += 1
    be = st.backend
    be.write_i32(st.ids, tokens)
    be.write_i32(st.pos, positions)
    be.write_i32(st.seq, seqs)
    for gi, g in enumerate(st.kv.groups):
        tables = [st.kv.sequences[s].tables[gi] for s in seqs]
        be.write_i32(g.slots, [g.slot(t, p) for t, p in zip(tables, positions, strict=True)])
        off = 0
        for s in counts:
            table = st.kv.sequences[s].tables[gi]
            be.write_i32(g.page_list, table, off)
            be.write_i32(g.page_off, (off,), s)
            be.write_i32(g.seq_len, (nxt[s],), s)
            off += len(table)
        g.batch.n = n


def begin(
    model,  # llamay.model.Model
    st: State,
    tokens: Seq[int],
    seqs: Seq[int] | None = None,
    outputs: Seq[int] | None = None,
) -> Pass:
    """Place a batch in the cache and return the Pass the layers run over (`forward` = begin, embed, blocks,
    output, finish; `llamay verify` steps through the same pieces layer by layer)."""
    n = len(tokens)
    seqs = [0] * n if seqs is None else list(seqs)
    if outputs is None:
        last = {s: i for i, s in enumerate(seqs)}
        outputs = sorted(last.values())
    st.reserve_outputs(len(outputs))
    place_batch(st, tokens, seqs)
    return Pass(model.backend, model.cfg, st, model.weights, n, len(outputs), tuple(outputs))


def finish(st: State, tokens: Seq[int], seqs: Seq[int] | None = None) -> None:
    """Record the batch's tokens as computed; window groups free the pages no later query can reach."""
    seqs = [0] * len(tokens) if seqs is None else seqs
    for t, s in zip(tokens, seqs, strict=True):
        st.kv.sequences[s].tokens.append(t)
    for s in set(seqs):
        seq = st.kv.sequences[s]
        for g, table in zip(st.kv.groups, seq.tables, strict=True):
            g.slide(table, seq.n_past)


def forward(
    model,  # llamay.model.Model
    st: State,
    tokens: Seq[int],
    seqs: Seq[int] | None = None,
    outputs: Seq[int] | None = None,
) -> int:
    """Run tokens (of sequences `seqs`, default all 0) through the model; returns the number of logit rows.

    outputs: batch indices that need logits (default: the last token of each sequence). Row j of
    `st.logits` then holds the logits of token outputs[j].
    """
    if not tokens:
        return 0
    p = begin(model, st, tokens, seqs, outputs)
    arch = model.arch
    arch.embed(p)
    for il, layer in enumerate(model.weights.layers):
        arch.block(p, layer, il)
    arch.output(p)
    model.backend.sync()  # the flush point of a backend that queues its kernels (interface.Backend.sync)
    finish(st, tokens, seqs)
    return p.n_out
