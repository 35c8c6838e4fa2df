"""Min-p: keep candidates whose probability is at least p times the most likely one's (at least
`min_keep`). p <= 0 is off."""

from __future__ import annotations

import math

from .candidates import Candidates


class MinP:
    name = "min_p"

    def __init__(self, p: float, min_keep: int = 0) -> None:
        self.p, self.min_keep = p, min_keep

    def apply(self, c: Candidates) -> None:
        if self.p <= 0.0:
            return
        items = c.explicit()
        if not items:
            return
        threshold = max(v for _, v in items) + math.log(self.p)
        kept = [pair for pair in items if pair[1] >= threshold]
        if kept and len(kept) >= self.min_keep:
            c.set(kept, c.sorted)
            return
        items = c.sort()  # too few: keep the first min_keep of the sorted list
        i = 1
        while i < len(items) and (items[i][1] >= threshold or i < self.min_keep):
            i += 1
        del items[i:]
