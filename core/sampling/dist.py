"""The final draw: sample a candidate from the softmax of its logits with a seeded RNG.

Python's `random.Random` (Mersenne Twister, seeded from an int) gives the same sequence under CPython and
Pyodide, so a seed reproduces the same tokens natively and in the browser. It is not llama.cpp's
`std::mt19937` + `uniform_real_distribution`, so the same seed picks differently there.
"""

from __future__ import annotations

import random

from .candidates import Candidates, softmax


def draw(c: Candidates, rng: random.Random) -> int:
    """Index (into c.items) of the drawn candidate."""
    items = c.explicit()
    if len(items) == 1:
        return 0
    probs = softmax([v for _, v in items])
    r = rng.random()
    acc = 0.0
    for i, q in enumerate(probs):
        acc += q
        if r < acc:
            return i
    return max(range(len(items)), key=probs.__getitem__)  # rounding left r above the total
