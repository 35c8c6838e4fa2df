"""XTC, "exclude top choices": with probability `probability`, drop every candidate at or above `threshold`
except the least likely of them, so the model picks a less obvious token. Off when probability <= 0 or
threshold > 0.5. Draws from its own seeded RNG, as llama.cpp's does, so it never shifts the final draw."""

from __future__ import annotations

import random

from .candidates import Candidates, softmax


class XTC:
    name = "xtc"

    def __init__(self, probability: float, threshold: float, min_keep: int, rng: random.Random) -> None:
        self.probability, self.threshold, self.min_keep = probability, threshold, min_keep
        self.rng = rng

    def apply(self, c: Candidates) -> None:
        if self.probability <= 0.0 or self.threshold > 0.5:
            return
        items = c.explicit()
        if len(items) < 2:
            return
        if self.rng.random() > self.probability:
            return
        items = c.sort()
        probs = softmax([v for _, v in items])
        last = 0
        for i, q in enumerate(probs):
            if q < self.threshold:
                break
            last = i
        if last > 0 and len(items) - last >= self.min_keep:
            del items[:last]
