"""A logits row in the portable backend, and a spy that counts which backend reads a sampler makes."""

from __future__ import annotations

from llamay.kernels import get_backend
from llamay.sampling import Candidates


class SpyBackend:
    """The portable backend, counting argmax / top_k / read_f32 calls (and the floats read)."""

    def __init__(self) -> None:
        self.be = get_backend("portable")
        self.calls: dict[str, int] = {"argmax": 0, "top_k": 0, "read_f32": 0}
        self.floats_read = 0

    def argmax(self, buf, off, n):
        self.calls["argmax"] += 1
        return self.be.argmax(buf, off, n)

    def top_k(self, buf, off, n, k):
        self.calls["top_k"] += 1
        return self.be.top_k(buf, off, n, k)

    def read_f32(self, buf, off, n):
        self.calls["read_f32"] += 1
        self.floats_read += n
        return self.be.read_f32(buf, off, n)


def row(values: list[float]):
    """(backend, buffer) holding `values` as a float32 logits row."""
    spy = SpyBackend()
    buf = spy.be.alloc_f32(len(values))
    spy.be.write_f32(buf, values)
    return spy, buf


def candidates(values: list[float]) -> Candidates:
    spy, buf = row(values)
    return Candidates(spy, buf, 0, len(values))


def f32(values: list[float]) -> list[float]:
    """The values rounded to float32, as the backend stores them."""
    from array import array

    return array("f", values).tolist()
