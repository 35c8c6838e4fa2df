"""Repetition, frequency and presence penalties over the last `last_n` accepted tokens (llama.cpp's
`penalties` sampler): for a token seen `count` times,

    logit = logit / repeat if logit > 0 else logit * repeat
    logit -= count * frequency + (count > 0) * presence

Only the tokens in the window are touched, so the logits row stays in the backend.
"""

from __future__ import annotations

from collections import deque

from .candidates import Candidates


class Penalties:
    name = "penalties"

    def __init__(self, last_n: int, repeat: float, frequency: float, presence: float) -> None:
        self.last_n = last_n  # -1: everything accepted so far; 0: off
        self.repeat, self.frequency, self.presence = repeat, frequency, presence
        self.window: deque[int] = deque()
        self.counts: dict[int, int] = {}

    @property
    def active(self) -> bool:
        return self.last_n != 0 and (self.repeat != 1.0 or self.frequency != 0.0 or self.presence != 0.0)

    def accept(self, token: int) -> None:
        if self.last_n == 0:
            return
        self.counts[token] = self.counts.get(token, 0) + 1
        self.window.append(token)
        if 0 < self.last_n < len(self.window):
            old = self.window.popleft()
            left = self.counts[old] - 1
            if left:
                self.counts[old] = left
            else:
                del self.counts[old]

    def reset(self) -> None:
        self.window.clear()
        self.counts.clear()

    def apply(self, c: Candidates) -> None:
        if not self.active:
            return
        repeat, freq, present = self.repeat, self.frequency, self.presence
        for token, count in self.counts.items():
            c.adjust(token, lambda v, n=count: (v * repeat if v <= 0 else v / repeat) - n * freq - present)
