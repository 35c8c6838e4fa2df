"""Logit bias: add a fixed amount to chosen tokens' logits (-inf bans a token). First in llama.cpp's chain."""

from __future__ import annotations

from .candidates import Candidates


class LogitBias:
    name = "logit-bias"

    def __init__(self, bias: dict[int, float]) -> None:
        self.bias = dict(bias)

    def apply(self, c: Candidates) -> None:
        for token, b in self.bias.items():
            c.adjust(token, lambda v, b=b: v + b)
