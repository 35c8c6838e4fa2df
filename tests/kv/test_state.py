"""The state engine: prefix reuse, forks, snapshots, eviction, batched decode — each against a cold run."""

from __future__ import annotations

import contextlib
from collections import Counter

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from llamay.batcher import Batcher, Request
from llamay.errors import LlamayError
from llamay.generate import decode_step, prefill
from llamay.kv.pages import NO_PAGE, OutOfPages
from llamay.model import forward, load_model
from llamay.sampling import Sampler, SamplerConfig
from tests import paths

GREEDY = SamplerConfig(temperature=0.0)


@pytest.fixture(scope="module")
def model():
    with load_model(paths.stories("q8_0"), "portable") as m:
        yield m


def logits(m, st, row: int = 0) -> list[float]:
    return m.backend.read_f32(st.logits, row * m.cfg.n_vocab, m.cfg.n_vocab)


def greedy(m, st, seq: int, n: int) -> list[int]:
    out = []
    for _ in range(n):
        t = m.backend.argmax(st.logits, 0, m.cfg.n_vocab)
        out.append(t)
        forward(m, st, (t,), (seq,))
    return out


PROMPT = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337]


def test_prefix_reuse_equals_cold(model):
    st = model.new_state(n_ctx=64, n_seq=2, prefix_cache=True, page_size=4)
    a = st.kv.acquire()
    st.kv.reuse_prefix(a, PROMPT)
    forward(model, st, PROMPT, [a] * len(PROMPT))
    st.kv.release(a)  # its whole pages go to the prefix cache
    b = st.kv.acquire()
    longer = [*PROMPT, 410, 408]
    reused = st.kv.reuse_prefix(b, longer)
    assert reused == 20  # the 5 whole pages of 4 the first sequence left in the cache
    forward(model, st, longer[reused:], [b] * (len(longer) - reused))
    warm = logits(model, st)
    cold_st = model.new_state(n_ctx=64)
    prefill(model, cold_st, longer)
    assert warm == logits(model, cold_st)


def test_fork_writes_never_show_in_the_parent(model):
    st = model.new_state(n_ctx=64, n_seq=3, page_size=4)
    prefill(model, st, PROMPT[:10])  # positions 0..9: page 2 (positions 8..11) is partly filled
    child = st.kv.fork(0)
    assert st.kv.groups[0].pages.refs[st.kv.sequences[0].tables[0][2]] == 2
    forward(model, st, [400, 401, 402], [child] * 3)  # the child writes positions 10..12: it copies page 2 first
    assert st.kv.sequences[child].tables[0][2] != st.kv.sequences[0].tables[0][2]
    forward(model, st, PROMPT[10:11], [0])  # the parent continues as if no fork had happened
    cold = model.new_state(n_ctx=64)
    prefill(model, cold, PROMPT[:11])
    assert logits(model, st) == logits(model, cold)


def test_snapshot_restore_continues_exactly(model):
    st = model.new_state(n_ctx=64, n_seq=2, page_size=4)
    prefill(model, st, PROMPT[:9])
    snap = st.kv.snapshot(0)
    first = greedy(model, st, 0, 8)
    st.kv.reset(0)
    forward(model, st, [7, 8, 9], [0] * 3)  # reuse the slot for something else entirely
    seq = st.kv.restore(snap)
    st.kv.truncate(seq, 8)
    forward(model, st, PROMPT[8:9], [seq])  # recompute the last position for fresh logits
    assert greedy(model, st, seq, 8) == first
    st.kv.drop(snap)


def test_batched_decode_equals_single_decodes(model):
    prompts = [PROMPT[:5], PROMPT[3:12], [1, 410, 300], PROMPT]
    st = model.new_state(n_ctx=64, n_seq=4, n_batch=32, page_size=4)
    reqs = [Request(p, 12, Sampler(GREEDY)) for p in prompts]
    Batcher(model, st, prefill_chunk=5).run(reqs)
    for r in reqs:
        single = model.new_state(n_ctx=64)
        prefill(model, single, r.prompt)
        assert r.generated == greedy(model, single, 0, 12)


def test_out_of_pages_is_a_clear_error(model):
    st = model.new_state(n_ctx=64, n_pages=2, page_size=4)
    with pytest.raises(OutOfPages, match="the kv cache is full"):
        prefill(model, st, PROMPT)


def test_sliding_window_frees_pages_and_matches_a_full_cache(tmp_path):
    from tests.models.tiny import write_tiny

    path = tmp_path / "g.gguf"
    write_tiny("gemma3", path)
    with load_model(path, "portable") as m:
        window = m.cfg.sliding_window
        st = m.new_state(n_ctx=64, page_size=4, n_batch=8)
        swa = next(g for g in st.kv.groups if g.window)
        prompt = [1, *range(300, 330)]
        prefill(m, st, prompt)
        table = st.kv.sequences[0].tables[st.kv.groups.index(swa)]
        freed = [j for j, p in enumerate(table) if p == NO_PAGE]
        assert freed and max(freed) * 4 + 3 < len(prompt) - window + 1  # pages no later query can reach
        assert swa.pages.n_pages < st.kv.groups[0].pages.n_pages  # the window group's pool is smaller
        ids = [m.backend.argmax(st.logits, 0, m.cfg.n_vocab)]
        for _ in range(10):
            decode_step(m, st, ids[-1])
            ids.append(m.backend.argmax(st.logits, 0, m.cfg.n_vocab))
        full = m.new_state(n_ctx=64, page_size=4, n_batch=64)  # one batch: nothing freed before use
        forward(m, full, prompt + ids[:-1], outputs=range(len(prompt) - 1, len(prompt) + len(ids) - 1))
        assert [m.backend.argmax(full.logits, j * m.cfg.n_vocab, m.cfg.n_vocab) for j in range(len(ids))] == ids


