"""Top-k: keep the k most likely candidates (k <= 0 keeps all). Uses the backend's top-k on a lazy row."""

from __future__ import annotations

from .candidates import Candidates


class TopK:
    name = "top_k"

    def __init__(self, k: int) -> None:
        self.k = k

    def apply(self, c: Candidates) -> None:
        c.take_top(self.k)
