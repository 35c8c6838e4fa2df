"""Continuous batching: many sequences advance together, one forward pass per step.

Each step takes the next token of every decoding request and, in the room left under the batch budget, a chunk of
the prompts still prefilling (so a long prompt cannot stall the others). One forward over that mixed batch reads
each weight matrix once for all of them; every request whose prompt is done gets a token sampled from its row.

A request is admitted — given a sequence and KV pages — only when there is room; it first adopts the longest
prefix the cache holds (its own radix tree), so only the rest of the prompt is computed.

One request's failure never fails another's. Sampling (with its constraint and logprobs) runs per request: an
error there ends that request alone (an Event with `error`). A forward pass that raises is rolled back (the
positions it counted and the pages it added go, `KVCache.roll_back`) and each request of the batch is run again
alone, once: only those that fail alone end with the error, the others go on with the same tokens.
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
    reuse_cache: bool = True  # adopt the prefix cache's pages (False: llama-server's cache_prompt false)
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
    error: Exception | None = None  # why the request failed (finish_reason "error"); the others go on


@dataclass
class _Part:
    """One request's share of a step: its pending token (decoding) or a chunk of its prompt (prefilling)."""

    req: Request
    tokens: list[int]
    prefilled: int  # req.prefilled before the step
    pending: int | None  # req.pending before the step

    def take(self) -> None:
        """Count the part as fed (before the forward, which reads the requests' progress)."""
        if self.pending is not None:
            self.req.pending = None
        else:
            self.req.prefilled = self.prefilled + len(self.tokens)

    def give_back(self) -> None:
        self.req.prefilled, self.req.pending = self.prefilled, self.pending


