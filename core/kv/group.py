"""A KV group: the layers that share one paged cache, one page pool and one page table per sequence.

Most models have one group. A model with sliding-window layers (gemma3) has two: its global layers keep every
position, its window layers only the last `window` ones, so their pages are freed as the window moves on.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kernels import Backend, BatchView
from .pages import NO_PAGE, KVPages


class KVGroup:
    def __init__(
        self,
        name: str,
        layers: Sequence[int],
        window: int,
        n_pages: int,
        page_size: int,
        kdim: int,
        vdim: int,
        backend: Backend,
        pos: object,
        seq: object,
        n_batch: int,
        n_seq: int,
        max_table: int,
    ) -> None:
        be = self.backend = backend
        self.name = name
        self.layers = tuple(layers)
        self.index = {layer: i for i, layer in enumerate(self.layers)}  # model layer -> layer in this cache
        self.window = window
        self.kdim, self.vdim = kdim, vdim
        self.pages = KVPages(n_pages, page_size, name)
        n_slots = self.n_slots = self.pages.n_slots
        self.k = be.alloc_f32(len(self.layers) * n_slots * kdim)  # (n_layers, n_slots, n_head_kv·head_dim)
        self.v = be.alloc_f32(len(self.layers) * n_slots * vdim)  # (n_layers, n_slots, n_head_kv·head_dim_v)
        self.slots = be.alloc_i32(n_batch)  # (n_batch,) slot each batch token writes
        self.page_list = be.alloc_i32(n_seq * max_table)  # page tables of the batch's sequences, concatenated
        self.page_off = be.alloc_i32(n_seq)  # (n_seq,) where each sequence's table starts in page_list
        self.seq_len = be.alloc_i32(n_seq)  # (n_seq,) positions a non-causal sequence attends to
        self.batch = BatchView(0, pos, seq, self.slots, self.page_list, self.page_off, self.seq_len, page_size)

    @property
    def page_size(self) -> int:
        return self.pages.page_size

    def slot(self, table: list[int], pos: int) -> int:
        ps = self.pages.page_size
        return table[pos // ps] * ps + pos % ps

    def copy_page(self, src: int, dst: int, n_positions: int) -> None:
        """Copy the first n positions of page src to page dst, in every layer of K and V."""
        be, ps = self.backend, self.pages.page_size
        for cache, dim in ((self.k, self.kdim), (self.v, self.vdim)):
            for li in range(len(self.layers)):
                base = li * self.n_slots * dim
                be.copy(cache, base + dst * ps * dim, cache, base + src * ps * dim, n_positions * dim)

    def prepare_write(self, table: list[int], start: int, end: int) -> None:
        """Make positions start..end-1 writable: allocate missing pages; copy a shared page before writing."""
        ps = self.pages.page_size
        need = -(-end // ps)
        first = start // ps
        cow = first < len(table) and self.pages.shared(table[first])
        self.pages.ensure_free(max(0, need - len(table)) + cow)
        if cow:  # copy-on-write of the partly filled page the writes start in
            page = self.pages.alloc()
            self.copy_page(table[first], page, start - first * ps)
            self.pages.release(table[first])
            table[first] = page
        while len(table) < need:
            table.append(self.pages.alloc())

    def slide(self, table: list[int], n_past: int) -> None:
        """Free the pages every future query of this sequence is past (window groups only)."""
        if not self.window:
            return
        first_needed = n_past - self.window + 1  # the next token (at n_past) reads from here on
        ps = self.pages.page_size
        for j in range(min(len(table), max(0, first_needed) // ps)):
            if table[j] != NO_PAGE:
                self.pages.release(table[j])
                table[j] = NO_PAGE

    def covers(self, table: list[int], n: int) -> bool:
        """Whether the table still holds what a query at position n needs (its window before n)."""
        if not self.window or n == 0:
            return True
        ps = self.pages.page_size
        lo = max(0, n - self.window)
        return all(table[j] != NO_PAGE for j in range(lo // ps, -(-n // ps)))

    def release_table(self, table: list[int], keep: int = 0) -> None:
        """Give back the pages past the first `keep` positions."""
        keep_pages = -(-keep // self.pages.page_size)
        for page in table[keep_pages:]:
            self.pages.release(page)
        del table[keep_pages:]
