"""Samplers as a chain of small transforms over candidate (token, logit) pairs, in llama.cpp's order:
top-k → top-p → min-p → temperature → draw. Greedy (temperature ≤ 0) short-circuits to argmax.

The RNG is Python's Mersenne Twister, seeded: the same seed draws the same tokens natively and under Pyodide.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

DEFAULT_TOP_K = 40


@dataclass(frozen=True)
class SamplerConfig:
    temperature: float = 0.8
    top_k: int = DEFAULT_TOP_K  # 0: the whole vocabulary
    top_p: float = 0.95
    min_p: float = 0.05
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


def _softmax(logits: list[float]) -> list[float]:
    m = max(logits)
    e = [math.exp(v - m) for v in logits]
    total = sum(e)
    return [v / total for v in e]


def top_p(cands: list[tuple[int, float]], p: float) -> list[tuple[int, float]]:
    """Keep the smallest prefix (by descending logit) whose probability mass reaches p (at least one)."""
    if p >= 1.0:
        return cands
    probs = _softmax([c[1] for c in cands])
    mass = 0.0
    for i, q in enumerate(probs):
        mass += q
        if mass >= p:
            return cands[: i + 1]
    return cands


def min_p(cands: list[tuple[int, float]], p: float) -> list[tuple[int, float]]:
    """Keep tokens whose probability is at least p times the most likely one's."""
    if p <= 0.0:
        return cands
    threshold = cands[0][1] + math.log(p)
    return [c for c in cands if c[1] >= threshold] or cands[:1]


class Sampler:
    def __init__(self, cfg: SamplerConfig | None = None) -> None:
        self.cfg = cfg or SamplerConfig()
        self.rng = random.Random(self.cfg.seed if self.cfg.seed is not None else random.randrange(1 << 32))

    def sample(self, be: Any, logits: Any, offset: int, n_vocab: int) -> int:
        cfg = self.cfg
        if cfg.greedy:
            return be.argmax(logits, offset, n_vocab)
        k = cfg.top_k if 0 < cfg.top_k < n_vocab else n_vocab
        cands = be.top_k(logits, offset, n_vocab, k)  # sorted by descending logit
        cands = top_p(cands, cfg.top_p)
        cands = min_p(cands, cfg.min_p)
        probs = _softmax([v / cfg.temperature for _, v in cands])
        r = self.rng.random()
        acc = 0.0
        for (tok, _), q in zip(cands, probs, strict=True):
            acc += q
            if r < acc:
                return tok
        return cands[-1][0]


def log_softmax(logits: list[float]) -> list[float]:
    m = max(logits)
    lse = m + math.log(sum(math.exp(v - m) for v in logits))
    return [v - lse for v in logits]
