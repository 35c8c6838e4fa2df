"""The paged KV cache of one State: its KV groups (one, or two when window layers sit apart from global ones),
the sequences and their page tables, snapshots and the prefix cache, and every operation on sequences and pages.
Allocated once, sized by n_ctx, n_seq and the page pools; nothing here allocates inside the token loop.

Sequences own page tables; the prefix cache (a radix tree) and snapshots hold references to pages too. A page
with more than one owner is copied before it is written, so a sequence never sees another's writes. The cache
knows every owner (it keeps the live snapshots), so `audit` can check each page's count against them; code that
takes a sequence for a while uses `claimed` / `borrowed`, which give it back on every error.

The interface the rest of the engine uses: `acquire` / `release` / `claimed` / `borrowed` (sequence slots),
`truncate` / `reset` / `reuse_prefix` / `cache_prefix` (positions), `checkpoint` / `roll_back` (a failed pass),
`fork` / `snapshot` / `restore` / `drop` (shared pages), `audit` / `page_use` (accounting); the forward pass
reads `groups`, `group_of` and `sequences`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..arch.config import ModelConfig
from ..errors import LlamayError
from .accounting import audit_pool, holders
from .group import KVGroup
from .pages import NO_PAGE
from .radix import RadixCache

DEFAULT_PAGE_SIZE = 16


@dataclass
class Sequence:
    """One sequence's place in the KV cache: a page table per KV group and the tokens it has computed."""

    index: int  # its row in each group's page_off / seq_len
    tables: list[list[int]]
    tokens: list[int] = field(default_factory=list)
    active: bool = False  # acquired, or written by a forward pass (so `acquire` never hands it out)

    @property
    def n_past(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True, eq=False)
class Snapshot:
    """An immutable handle on a sequence's cache at one moment: its tokens and (referenced) pages."""

    tokens: tuple[int, ...]
    tables: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Checkpoint:
    """Where some sequences stood before a forward pass, so that a pass that failed can be undone."""

    marks: tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...]  # (sequence, n_past, per group: (pages, freed))


def _freed(table: list[int]) -> int:
    """Leading table entries a window has freed."""
    j = 0
    while j < len(table) and table[j] == NO_PAGE:
        j += 1
    return j


def layer_groups(cfg: ModelConfig) -> list[tuple[str, list[int], int]]:
    """(name, layers, window) of each KV group: window layers apart from global ones when the model has both."""
    if cfg.sliding_window and cfg.swa_layers and any(cfg.swa_layers):
        window = [i for i, swa in enumerate(cfg.swa_layers) if swa]
        full = [i for i, swa in enumerate(cfg.swa_layers) if not swa]
        groups = [("kv", full, 0)] if full else []
        return [*groups, ("kv-swa", window, cfg.sliding_window)]
    return [("kv", list(range(cfg.n_layer)), 0)]


