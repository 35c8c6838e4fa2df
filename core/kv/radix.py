"""A radix tree of computed prefixes: token sequences whose KV pages are kept for reuse.

Edges hold whole pages: a node's tokens are a multiple of the page size, and node.pages[j] holds, for every KV
group, the page with the keys/values of tokens[j·ps : (j+1)·ps] (NO_PAGE where a sliding window freed it).
Children are keyed by their first page of tokens. The tree owns one reference to each page it holds, so a page a
running sequence shares with the tree is never written (the writer copies it first).

`match(tokens)` finds the longest cached prefix: whole pages, plus a partly matching page the caller copies
(only the matching positions). When a pool runs low, `evict` drops least-recently-used leaves.

        root ── [t0..t15 | p3] ── [t16..t47 | p7 p9] ── [t48..t63 | p2]
                                                    └── [u48..u63 | p5]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .pages import KVPages

PageSet = tuple[int, ...]  # one page per KV group


@dataclass(eq=False)
class Node:
    tokens: tuple[int, ...]
    pages: list[PageSet]
    parent: Node | None = None
    children: dict[tuple[int, ...], Node] = field(default_factory=dict)
    last_use: int = 0


@dataclass
class Match:
    page_size: int
    pages: list[PageSet] = field(default_factory=list)  # whole pages of the prefix, in order
    partial: PageSet | None = None  # a page whose first `partial_len` positions also match
    partial_len: int = 0

    @property
    def n_tokens(self) -> int:
        return len(self.pages) * self.page_size + self.partial_len


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class RadixCache:
    def __init__(self, pools: Sequence[KVPages], page_size: int) -> None:
        self.pools = list(pools)
        self.ps = page_size
        self.root = Node((), [])
        self.clock = 0
        self.n_pages = 0  # page sets held by the tree

    def _touch(self, node: Node) -> None:
        self.clock += 1
        while node is not None:
            node.last_use = self.clock
            node = node.parent

    def match(self, tokens: Sequence[int]) -> Match:
        """The longest cached prefix of `tokens` (pages are not retained: the caller retains what it keeps)."""
        ps = self.ps
        m = Match(ps)
        node, i = self.root, 0
        while True:
            head = tuple(tokens[i : i + ps])
            child = node.children.get(head) if len(head) == ps else None
            if child is None:
                best, best_k = None, 0
                for c in node.children.values():  # a partly matching first page
                    k = _common(c.tokens[:ps], head)
                    if k > best_k:
                        best, best_k = c, k
                if best is not None:
                    self._touch(best)
                    m.partial, m.partial_len = best.pages[0], best_k
                return m
            self._touch(child)
            for j, pages in enumerate(child.pages):
                seg = child.tokens[j * ps : (j + 1) * ps]
                mine = tokens[i : i + ps]
                if len(mine) == ps and tuple(mine) == seg:
                    m.pages.append(pages)
                    i += ps
                    continue
                k = _common(seg, mine)
                if k:
                    m.partial, m.partial_len = pages, k
                return m
            node = child

    def insert(self, tokens: Sequence[int], pages: Sequence[PageSet]) -> int:
        """Hold the whole pages of a computed sequence (tokens[: len(pages)·ps]); returns pages newly held."""
        ps = self.ps
        n_full = min(len(tokens) // ps, len(pages))
        node, i = self.root, 0  # i counts whole pages consumed
        while i < n_full:
            head = tuple(tokens[i * ps : (i + 1) * ps])
            child = node.children.get(head)
            if child is None:
                new = Node(tuple(tokens[i * ps : n_full * ps]), [tuple(p) for p in pages[i:n_full]], node)
                for ps_set in new.pages:
                    self._retain(ps_set)
                node.children[head] = new
                self.n_pages += len(new.pages)
                self._touch(new)
                return len(new.pages)
            j = 0
            while j < len(child.pages) and i < n_full:
                if child.tokens[j * ps : (j + 1) * ps] != tuple(tokens[i * ps : (i + 1) * ps]):
                    break
                j += 1
                i += 1
            if j < len(child.pages):
                child = self._split(child, j)
            node = child
            self._touch(node)
        return 0

    def _split(self, node: Node, j: int) -> Node:
        """Cut `node` after its j-th page; returns the upper half (which keeps node's place in the parent)."""
        ps = self.ps
        upper = Node(node.tokens[: j * ps], node.pages[:j], node.parent, last_use=node.last_use)
        parent = node.parent
        parent.children[node.tokens[:ps]] = upper
        node.tokens, node.pages, node.parent = node.tokens[j * ps :], node.pages[j:], upper
        upper.children[node.tokens[:ps]] = node
        return upper

    def _retain(self, pages: PageSet) -> None:
        for pool, page in zip(self.pools, pages, strict=True):
            pool.retain(page)

    def _leaves(self) -> list[Node]:
        out, stack = [], [self.root]
        while stack:
            n = stack.pop()
            if n.children:
                stack.extend(n.children.values())
            elif n is not self.root:
                out.append(n)
        return out

    def evict(self, pool: KVPages, wanted: int) -> int:
        """Drop least-recently-used leaves until `wanted` pages of `pool` are free again (or nothing is left)."""
        freed = 0
        while freed < wanted:
            leaves = [n for n in self._leaves() if self._frees(n, pool)] or self._leaves()
            if not leaves:
                break
            victim = min(leaves, key=lambda n: n.last_use)
            before = pool.n_free
            self._drop(victim)
            freed += pool.n_free - before
        return freed

    def _frees(self, node: Node, pool: KVPages) -> bool:
        """Whether dropping node gives back at least one page of pool (no one else holds it)."""
        g = self.pools.index(pool)
        return any(p[g] >= 0 and pool.refs[p[g]] == 1 for p in node.pages)

    def _drop(self, node: Node) -> None:
        for pages in node.pages:
            for pool, page in zip(self.pools, pages, strict=True):
                pool.release(page)
        self.n_pages -= len(node.pages)
        parent = node.parent
        del parent.children[node.tokens[: self.ps]]

    def page_sets(self) -> Iterator[PageSet]:
        """Every page set the tree holds (one reference each), for accounting."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield from node.pages
            stack.extend(node.children.values())

    def audit(self) -> list[str]:
        """What is wrong with the tree's shape: [] when every edge holds whole pages under the right key."""
        problems, held, stack = [], 0, [self.root]
        while stack:
            node = stack.pop()
            held += len(node.pages)
            if node is not self.root and len(node.tokens) != len(node.pages) * self.ps:
                problems.append(f"prefix cache: a node of {len(node.tokens)} tokens holds {len(node.pages)} pages")
            for key, child in node.children.items():
                if child.parent is not node or child.tokens[: self.ps] != key:
                    problems.append(f"prefix cache: a child is filed under the wrong key or parent ({key[:4]}...)")
            stack.extend(node.children.values())
        if held != self.n_pages:
            problems.append(f"prefix cache: counts {self.n_pages} page sets, its nodes hold {held}")
        return problems

    def clear(self) -> None:
        for leaf in self._leaves():
            n = leaf
            while n is not self.root and not n.children:
                parent = n.parent
                self._drop(n)
                n = parent
