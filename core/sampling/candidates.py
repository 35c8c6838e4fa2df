"""The candidate tokens a sampler chain works on.

A chain starts from the model's logits row, which lives in a backend buffer (49k floats for SmolLM2: reading it
all into Python costs about a millisecond). So `Candidates` starts *lazy*: the row stays in the backend and
transforms that touch a few tokens (logit bias, penalties, DRY) record edits for just those. The first
transform that needs an explicit list asks for it: `take_top(k)` uses the backend's top-k (k plus the number
of edited tokens, then merged with the edits), anything else reads the whole row once. From then on the
candidates are an explicit list of (token, logit) pairs, largest first when `sorted`.

`allowed` (a constraint's token mask) restricts the candidates from the start: only allowed tokens are read.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

Pair = tuple[int, float]
_DENSE = 4096  # a mask allowing more tokens than this is served from the backend's top-k, filtered


class Candidates:
    def __init__(self, be: Any, buf: Any, offset: int, n_vocab: int, allowed: Any = None) -> None:
        self.be, self.buf, self.offset, self.n_vocab = be, buf, offset, n_vocab
        self.allowed = allowed  # a TokenMask, or None for every token
        self.edits: dict[int, float] = {}  # lazy mode: token -> edited logit
        self.items: list[Pair] | None = None  # explicit mode
        self.sorted = False
        self._row: list[float] | None = None

    # -- reading --------------------------------------------------------------------------------------------

    @property
    def lazy(self) -> bool:
        return self.items is None

    def raw(self, token: int) -> float:
        """The model's logit for `token` (before any edit)."""
        if self._row is not None:
            return self._row[token]
        return self.be.read_f32(self.buf, self.offset + token, 1)[0]

    def row(self) -> list[float]:
        """The whole raw logits row (read once, then kept)."""
        if self._row is None:
            self._row = self.be.read_f32(self.buf, self.offset, self.n_vocab)
        return self._row

    # -- editing a few tokens (works lazy or explicit) ----------------------------------------------------------

    def adjust(self, token: int, fn) -> None:
        """Replace the logit of `token` with fn(logit) (no-op for a token that is no longer a candidate)."""
        if not 0 <= token < self.n_vocab:
            return
        if self.items is None:
            if self.allowed is not None and token not in self.allowed:
                return
            current = self.edits.get(token)
            self.edits[token] = fn(self.raw(token) if current is None else current)
            return
        for i, (t, v) in enumerate(self.items):
            if t == token:
                self.items[i] = (t, fn(v))
                self.sorted = False
                return

    # -- becoming explicit ------------------------------------------------------------------------------------

    def take_top(self, k: int) -> None:
        """Keep the k largest (k <= 0: keep all), sorted."""
        if k <= 0:
            return
        dense = self.allowed is None or len(self.allowed) > _DENSE
        if self.items is None and dense and self._top_from_backend(k):
            return
        items = self.explicit()
        if not self.sorted:
            if k < len(items) // 8:
                self.items = items = heapq.nsmallest(k, items, key=_order)
            else:
                items.sort(key=_order)
            self.sorted = True
        del items[k:]

    def _top_from_backend(self, k: int) -> bool:
        """The backend's top-k of the raw row, merged with the edits; with a (dense) mask, widen the backend's
        k until k allowed tokens are found. False when that would mean reading most of the row anyway."""
        edits, allowed, n = self.edits, self.allowed, self.n_vocab
        want = min(n, k + len(edits))
        while True:
            raw = self.be.top_k(self.buf, self.offset, n, want)
            pairs = [(t, float(v)) for t, v in raw if t not in edits and (allowed is None or t in allowed)]
            if len(pairs) >= k or want >= n:
                break
            if want * 8 > n // 2:
                return False
            want *= 8
        pairs += [(t, v) for t, v in edits.items() if allowed is None or t in allowed]
        pairs.sort(key=_order)
        self.items = pairs[:k]
        self.sorted = True
        return True

    def explicit(self) -> list[Pair]:
        """The candidates as an explicit (token, logit) list (reading the row if still lazy)."""
        if self.items is None:
            if self.allowed is not None:
                tokens = self.allowed.tokens()
                if len(tokens) <= 64 and self._row is None:
                    read = self.be.read_f32
                    pairs = [(t, read(self.buf, self.offset + t, 1)[0]) for t in tokens]
                else:
                    row = self.row()
                    pairs = [(t, row[t]) for t in tokens]
            else:
                pairs = list(enumerate(self.row()))
            edits = self.edits
            if edits:
                pairs = [(t, edits[t]) if t in edits else (t, v) for t, v in pairs]
            self.items = pairs
            self.sorted = False
        return self.items

    def sort(self) -> list[Pair]:
        items = self.explicit()
        if not self.sorted:
            items.sort(key=_order)
            self.sorted = True
        return items

    def set(self, items: list[Pair], sorted_: bool) -> None:
        self.items = items
        self.sorted = sorted_

    def best(self) -> int:
        """The token with the largest logit (ties: smallest id)."""
        if self.items is None and not self.edits and self.allowed is None:
            return self.be.argmax(self.buf, self.offset, self.n_vocab)
        self.take_top(1)
        return self.items[0][0]


def _order(pair: Pair) -> tuple[float, int]:
    return (-pair[1], pair[0])


def softmax(logits: list[float]) -> list[float]:
    """Probabilities of logits (-inf gives 0; if some are +inf, they share all the mass, as in the limit)."""
    m = max(logits)
    if m == -math.inf:
        return [1.0 / len(logits)] * len(logits)
    if m == math.inf:
        n_inf = logits.count(math.inf)
        return [1.0 / n_inf if v == math.inf else 0.0 for v in logits]
    e = [math.exp(v - m) for v in logits]
    total = sum(e)
    return [v / total for v in e]


def log_softmax(logits: list[float]) -> list[float]:
    m = max(logits)
    if m == math.inf:
        return [math.log(p) if p > 0 else -math.inf for p in softmax(logits)]
    lse = m + math.log(sum(math.exp(v - m) for v in logits))
    return [v - lse for v in logits]


def logsumexp(values: list[float]) -> float:
    m = max(values)
    if m in (-math.inf, math.inf):
        return m
    return m + math.log(math.fsum(math.exp(v - m) for v in values))
