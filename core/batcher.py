"""Continuous batching: many sequences advance together, one forward pass per step.

Each step takes the next token of every decoding request and, in the room left under the batch budget, a chunk of
the prompts still prefilling (so a long prompt cannot stall the others). One forward over that mixed batch reads
each weight matrix once for all of them; every request whose prompt is done gets a token sampled from its row.

A request is admitted — given a sequence and KV pages — only when there is room; it first adopts the longest
prefix the cache holds (its own radix tree), so only the rest of the prompt is computed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .errors import LlamayError
from .kv.pages import OutOfPages
from .model import Model, State, forward
from .sampling import Sampler, log_softmax

_ids = itertools.count(1)


@dataclass(eq=False)
class Request:
    prompt: list[int]
    max_tokens: int
    sampler: Sampler
    stop_at_eog: bool = True
    logprobs: int | None = None  # report the sampled token's logprob and this many top alternatives
    id: int = field(default_factory=lambda: next(_ids))
    seq: int | None = None
    prefilled: int = 0  # prompt positions in the cache (cached + computed)
    cached_tokens: int = 0  # of which reused from the prefix cache
    generated: list[int] = field(default_factory=list)
    pending: int | None = None  # sampled, not yet fed back
    finish_reason: str | None = None

    @property
    def decoding(self) -> bool:
        return self.prefilled == len(self.prompt)


@dataclass(frozen=True)
class Event:
    request: Request
    token: int | None  # None when the request ended without a new token (end of generation, cancel)
    finish_reason: str | None
    logprob: float | None = None  # of `token`, from the raw distribution (before sampling transforms)
    top: tuple[tuple[int, float], ...] = ()  # the most likely tokens and their logprobs


class Batcher:
    def __init__(
        self,
        model: Model,
        state: State,
        *,
        prefill_chunk: int = 256,
        is_eog: Callable[[int], bool] | None = None,
    ) -> None:
        self.model = model
        self.st = state
        self.budget = state.n_batch
        self.prefill_chunk = min(prefill_chunk, state.n_batch)
        self.running: list[Request] = []
        self.is_eog = is_eog or model.tokenizer.is_eog
        self.last_batch_width = 0  # sequences in the last step (for metrics)
        self.last_batch_tokens = 0

    # -- admission ------------------------------------------------------------------------------------------

    def can_admit(self) -> bool:
        return any(not s.active for s in self.st.sequences)

    def admit(self, req: Request) -> bool:
        """Give the request a sequence, its cached prefix and the KV pages for its whole prompt; False (nothing
        held) when there is no room yet."""
        st = self.st
        if not req.prompt:
            raise LlamayError("the prompt is empty")
        if len(req.prompt) + 1 > st.n_ctx:
            raise LlamayError(f"the prompt has {len(req.prompt)} tokens; the context holds {st.n_ctx}")
        if not self.can_admit():
            return False
        seq = st.acquire()
        reused = st.reuse_prefix(seq, req.prompt)
        s = st.sequences[seq]
        try:  # window groups allocate as they go: their old pages are freed while the prompt is computed
            for g, table in zip(st.groups, s.tables, strict=True):
                if not g.window:
                    g.prepare_write(table, reused, len(req.prompt))
        except OutOfPages:
            st.release(seq, cache=False)
            return False
        req.seq, req.prefilled, req.cached_tokens = seq, reused, reused
        self.running.append(req)
        return True

    def cancel(self, req: Request, reason: str = "cancelled") -> None:
        """Stop a request now; its sequence and pages are released (whole pages stay in the prefix cache)."""
        if req in self.running:
            self._finish(req, reason)

    def _finish(self, req: Request, reason: str) -> None:
        req.finish_reason = reason
        self.running.remove(req)
        if req.seq is not None:
            self.st.release(req.seq)
            req.seq = None

    # -- stepping -------------------------------------------------------------------------------------------

    def step(self) -> list[Event]:
        """One forward pass over every running request; returns the tokens sampled and requests finished."""
        tokens: list[int] = []
        seqs: list[int] = []
        sample_rows: list[tuple[Request, int]] = []  # (request, batch index of its last token)
        events = self._grow_decoders()
        for req in self.running:
            if req.decoding and req.pending is not None:
                sample_rows.append((req, len(tokens)))
                tokens.append(req.pending)
                seqs.append(req.seq)
                req.pending = None
        room = self.budget - len(tokens)
        for req in self.running:
            if room <= 0:
                break
            if req.decoding:
                continue
            n = min(room, self.prefill_chunk, len(req.prompt) - req.prefilled)
            tokens.extend(req.prompt[req.prefilled : req.prefilled + n])
            seqs.extend([req.seq] * n)
            req.prefilled += n
            room -= n
            if req.decoding:
                sample_rows.append((req, len(tokens) - 1))
        if not tokens:
            return events
        self.last_batch_width = len(set(seqs))
        self.last_batch_tokens = len(tokens)
        forward(self.model, self.st, tokens, seqs, [row for _, row in sample_rows])
        return events + self._sample(sample_rows)

    def _grow_decoders(self) -> list[Event]:
        """Find a page for every decoder's next position; one that cannot get one ends ("length")."""
        events = []
        for req in list(self.running):
            if not (req.decoding and req.pending is not None):
                continue
            s = self.st.sequences[req.seq]
            try:
                for g, table in zip(self.st.groups, s.tables, strict=True):
                    g.prepare_write(table, s.n_past, s.n_past + 1)
            except OutOfPages:
                self._finish(req, "length")
                events.append(Event(req, None, "length"))
        return events

    def _sample(self, rows: Sequence[tuple[Request, int]]) -> list[Event]:
        events = []
        n_vocab = self.model.cfg.n_vocab
        be = self.model.backend
        for j, (req, _row) in enumerate(rows):
            tok = req.sampler.sample(be, self.st.logits, j * n_vocab, n_vocab)
            logprob, top = None, ()
            if req.logprobs is not None:
                lp = log_softmax(be.read_f32(self.st.logits, j * n_vocab, n_vocab))
                logprob = lp[tok]
                top = tuple((t, lp[t]) for t in heapq.nlargest(req.logprobs, range(n_vocab), key=lp.__getitem__))
            if req.stop_at_eog and self.is_eog(tok):
                self._finish(req, "stop")
                events.append(Event(req, None, "stop"))
                continue
            req.generated.append(tok)
            reason = None
            if len(req.generated) >= req.max_tokens or self.st.sequences[req.seq].n_past + 1 >= self.st.n_ctx:
                reason = "length"
            if reason:
                self._finish(req, reason)
            else:
                req.pending = tok
            events.append(Event(req, tok, reason, logprob, top))
        return events

    def run(self, requests: Sequence[Request]) -> dict[int, list[int]]:
        """Admit what fits, step until every request is done; generated tokens by request id (for tests, bench)."""
        queue = list(requests)
        while queue or self.running:
            while queue and self.admit(queue[0]):
                queue.pop(0)
            if not self.running:
                raise LlamayError("a request cannot be admitted: the KV cache is too small for its prompt")
            self.step()
        return {r.id: r.generated for r in requests}
