"""Top-p (nucleus): keep the most likely candidates until their probability mass reaches p (at least
`min_keep`, and always one). p >= 1 is off."""

from __future__ import annotations

from .candidates import Candidates, softmax


class TopP:
    name = "top_p"

    def __init__(self, p: float, min_keep: int = 0) -> None:
        self.p, self.min_keep = p, min_keep

    def apply(self, c: Candidates) -> None:
        if self.p >= 1.0:
            return
        items = c.sort()
        probs = softmax([v for _, v in items])
        mass = 0.0
        for i, q in enumerate(probs):
            mass += q
            if mass >= self.p and i + 1 >= self.min_keep:
                del items[i + 1 :]
                return
