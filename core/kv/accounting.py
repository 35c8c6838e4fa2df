"""Pool accounting: a check that every page's reference count equals the owners that actually hold it.

A page's owners are the sequences whose tables hold it, the live snapshots, and the prefix cache (see
`pages.py`). Any path that takes a reference and loses it on an error (a leak) or gives one back twice shows here
as a count that disagrees with its owners, long before the pool silently runs dry. `KVCache.audit` gathers the
owners and calls `audit_pool` for each KV group; the server runs it whenever its model thread goes idle.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from .pages import NO_PAGE, KVPages

MAX_REPORTED = 8  # problems listed per pool; a broken pool would otherwise list every page


def holders(tables: Iterable[Iterable[int]]) -> Counter[int]:
    """References the given page tables hold, by page (freed window entries are no reference)."""
    held: Counter[int] = Counter()
    for table in tables:
        held.update(p for p in table if p != NO_PAGE)
    return held


def audit_pool(pool: KVPages, held: Counter[int]) -> list[str]:
    """What is wrong with one pool, given the references its owners hold: [] when the accounting is exact."""
    problems = []
    outside = sorted(p for p in held if not 0 <= p < pool.n_pages)
    if outside:
        problems.append(f"{pool.name}: pages {outside[:MAX_REPORTED]} are held but not in the pool of {pool.n_pages}")
    free = Counter(pool.free)
    twice = sorted(p for p, k in free.items() if k > 1)
    if twice:
        problems.append(f"{pool.name}: pages {twice[:MAX_REPORTED]} are in the free list more than once")
    wrong = []
    for page in range(pool.n_pages):
        refs, owned, listed = pool.refs[page], held.get(page, 0), page in free
        if refs != owned:
            wrong.append(f"page {page} counts {refs} references, its owners hold {owned}")
        elif listed != (refs == 0):
            wrong.append(f"page {page} has {refs} references but is {'' if listed else 'not '}in the free list")
    problems += [f"{pool.name}: {w}" for w in wrong[:MAX_REPORTED]]
    if len(wrong) > MAX_REPORTED:
        problems.append(f"{pool.name}: ... and {len(wrong) - MAX_REPORTED} more pages")
    return problems
