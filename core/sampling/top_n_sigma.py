"""Top-n-sigma: keep candidates whose logit is within n standard deviations of the largest (over all
finite logits). n <= 0 is off."""

from __future__ import annotations

import math

from .candidates import Candidates


class TopNSigma:
    name = "top_n_sigma"

    def __init__(self, n: float) -> None:
        self.n = n

    def apply(self, c: Candidates) -> None:
        if self.n <= 0.0:
            return
        items = c.explicit()
        finite = [v for _, v in items if math.isfinite(v)]
        if len(items) <= 1 or not finite:
            return
        mean = sum(finite) / len(finite)
        std = math.sqrt(sum((v - mean) * (v - mean) for v in finite) / len(finite))  # overflow: inf, not an error
        threshold = max(finite) - self.n * std
        kept = [pair for pair in items if pair[1] >= threshold]
        if kept:  # a NaN threshold keeps nothing: leave the candidates as they are
            c.set(kept, c.sorted)
