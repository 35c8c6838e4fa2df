"""Temperature, with llama.cpp's dynamic variant (`temp-ext`): logits /= temp. With `dynatemp_range` > 0
the temperature moves within temp ± range by the normalized entropy of the candidates (raised to
`exponent`). temp <= 0 keeps only the most likely candidate (greedy)."""

from __future__ import annotations

import math

from .candidates import Candidates, softmax


def scale(c: Candidates, temp: float) -> None:
    items = c.explicit()
    if not items:
        return
    top = max(v for _, v in items)
    if temp <= 0.0 or (math.isfinite(top) and top / temp == math.inf):  # a temperature so small that the top
        best = max(items, key=lambda p: (p[1], -p[0]))  # logit overflows is its limit, greedy
        c.set([best], True)
        return
    c.set([(t, v / temp) for t, v in items], c.sorted)


class Temperature:
    name = "temperature"

    def __init__(self, temp: float, dynatemp_range: float = 0.0, exponent: float = 1.0) -> None:
        self.temp, self.range, self.exponent = temp, dynatemp_range, exponent

    def apply(self, c: Candidates) -> None:
        if self.range <= 0.0:
            scale(c, self.temp)
            return
        items = c.sort()
        if len(items) <= 1:
            return
        lo, hi = max(0.0, self.temp - self.range), self.temp + self.range
        probs = softmax([v for _, v in items])
        entropy = -sum(q * math.log(q) for q in probs if q > 0)
        normalized = min(entropy / math.log(len(items)), 1.0)  # rounding can pass 1 (a uniform row of 5: 1 + 2e-16)
        scale(c, lo + (hi - lo) * normalized**self.exponent)
