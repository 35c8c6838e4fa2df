"""`KVCache.audit`: exact accounting on every path (the batcher, forks, snapshots, the prefix cache), and each kind of
broken accounting planted by hand is named."""

from __future__ import annotations

import pytest

from llamay.batcher import Batcher, Request
from llamay.errors import LlamayError
from llamay.generate import prefill
from llamay.kv.pages import OutOfPages
from llamay.model import load_model
from llamay.sampling import Sampler, SamplerConfig
from tests import paths

GREEDY = SamplerConfig(temperature=0.0)
PROMPT = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337]


@pytest.fixture(scope="module")
def model():
    with load_model(paths.stories("q8_0"), "portable") as m:
        yield m


def busy_state():
    """A state where every kind of owner holds pages: two sequences sharing a cached prefix, a fork, a snapshot
    (positions are only booked, not computed: the accounting is what is tested here)."""
    from llamay.kernels import get_backend
    from llamay.model.state import State
    from tests.kv.test_state import _CFG

    st = State(_CFG, get_backend("portable"), n_ctx=32, n_batch=8, n_seq=3, page_size=2, n_pages=24,
               prefix_cache=True)  # fmt: skip
    tokens = [1, 2, 3, 4, 5, 6, 7, 1, 2]

    def book(seq, ids):
        s = st.kv.sequences[seq]
        st.kv.groups[0].prepare_write(s.tables[0], s.n_past, s.n_past + len(ids))
        s.tokens.extend(ids)

    first = st.kv.acquire()
    book(first, tokens)
    st.kv.release(first)  # its whole pages go to the prefix cache
    seq = st.kv.acquire()
    more = [*tokens, 3, 3]
    n = st.kv.reuse_prefix(seq, more)
    book(seq, more[n:])
    child = st.kv.fork(seq)
    book(child, [4])  # copy-on-write of the shared last page
    snap = st.kv.snapshot(child)
    return st, seq, child, snap


def test_exact_after_a_batch_forks_and_snapshots(model):
    st = model.new_state(n_ctx=64, n_seq=3, n_batch=32, page_size=4, prefix_cache=True)
    Batcher(model, st, prefill_chunk=8).run([Request(PROMPT[:k], 3, Sampler(GREEDY)) for k in (9, 14)])
    seq = st.kv.acquire()
    st.kv.reuse_prefix(seq, PROMPT)
    prefill(model, st, PROMPT[st.kv.sequences[seq].n_past :], seq=seq)
    child = st.kv.fork(seq)
    prefill(model, st, [5, 6], seq=child)
    snap = st.kv.snapshot(child)
    assert st.kv.audit() == []
    st.kv.release(child)
    st.kv.release(seq)
    st.kv.drop(snap)
    assert st.kv.audit() == []
    st.kv.prefix_cache.clear()
    assert st.kv.audit() == []
    assert all(g.pages.n_free == g.pages.n_pages for g in st.kv.groups)


def test_exact_on_the_booked_state_and_after_giving_everything_back():
    st, seq, child, snap = busy_state()
    assert st.kv.audit() == [] and st.kv.prefix_cache.n_pages > 0
    assert st.kv.groups[0].pages.refs[st.kv.sequences[seq].tables[0][0]] == 4  # the cache, seq, its fork, the snapshot
    st.kv.release(child)
    st.kv.release(seq)
    st.kv.drop(snap)
    st.kv.prefix_cache.clear()
    assert st.kv.audit() == []
    assert st.kv.groups[0].pages.n_free == st.kv.groups[0].pages.n_pages


def test_a_leaked_reference_is_named():
    st, seq, _child, _snap = busy_state()
    page = st.kv.sequences[seq].tables[0][0]
    st.kv.groups[0].pages.retain(page)  # a reference nobody holds
    problems = st.kv.audit()
    assert any(f"page {page} counts" in p for p in problems), problems


def test_a_reference_given_back_twice_is_named():
    st, seq, _child, _snap = busy_state()
    page = st.kv.sequences[seq].tables[0][-1]
    st.kv.groups[0].pages.release(page)  # the owner still holds it
    assert any(f"page {page} counts" in p for p in st.kv.audit())


def test_a_free_sequence_holding_pages_is_named():
    st, seq, _child, _snap = busy_state()
    st.kv.sequences[seq].active = False  # dropped without being released
    assert any(f"sequence {seq} is free but holds" in p for p in st.kv.audit())


def test_a_forgotten_snapshot_is_named():
    st, _seq, _child, snap = busy_state()
    st.kv.snapshots.discard(snap)  # lost track of: its references are now nobody's
    assert any("its owners hold" in p for p in st.kv.audit())


def test_a_broken_free_list_is_named():
    st, *_ = busy_state()
    pool = st.kv.groups[0].pages
    pool.free.append(pool.free[-1])
    assert any("in the free list more than once" in p for p in st.kv.audit())


def test_a_wrong_prefix_cache_count_is_named():
    st, *_ = busy_state()
    st.kv.prefix_cache.n_pages += 1
    assert any("prefix cache: counts" in p for p in st.kv.audit())


def test_dropping_a_snapshot_twice_is_refused():
    st, _seq, _child, snap = busy_state()
    st.kv.drop(snap)
    with pytest.raises(AssertionError, match="dropped twice"):
        st.kv.drop(snap)
    assert st.kv.audit() == []


def test_claimed_and_borrowed_give_the_sequence_back_on_errors():
    from llamay.kernels import get_backend
    from llamay.model.state import State
    from tests.kv.test_state import _CFG

    st = State(_CFG, get_backend("portable"), n_ctx=32, n_seq=2, n_pages=3, page_size=4)
    with pytest.raises(OutOfPages), st.kv.claimed() as seq:
        st.kv.groups[0].prepare_write(st.kv.sequences[seq].tables[0], 0, 8)  # 2 pages: fine
        st.kv.groups[0].prepare_write(st.kv.sequences[seq].tables[0], 8, 20)  # 3 more: the pool is dry
    assert not any(s.active for s in st.kv.sequences) and st.kv.audit() == []
    with pytest.raises(LlamayError, match="planted"), st.kv.borrowed() as seq:
        st.kv.groups[0].prepare_write(st.kv.sequences[seq].tables[0], 0, 8)
        raise LlamayError("planted")
    assert not any(s.active for s in st.kv.sequences) and st.kv.audit() == []
    with st.kv.claimed() as kept:
        pass
    assert st.kv.sequences[kept].active  # no error: the caller keeps it