class KVCache:
    def __init__(
        self,
        cfg: ModelConfig,
        backend: Any,  # llamay.kernels.Backend
        pos: Any,  # the State's (n_batch,) position buffer, which the groups' kernels read
        seq: Any,  # the State's (n_batch,) sequence-index buffer
        *,
        n_ctx: int,
        n_batch: int,
        n_seq: int,
        page_size: int = DEFAULT_PAGE_SIZE,
        n_pages: int | None = None,
        prefix_cache: bool = False,
    ) -> None:
        self.n_ctx = n_ctx
        self.n_seq = n_seq
        self.page_size = page_size
        pages_per_seq = per_seq = -(-n_ctx // page_size)
        self.groups: list[KVGroup] = []
        for name, layers, window in layer_groups(cfg):
            if n_pages is not None:
                pool = n_pages
            elif window:  # the window, a batch being written, and the page a window start falls in
                pool = n_seq * min(pages_per_seq, -(-(window + n_batch) // page_size) + 1)
            else:
                pool = n_seq * pages_per_seq
            if prefix_cache and n_pages is None:
                pool += pages_per_seq  # room for one cached conversation beyond the live sequences
            shape = (cfg.n_embd_k_gqa, cfg.n_embd_v_gqa)
            kv = KVGroup(name, layers, window, pool, page_size, *shape, backend, pos, seq, n_batch, n_seq, per_seq)
            self.groups.append(kv)
        self.group_of = {layer: g for g in self.groups for layer in g.layers}  # model layer -> its group
        self.sequences = [Sequence(i, [[] for _ in self.groups]) for i in range(n_seq)]
        self.snapshots: set[Snapshot] = set()  # live ones: each holds a reference to its pages until `drop`
        self.prefix_cache: RadixCache | None = None
        if prefix_cache:
            self.prefix_cache = RadixCache([g.pages for g in self.groups], page_size)
            for g in self.groups:
                g.pages.reclaim = lambda wanted, pool=g.pages: self.prefix_cache.evict(pool, wanted)

    # -- sequences ------------------------------------------------------------------------------------------

    def acquire(self) -> int:
        """A free sequence slot (its cache empty)."""
        for s in self.sequences:
            if not s.active:
                s.active = True
                return s.index
        raise LlamayError(f"all {self.n_seq} sequences are in use")

    @contextlib.contextmanager
    def claimed(self) -> Iterator[int]:
        """A free sequence for the caller to keep, given back (emptied, nothing cached) if the block raises."""
        seq = self.acquire()
        try:
            yield seq
        except BaseException:
            self.release(seq, cache=False)
            raise

    @contextlib.contextmanager
    def borrowed(self) -> Iterator[int]:
        """A free sequence for the length of the block, released at its end whatever happens (its whole pages
        go to the prefix cache only when the block succeeded)."""
        seq = self.acquire()
        ok = False
        try:
            yield seq
            ok = True
        finally:
            self.release(seq, cache=ok)

    def release(self, seq: int, cache: bool = True) -> None:
        """End a sequence: its whole pages go to the prefix cache (if any), the rest back to the pool."""
        if cache:
            self.cache_prefix(seq)
        self.truncate(seq, 0)
        self.sequences[seq].active = False

    def truncate(self, seq: int, n: int) -> None:
        """Keep the first n cached positions of a sequence; pages past them go back to the pool."""
        s = self.sequences[seq]
        n = min(n, s.n_past)
        for g, table in zip(self.groups, s.tables, strict=True):
            g.release_table(table, n)
        del s.tokens[n:]

    def reset(self, seq: int = 0) -> None:
        """Forget a sequence's cached positions and give its pages back."""
        self.truncate(seq, 0)

    def reuse_prefix(self, seq: int, tokens: list[int]) -> int:
        """Before computing `tokens` in `seq`: keep the longest prefix already cached — the sequence's own
        positions, else the prefix cache's — so only the rest is computed. At least one token is always left to
        compute (the caller needs fresh logits). Returns the positions reused."""
        s = self.sequences[seq]
        limit = len(tokens) - 1
        n = 0
        while n < min(limit, s.n_past) and s.tokens[n] == tokens[n]:
            n += 1
        if not all(g.covers(t, n) for g, t in zip(self.groups, s.tables, strict=True)):
            n = 0
        self.truncate(seq, n)
        if self.prefix_cache is not None and n < limit:
            n = max(n, self._adopt_cached(s, tokens, limit))
        return n

    def _adopt_cached(self, s: Sequence, tokens: list[int], limit: int) -> int:
        """Point an empty or shorter sequence at the prefix cache's pages for `tokens` (up to `limit`)."""
        m = self.prefix_cache.match(tokens[:limit])
        pages = m.pages[: limit // self.page_size]
        n_whole = len(pages) * self.page_size
        partial_len = min(m.partial_len, limit - n_whole) if m.partial is not None and len(pages) == len(m.pages) else 0
        n = n_whole + partial_len
        if n <= s.n_past:
            return s.n_past
        partial = [m.partial[g] for g in range(len(self.groups))] if partial_len else None
        tables = [[p[g] for p in pages] + ([partial[g]] if partial else []) for g in range(len(self.groups))]
        if not all(g.covers(t, n) for g, t in zip(self.groups, tables, strict=True)):
            return s.n_past
        self.truncate(s.index, 0)
        for gi, (g, table) in enumerate(zip(self.groups, s.tables, strict=True)):
            for page in tables[gi][: len(pages)]:
                g.pages.retain(page)
            table.extend(tables[gi][: len(pages)])
            if partial:  # copy the matching positions of a partly matching page
                if partial[gi] == NO_PAGE:
                    table.append(NO_PAGE)
                else:
                    dst = g.pages.alloc()
                    g.copy_page(partial[gi], dst, partial_len)
                    table.append(dst)
        s.tokens.extend(tokens[:n])
        return n

    def cache_prefix(self, seq: int) -> int:
        """Give the sequence's whole pages to the prefix cache (shared, not copied); returns pages added."""
        if self.prefix_cache is None:
            return 0
        s = self.sequences[seq]
        n_full = s.n_past // self.page_size
        pages = [tuple(t[j] for t in s.tables) for j in range(n_full)]
        return self.prefix_cache.insert(s.tokens, pages)

    def checkpoint(self, seqs: Iterable[int]) -> Checkpoint:
        """Remember where these sequences stand (before a forward pass that may fail)."""
        marks = []
        for i in dict.fromkeys(seqs):
            s = self.sequences[i]
            marks.append((i, s.n_past, tuple((len(t), _freed(t)) for t in s.tables)))
        return Checkpoint(tuple(marks))

    def roll_back(self, point: Checkpoint) -> list[int]:
        """Undo what a failed forward did to the checkpointed sequences: the positions it counted and the pages
        it added go back. A page it copied before writing (copy-on-write) stays: the copy holds the same earlier
        positions. Returns the sequences that cannot be rolled back (their window freed pages they need again);
        the caller must end them."""
        lost = []
        for i, n_past, marks in point.marks:
            s = self.sequences[i]
            del s.tokens[n_past:]
            for g, table, (n_pages, freed) in zip(self.groups, s.tables, marks, strict=True):
                for page in table[n_pages:]:
                    g.pages.release(page)
                del table[n_pages:]
                if _freed(table) > freed:
                    lost.append(i)
        return sorted(set(lost))

    def fork(self, src: int) -> int:
        """A new sequence sharing every page of `src`; either side copies a page before writing into it."""
        with self.claimed() as dst:
            self._share(self.sequences[src].tokens, self.sequences[src].tables, dst)
        return dst

    def snapshot(self, seq: int) -> Snapshot:
        """An immutable handle on the sequence's cache now (its pages stay referenced until `drop`)."""
        s = self.sequences[seq]
        for g, table in zip(self.groups, s.tables, strict=True):
            for page in table:
                g.pages.retain(page)
        snap = Snapshot(tuple(s.tokens), tuple(tuple(t) for t in s.tables))
        self.snapshots.add(snap)
        return snap

    def restore(self, snap: Snapshot, seq: int | None = None) -> int:
        """A sequence (a new one, or `seq` emptied) continuing exactly where the snapshot was taken."""
        if snap not in self.snapshots:
            raise AssertionError("restoring a snapshot that was dropped, or was not made by this cache")
        if seq is not None:
            self.truncate(seq, 0)
            self._share(list(snap.tokens), snap.tables, seq)
            return seq
        with self.claimed() as new:
            self._share(list(snap.tokens), snap.tables, new)
        return new

    def drop(self, snap: Snapshot) -> None:
        """Let go of a snapshot's pages (once: a second drop would release pages someone else holds)."""
        if snap not in self.snapshots:
            raise AssertionError("a snapshot was dropped twice, or was not made by this cache")
        self.snapshots.discard(snap)
        for g, table in zip(self.groups, snap.tables, strict=True):
            for page in table:
                g.pages.release(page)

    def _share(self, tokens: list[int], tables, dst: int) -> None:
        d = self.sequences[dst]
        for g, src_t, dst_t in zip(self.groups, tables, d.tables, strict=True):
            for page in src_t:
                g.pages.retain(page)
            dst_t.extend(src_t)
        d.tokens.extend(tokens)

    # -- accounting -----------------------------------------------------------------------------------------

    def audit(self) -> list[str]:
        """What is wrong with the cache's accounting: [] when every page's reference count equals the references
        its owners (sequences, live snapshots, the prefix cache) hold, the free list is exactly the pages nobody
        holds, and every sequence's tables cover its positions."""
        problems = []
        for gi, g in enumerate(self.groups):
            held = holders(s.tables[gi] for s in self.sequences)
            held.update(holders(snap.tables[gi] for snap in self.snapshots))
            if self.prefix_cache is not None:
                held.update(holders((pages[gi],) for pages in self.prefix_cache.page_sets()))
            problems += audit_pool(g.pages, held)
        if self.prefix_cache is not None:
            problems += self.prefix_cache.audit()
        for s in self.sequences:
            if not s.active and (s.tokens or any(s.tables)):
                problems.append(f"sequence {s.index} is free but holds {s.n_past} positions and its pages")
            if s.n_past > self.n_ctx:
                problems.append(f"sequence {s.index} holds {s.n_past} positions, more than the context {self.n_ctx}")
            for g, table in zip(self.groups, s.tables, strict=True):
                if len(table) * self.page_size < s.n_past:
                    problems.append(f"sequence {s.index}: {len(table)} {g.name} pages for {s.n_past} positions")
        return problems

    def page_use(self) -> dict[str, int]:
        """Pages of every group by their first holder, in this order: free, sequences, snapshots, and the prefix
        cache alone (which gives its pages back when the pool runs dry)."""
        use = {"free": 0, "sequences": 0, "snapshots": 0, "prefix_cache": 0}
        for gi, g in enumerate(self.groups):
            in_seqs = holders(s.tables[gi] for s in self.sequences)
            in_snaps = holders(snap.tables[gi] for snap in self.snapshots)
            use["free"] += g.pages.n_free
            for page in range(g.pages.n_pages):
                if g.pages.refs[page] <= 0:
                    continue
                kind = "sequences" if page in in_seqs else "snapshots" if page in in_snaps else "prefix_cache"
                use[kind] += 1
        return use
