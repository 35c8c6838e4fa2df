"""Fixed-size KV pages from a pool sized at start-up, with reference counts.

Position p of a sequence lives in slot `table[p // page_size] * page_size + p % page_size` of its group's cache.
The pool bounds memory, not the number of sequences. A page's reference count is the number of owners: the
sequences whose tables hold it, snapshots, and the prefix cache. A page with more than one owner is never
written; the writer copies it first (copy-on-write). When the pool runs dry, `reclaim` (the prefix cache's
eviction) is asked to give pages back before allocation fails.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import LlamayError

NO_PAGE = -1  # a table entry whose page was freed (positions that fell out of a sliding window)


class OutOfPages(LlamayError):
    """The KV pool has no free page left, even after evicting cached prefixes."""


class KVPages:
    def __init__(self, n_pages: int, page_size: int, name: str = "kv") -> None:
        self.n_pages = n_pages
        self.page_size = page_size
        self.name = name
        self.free: list[int] = list(range(n_pages - 1, -1, -1))  # pop() hands out low pages first
        self.refs = [0] * n_pages
        self.reclaim: Callable[[int], int] | None = None  # (pages wanted) -> pages released

    @property
    def n_slots(self) -> int:
        return self.n_pages * self.page_size

    @property
    def n_free(self) -> int:
        return len(self.free)

    def ensure_free(self, n: int) -> None:
        if n > len(self.free) and self.reclaim is not None:
            self.reclaim(n - len(self.free))
        if n > len(self.free):
            raise OutOfPages(
                f"the {self.name} cache is full: {n} more pages of {self.page_size} positions are needed, "
                f"{len(self.free)} of {self.n_pages} are free"
            )

    def alloc(self) -> int:
        self.ensure_free(1)
        page = self.free.pop()
        self.refs[page] = 1
        return page

    def retain(self, page: int) -> None:
        if page != NO_PAGE:
            if self.refs[page] <= 0:
                raise AssertionError(f"{self.name} page {page} retained while free")
            self.refs[page] += 1

    def release(self, page: int) -> None:
        if page == NO_PAGE:
            return
        self.refs[page] -= 1
        if self.refs[page] == 0:
            self.free.append(page)
        elif self.refs[page] < 0:
            raise AssertionError(f"{self.name} page {page} released more often than retained")

    def shared(self, page: int) -> bool:
        return page != NO_PAGE and self.refs[page] > 1
