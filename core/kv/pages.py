"""Fixed-size KV pages from a pool sized at start-up; each sequence holds a page table.

Position p of a sequence lives in slot `table[p // page_size] * page_size + p % page_size` of every layer's
cache. The pool bounds memory, not the number of sequences. Pages carry reference counts so that later
layers (prefix sharing, copy-on-write forks) can share them.
"""

from __future__ import annotations

from ..errors import LlamayError


class OutOfPages(LlamayError):
    """The KV pool has no free page left."""


class KVPages:
    def __init__(self, n_pages: int, page_size: int) -> None:
        self.n_pages = n_pages
        self.page_size = page_size
        self.free: list[int] = list(range(n_pages - 1, -1, -1))  # pop() hands out low pages first
        self.refs = [0] * n_pages

    @property
    def n_slots(self) -> int:
        return self.n_pages * self.page_size

    def alloc(self) -> int:
        if not self.free:
            raise OutOfPages(f"the KV cache is full ({self.n_pages} pages of {self.page_size} positions)")
        page = self.free.pop()
        self.refs[page] = 1
        return page

    def retain(self, page: int) -> None:
        self.refs[page] += 1

    def release(self, page: int) -> None:
        self.refs[page] -= 1
        if self.refs[page] == 0:
            self.free.append(page)
        elif self.refs[page] < 0:
            raise AssertionError(f"KV page {page} released more often than retained")

    def grow(self, table: list[int], n_positions: int) -> None:
        """Extend a page table so it covers positions 0 .. n_positions-1."""
        need = -(-n_positions // self.page_size)
        if need - len(table) > len(self.free):
            raise OutOfPages(
                f"the KV cache is full: {n_positions} positions need {need - len(table)} more pages, "
                f"{len(self.free)} are free"
            )
        while len(table) < need:
            table.append(self.alloc())

    def slot(self, table: list[int], pos: int) -> int:
        return table[pos // self.page_size] * self.page_size + pos % self.page_size