class _StepFailed(Exception):
    """A forward that raised, rolled back; `lost`: requests whose sequences could not be rolled back."""

    def __init__(self, error: Exception, lost: set[Request]) -> None:
        super().__init__(str(error))
        self.error = error
        self.lost = lost


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
        return any(not s.active for s in self.st.kv.sequences)

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
        try:
            with st.kv.claimed() as seq:  # given back on any error below
                reused = st.kv.reuse_prefix(seq, req.prompt) if req.reuse_cache else 0
                s = st.kv.sequences[seq]
                for g, table in zip(st.kv.groups, s.tables, strict=True):
                    if not g.window:  # window groups allocate as they go (old pages freed meanwhile)
                        g.prepare_write(table, reused, len(req.prompt))
        except OutOfPages:
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
            self.st.kv.release(req.seq, cache=reason != "error")
            req.seq = None

    def _fail(self, req: Request, error: Exception) -> Event:
        self._finish(req, "error")
        return Event(req, None, "error", error=error)

    def audit(self) -> list[str]:
        """Sequences without an owner or with two (call between steps, with no other user of the State)."""
        problems = []
        owners: dict[int, Request] = {}
        for req in self.running:
            if req.seq is None or not self.st.kv.sequences[req.seq].active:
                problems.append(f"request {req.id} runs without an active sequence ({req.seq})")
            elif req.seq in owners:
                problems.append(f"requests {owners[req.seq].id} and {req.id} both run in sequence {req.seq}")
            else:
                owners[req.seq] = req
        for s in self.st.kv.sequences:
            if s.active and s.index not in owners:
                problems.append(f"sequence {s.index} is in use but no running request owns it")
        return problems

    # -- stepping -------------------------------------------------------------------------------------------

    def step(self) -> list[Event]:
        """One forward pass over every running request; returns the tokens sampled and requests finished."""
        events = self._grow_decoders()
        parts = self._plan()
        if not parts:
            return events
        self.last_batch_width = len(parts)
        self.last_batch_tokens = sum(len(p.tokens) for p in parts)
        try:
            rows = self._forward(parts)
        except _StepFailed as failed:  # find the culprit: each request again, alone
            return events + self._isolate(parts, failed)
        return events + self._sample(rows)

    def _plan(self) -> list[_Part]:
        """This step's share of each request: every decoder's pending token, then prefill chunks in the room left
        under the batch budget."""
        parts = [_Part(r, [r.pending], r.prefilled, r.pending) for r in self.running if r.pending is not None]
        room = self.budget - len(parts)
        for req in self.running:
            if room <= 0:
                break
            if not req.decoding:
                n = min(room, self.prefill_chunk, len(req.prompt) - req.prefilled)
                parts.append(_Part(req, req.prompt[req.prefilled : req.prefilled + n], req.prefilled, None))
                room -= n
        for p in parts:
            p.take()
        return parts

    def _forward(self, parts: Sequence[_Part]) -> list[tuple[Request, int]]:
        """One forward over the parts; on an error the State and the requests are as before it (_StepFailed)."""
        tokens: list[int] = []
        seqs: list[int] = []
        rows: list[tuple[Request, int]] = []  # (request, batch index of the token it samples from)
        for p in parts:
            tokens.extend(p.tokens)
            seqs.extend([p.req.seq] * len(p.tokens))
            if p.req.decoding:
                rows.append((p.req, len(tokens) - 1))
        point = self.st.kv.checkpoint(seqs)
        try:
            forward(self.model, self.st, tokens, seqs, [row for _, row in rows])
        except Exception as e:
            lost = self.st.kv.roll_back(point)
            for p in parts:
                p.give_back()
            raise _StepFailed(e, {p.req for p in parts if p.req.seq in lost}) from e
        return rows

    def _isolate(self, parts: Sequence[_Part], failed: _StepFailed) -> list[Event]:
        """After a failed batch: each request's part alone; only the ones that fail alone end (with the error)."""
        if len(parts) == 1:
            return [self._fail(parts[0].req, failed.error)]
        events = []
        for p in parts:
            if p.req in failed.lost:  # rolled back as far as it could be: it cannot go on
                events.append(self._fail(p.req, failed.error))
                continue
            p.take()
            try:
                rows = self._forward([p])
            except _StepFailed as alone:
                events.append(self._fail(p.req, alone.error))
                continue
            events += self._sample(rows)
        return events

    def _grow_decoders(self) -> list[Event]:
        """Find a page for every decoder's next position; one that cannot get one ends ("length")."""
        events = []
        for req in list(self.running):
            if not (req.decoding and req.pending is not None):
                continue
            s = self.st.kv.sequences[req.seq]
            try:
                for g, table in zip(self.st.kv.groups, s.tables, strict=True):
                    g.prepare_write(table, s.n_past, s.n_past + 1)
            except OutOfPages:
                self._finish(req, "length")
                events.append(Event(req, None, "length"))
            except Exception as e:
                events.append(self._fail(req, e))
        return events

    def _sample(self, rows: Sequence[tuple[Request, int]]) -> list[Event]:
        """A token for each row's request, each on its own: an error in one request's sampling ends that one."""
        events = []
        for j, (req, _row) in enumerate(rows):
            try:
                events.append(self._sample_one(req, j))
            except Exception as e:
                events.append(self._fail(req, e))
        return events

    def _sample_one(self, req: Request, j: int) -> Event:
        if req.max_tokens <= 0:  # the prompt evaluated into the cache, nothing generated (llama-server's n_predict 0)
            self._finish(req, "length")
            return Event(req, None, "length")
        n_vocab = self.model.cfg.n_vocab
        be = self.model.backend
        tok = req.sampler.sample(be, self.st.logits, j * n_vocab, n_vocab)
        logprob, top = None, ()
        if req.logprobs is not None:
            lp = log_softmax(be.read_f32(self.st.logits, j * n_vocab, n_vocab))
            logprob = lp[tok]
            top = tuple((t, lp[t]) for t in heapq.nlargest(req.logprobs, range(n_vocab), key=lp.__getitem__))
        if req.stop_at_eog and self.is_eog(tok):
            self._finish(req, "stop")
            return Event(req, None, "stop")
        req.generated.append(tok)
        reason = None
        if len(req.generated) >= req.max_tokens or self.st.kv.sequences[req.seq].n_past + 1 >= self.st.n_ctx:
            reason = "length"
        if reason:
            self._finish(req, reason)
        else:
            req.pending = tok
        return Event(req, tok, reason, logprob, top)

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