class PagesMachine(RuleBasedStateMachine):
    """Random sequences, prefix caching, forks, snapshots and releases on a tiny pool: every page's reference
    count equals its owners, a free page has none, and no page in use is ever handed out again."""

    def __init__(self) -> None:
        super().__init__()
        from llamay.kernels import get_backend
        from llamay.model.state import State

        cfg = _CFG
        self.st = State(cfg, get_backend("portable"), n_ctx=32, n_batch=8, n_seq=4, page_size=2, n_pages=12,
                        prefix_cache=True)  # fmt: skip
        self.snaps = []

    def _owners(self) -> Counter:
        c: Counter = Counter()
        for s in self.st.kv.sequences:
            c.update(p for p in s.tables[0] if p != NO_PAGE)
        for snap in self.snaps:
            c.update(p for p in snap.tables[0] if p != NO_PAGE)
        stack = [self.st.kv.prefix_cache.root]
        while stack:
            n = stack.pop()
            c.update(p[0] for p in n.pages if p[0] != NO_PAGE)
            stack.extend(n.children.values())
        return c

    @rule(seq=st.integers(0, 3), tokens=st.lists(st.integers(1, 5), min_size=1, max_size=7))
    def extend(self, seq, tokens):
        s = self.st.kv.sequences[seq]
        if not s.active:
            return
        if s.n_past + len(tokens) > self.st.n_ctx:
            return
        try:
            reused = self.st.kv.reuse_prefix(seq, s.tokens + tokens) if s.n_past == 0 else s.n_past
            todo = (s.tokens + tokens)[reused:] if s.n_past == 0 else tokens
            g = self.st.kv.groups[0]
            g.prepare_write(s.tables[0], s.n_past, s.n_past + len(todo))
            s.tokens.extend(todo)  # positions "computed" (the kernels are not what this machine tests)
        except OutOfPages:
            pass

    @rule()
    def acquire(self):
        with contextlib.suppress(LlamayError):  # all sequences in use
            self.st.kv.acquire()

    @rule(seq=st.integers(1, 3), cache=st.booleans())
    def release(self, seq, cache):
        if self.st.kv.sequences[seq].active:
            self.st.kv.release(seq, cache=cache)

    @rule(seq=st.integers(0, 3))
    def fork(self, seq):
        if self.st.kv.sequences[seq].active:
            with contextlib.suppress(LlamayError):  # no free sequence
                self.st.kv.fork(seq)

    @rule(seq=st.integers(0, 3))
    def snapshot(self, seq):
        if self.st.kv.sequences[seq].active and len(self.snaps) < 3:
            self.snaps.append(self.st.kv.snapshot(seq))

    @precondition(lambda self: self.snaps)
    @rule()
    def drop(self):
        self.st.kv.drop(self.snaps.pop(0))

    @rule(seq=st.integers(0, 3), n=st.integers(0, 10))
    def truncate(self, seq, n):
        self.st.kv.truncate(seq, n)

    @invariant()
    def refcounts_equal_owners(self):
        pool = self.st.kv.groups[0].pages
        owners = self._owners()
        for page in range(pool.n_pages):
            assert pool.refs[page] == owners.get(page, 0), f"page {page}"
        assert sorted(pool.free) == [p for p in range(pool.n_pages) if pool.refs[p] == 0]

    @invariant()
    def the_audit_agrees(self):
        assert self.st.kv.audit() == []
        assert self.st.kv.snapshots == set(self.snaps)

    @invariant()
    def no_sequence_shares_a_page_it_may_write(self):
        for s in self.st.kv.sequences:
            t = s.tables[0]
            writable = s.n_past // self.st.page_size  # the page the next token goes to
            if writable < len(t) and s.n_past % self.st.page_size:
                assert t[writable] != NO_PAGE


def _tiny_cfg():
    from llamay.arch import llama
    from llamay.arch.config import ModelConfig, Norm, Rope, RopeConfig

    return ModelConfig(
        arch="llama", n_vocab=8, n_embd=4, n_layer=1, n_head=1, n_head_kv=1, head_dim=4, head_dim_v=4, n_ff=4,
        n_ctx_train=32, norm=Norm.RMS, norm_eps=1e-5, rope=RopeConfig(Rope.NORMAL, 4), params=llama.Params(),
    )  # fmt: skip


_CFG = _tiny_cfg()
TestPages = PagesMachine.TestCase
TestPages.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
