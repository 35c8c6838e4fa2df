"""Mirostat (Basu et al.): steer the sampled tokens' surprise toward `tau`, updating mu with rate `eta`.

v1 estimates the Zipf exponent s from the top `m` candidates and keeps the k that match the target
surprise; v2 keeps the candidates whose surprise -log2 p is at most mu. Both draw the token themselves and
replace the rest of the chain (llama.cpp: logit bias, temperature, mirostat)."""

from __future__ import annotations

import math
import random

from .candidates import Candidates, softmax
from .dist import draw


class Mirostat:
    name = "mirostat"

    def __init__(self, n_vocab: int, tau: float, eta: float, rng: random.Random, m: int = 100) -> None:
        self.n_vocab, self.tau, self.eta, self.m = n_vocab, tau, eta, m
        self.rng = rng
        self.mu = 2.0 * tau

    def reset(self) -> None:
        self.mu = 2.0 * self.tau

    def choose(self, c: Candidates) -> int:
        items = c.sort()
        probs = softmax([v for _, v in items])
        sum_tb = sum_t2 = 0.0
        for i in range(min(self.m - 1, len(items) - 1)):
            if probs[i + 1] <= 0.0:
                break
            t = math.log((i + 2) / (i + 1))
            sum_tb += t * math.log(probs[i] / probs[i + 1])
            sum_t2 += t * t
        s_hat = sum_tb / sum_t2 if sum_t2 > 0 else 1.0
        eps = s_hat - 1.0
        try:
            k = ((eps * 2.0**self.mu) / (1.0 - self.n_vocab ** (-eps))) ** (1.0 / s_hat) if eps != 0 else len(items)
        except (OverflowError, ZeroDivisionError):
            k = len(items)
        if not isinstance(k, float | int) or not math.isfinite(k):  # a negative base gives a complex; inf, nan
            k = len(items)
        del items[max(int(min(k, len(items))), 1) :]
        i = draw(c, self.rng)
        self._update(softmax([v for _, v in items])[i])
        return c.items[i][0]

    def _update(self, p: float) -> None:
        surprise = -math.log2(p) if p > 0 else 64.0
        self.mu -= self.eta * (surprise - self.tau)


class MirostatV2(Mirostat):
    name = "mirostat_v2"

    def __init__(self, tau: float, eta: float, rng: random.Random) -> None:
        super().__init__(0, tau, eta, rng)

    def choose(self, c: Candidates) -> int:
        items = c.sort()
        probs = softmax([v for _, v in items])
        keep = next((i for i, q in enumerate(probs) if q <= 0 or -math.log2(q) > self.mu), len(items))
        del items[max(keep, 1) :]
        i = draw(c, self.rng)
        self._update(softmax([v for _, v in items])[i])
        return c.items[i][0]
