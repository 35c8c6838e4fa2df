"""Locally typical sampling (Meister et al.): keep the candidates whose surprise -log p is closest to the
distribution's entropy, until their mass exceeds p. p >= 1 is off."""

from __future__ import annotations

import math

from .candidates import Candidates, softmax


class Typical:
    name = "typ_p"

    def __init__(self, p: float, min_keep: int = 0) -> None:
        self.p, self.min_keep = p, min_keep

    def apply(self, c: Candidates) -> None:
        if self.p >= 1.0:
            return
        items = c.sort()
        probs = softmax([v for _, v in items])
        entropy = -sum(q * math.log(q) for q in probs if q > 0)
        shifted = [abs(-math.log(q) - entropy) if q > 0 else math.inf for q in probs]
        order = sorted(range(len(items)), key=shifted.__getitem__)
        mass = 0.0
        last = len(order)
        for i, j in enumerate(order):
            mass += probs[j]
            if mass > self.p and (self.min_keep == 0 or i >= self.min_keep - 1):
                last = i + 1
                break
        c.set([items[j] for j in order[:last]], False)
