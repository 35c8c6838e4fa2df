"""DRY, "don't repeat yourself" (koboldcpp's sampler, as in llama.cpp): a token that would extend a sequence
already seen in the context is penalised by `multiplier * base ** (length - allowed_length)`, where length is
the longest such repeat (at least `allowed_length`).

    context  a b c x a b   next 'c' would repeat "a b c"  -> length 2 before it

The repeats are found with the Z-function of the reversed context (each position's longest common prefix with
the most recent tokens), in O(n). Sequence breakers ("\\n", ":", '"', "*" by default) cut repeats: a repeat
never reaches back across one, and a token that is itself a breaker is never penalised. A breaker spanning
several tokens is matched as a head token plus the tokens of the rest of its text (needs the tokenizer).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

from .candidates import Candidates

_MAX_BREAKER_CHARS = 40
_MAX_TAIL_TOKENS = 20


def z_function(seq: Sequence[int]) -> list[int]:
    """z[k] = length of the longest common prefix of seq and seq[k:] (z[0] = len(seq))."""
    n = len(seq)
    z = [0] * n
    if n:
        z[0] = n
    left = right = 0  # [left, right) is the rightmost match window found so far
    for k in range(1, n):
        length = min(right - k, z[k - left]) if k < right else 0
        while k + length < n and seq[length] == seq[k + length]:
            length += 1
        z[k] = length
        if k + length > right:
            left, right = k, k + length
    return z


def breaker_sequences(breakers: Sequence[str], tokenizer: Any) -> dict[int, set[tuple[int, ...]]]:
    """head token -> tails: () when the token's text contains a breaker; else the tokens that complete a
    breaker whose beginning ends the head token's text. A pass over the vocabulary (seconds for 50k tokens):
    kept for the last few (tokenizer, breakers) pairs, so the n samplers of one request share one pass. The
    result is shared: never modify it."""
    return _breaker_sequences(tuple(breakers), tokenizer)


@functools.lru_cache(maxsize=8)
def _breaker_sequences(breakers: tuple[str, ...], tokenizer: Any) -> dict[int, set[tuple[int, ...]]]:
    heads: dict[int, set[tuple[int, ...]]] = {}
    texts = [tokenizer.token_bytes(i, special=False).decode("utf-8", "replace") for i in range(tokenizer.n_vocab)]
    for br in breakers:
        br = br[:_MAX_BREAKER_CHARS]
        if not br:
            continue
        for tok, text in enumerate(texts):
            if not text:
                continue
            if br in text:
                heads.setdefault(tok, set()).add(())
                continue
            start = text.find(br[0])
            while start >= 0:
                overlap = len(text) - start
                if overlap < len(br) and br.startswith(text[start:]):
                    tail = tokenizer.encode(br[overlap:], add_special=False, parse_special=False)
                    heads.setdefault(tok, set()).add(tuple(tail[:_MAX_TAIL_TOKENS]))
                start = text.find(br[0], start + 1)
    return heads


class Dry:
    name = "dry"

    def __init__(
        self,
        multiplier: float,
        base: float,
        allowed_length: int,
        last_n: int,
        breakers: dict[int, set[tuple[int, ...]]],
    ) -> None:
        self.multiplier, self.base, self.allowed_length = multiplier, base, allowed_length
        self.last_n = last_n  # -1: everything accepted (the context); 0: off
        self.breakers = breakers
        self.history: list[int] = []

    @property
    def active(self) -> bool:
        return self.multiplier != 0.0 and self.base >= 1.0 and self.last_n != 0

    def accept(self, token: int) -> None:
        if not self.active:
            return
        self.history.append(token)
        if self.last_n > 0 and len(self.history) > 2 * self.last_n:
            del self.history[: -self.last_n]

    def reset(self) -> None:
        self.history.clear()

    def apply(self, c: Candidates) -> None:
        if not self.active:
            return
        window = self.history if self.last_n < 0 else self.history[-self.last_n :]
        n = len(window)
        if n <= self.allowed_length:
            return
        recent = window[::-1]  # recent[0] is the last token
        limit = self._repeat_limit(recent)
        if limit < self.allowed_length:
            return
        z = z_function(recent)
        longest: dict[int, int] = {}
        for k in range(1, n):
            length = min(z[k], limit)
            if length >= self.allowed_length:
                token = recent[k - 1]  # what followed that earlier occurrence
                if longest.get(token, -1) < length:
                    longest[token] = length
        max_exp = int(88.7228391 / math.log(self.base)) if self.base > 1.000001 else 0
        for token, length in longest.items():
            if () in self.breakers.get(token, ()):
                continue
            exp = length - self.allowed_length
            if max_exp > 0:
                exp = min(exp, max_exp)
            try:
                penalty = self.multiplier * self.base**exp
            except OverflowError:  # llama.cpp's float pow gives inf: the token is banned
                penalty = math.inf
            c.adjust(token, lambda v, p=penalty: v - p)

    def _repeat_limit(self, recent: list[int]) -> int:
        """How far back a repeat may reach: up to the most recent complete sequence breaker."""
        for i, token in enumerate(recent):
            tails = self.breakers.get(token)
            if not tails:
                continue
            best = -1
            for tail in tails:
                if best < len(tail) <= i and all(tail[j] == recent[i - j - 1] for j in range(len(tail))):
                    best = len(tail)
            if best >= 0:
                return i - best
        return len(recent)
