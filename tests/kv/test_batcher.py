"""The Batcher when one request fails: its sampler raises, or a forward pass over a batch holding it raises. That
request alone ends (finish_reason "error", the error in its Event); every other request generates exactly what it
generates alone, and the KV accounting is exact afterwards (the failed pass was rolled back)."""

from __future__ import annotations

import pytest

import llamay.batcher
from llamay.batcher import Batcher, Request
from llamay.generate import prefill
from llamay.model import forward, load_model
from llamay.model.forward import begin
from llamay.sampling import Sampler, SamplerConfig
from tests import paths

GREEDY = SamplerConfig(temperature=0.0)
PROMPTS = [[1, 403, 407, 261, 378], [1, 432, 383, 286, 261, 376, 298], [1, 315, 421, 395]]
SENTINEL = 499  # a token id that makes the planted forward fail
N = 6


@pytest.fixture(scope="module")
def model():
    with load_model(paths.stories("q8_0"), "portable") as m:
        yield m


@pytest.fixture(scope="module")
def alone(model):
    """What each prompt generates on its own, in a fresh state (the reference)."""
    out = []
    for p in PROMPTS:
        st = model.new_state(n_ctx=64)
        prefill(model, st, p)
        ids = []
        for _ in range(N):
            ids.append(model.backend.argmax(st.logits, 0, model.cfg.n_vocab))
            forward(model, st, ids[-1:], [0])
        out.append(ids)
    return out


class FailingSampler(Sampler):
    def __init__(self, after: int) -> None:
        super().__init__(GREEDY)
        self.after = after
        self.calls = 0

    def sample(self, *args):
        self.calls += 1
        if self.calls > self.after:
            raise ZeroDivisionError("planted in the sampler")
        return super().sample(*args)


def run(batcher: Batcher, reqs: list[Request]) -> list:
    events = []
    queue = list(reqs)
    while queue or batcher.running:
        while queue and batcher.admit(queue[0]):
            queue.pop(0)
        events += batcher.step()
    return events


def test_a_failing_sampler_ends_its_request_alone(model, alone):
    st = model.new_state(n_ctx=64, n_seq=4, n_batch=32, page_size=4, prefix_cache=True)
    reqs = [Request(p, N, Sampler(GREEDY)) for p in PROMPTS]
    bad = Request(PROMPTS[1], N, FailingSampler(after=2))
    events = run(Batcher(model, st), [reqs[0], bad, reqs[1], reqs[2]])
    errors = [e for e in events if e.error is not None]
    assert [e.request for e in errors] == [bad] and "planted" in str(errors[0].error)
    assert bad.finish_reason == "error" and len(bad.generated) == 2
    assert [r.generated for r in reqs] == alone
    assert st.kv.audit() == [] and not any(s.active for s in st.kv.sequences)


def test_a_failing_forward_ends_only_the_request_that_fails_alone(model, alone, monkeypatch):
    widths = []

    def planted(m, st, tokens, seqs=None, outputs=None):
        if SENTINEL in tokens:
            widths.append(len(set(seqs)))
            begin(m, st, tokens, seqs, outputs)  # pages allocated and batch placed, then the failure
            raise RuntimeError("planted in the forward pass")
        return forward(m, st, tokens, seqs, outputs)

    monkeypatch.setattr(llamay.batcher, "forward", planted)
    st = model.new_state(n_ctx=64, n_seq=4, n_batch=32, page_size=4, prefix_cache=True)
    reqs = [Request(p, N, Sampler(GREEDY)) for p in PROMPTS]
    culprit = Request([1, 403, SENTINEL, 261], N, Sampler(GREEDY))
    batcher = Batcher(model, st)
    for r in reqs:
        assert batcher.admit(r)
    batcher.step()  # the three prompts are prefilled: they decode when the culprit comes
    events = run(batcher, [culprit])
    assert widths[0] == 4  # it failed in a batch with the three decoders, then once alone
    errors = [e for e in events if e.error is not None]
    assert [e.request for e in errors] == [culprit] and culprit.finish_reason == "error"
    assert [r.generated for r in reqs] == alone
    assert st.kv.audit() == [] and not any(s.active for s in st.kv.sequences)


def test_a_rolled_back_forward_leaves_no_trace(model):
    """Checkpoint, a pass that allocates pages and copies a shared one before failing, roll back: the State is
    as before (accounting exact, same tables) and goes on exactly as if the pass never happened."""
    st = model.new_state(n_ctx=64, n_seq=2, page_size=4)
    prefill(model, st, PROMPTS[1])  # 7 positions: page 1 is partly filled
    child = st.kv.fork(0)  # shares it: the next write into it copies it first
    before = [list(t) for t in st.kv.sequences[child].tables]
    point = st.kv.checkpoint([child])
    begin(model, st, [300, 301, 302, 303, 304, 305], [child] * 6)
    assert st.kv.sequences[child].tables[0] != before[0]  # the pass copied and allocated pages
    assert st.kv.roll_back(point) == []
    assert st.kv.audit() == []
    assert len(st.kv.sequences[child].tables[0]) == len(before[0]) and st.kv.sequences[child].n_past == 7
    forward(model, st, [300], [child])
    cold = model.new_state(n_ctx=64)
    prefill(model, cold, [*PROMPTS[1], 300])
    n = model.cfg.n_vocab
    assert model.backend.read_f32(st.logits, 0, n) == model.backend.read_f32(cold.logits, 0, n)


def test_max_tokens_0_evaluates_the_prompt_into_the_cache_and_generates_nothing(model, alone):
    """llama-server's n_predict 0: no token, finish "length", the prompt's pages kept by the prefix cache (the
    same prompt again reuses them, and then generates what it generates alone)."""
    st = model.new_state(n_ctx=64, n_seq=2, n_batch=32, page_size=4, prefix_cache=True)
    batcher = Batcher(model, st)
    zero = Request(PROMPTS[1], 0, Sampler(GREEDY))
    events = run(batcher, [zero])
    assert zero.generated == [] and zero.finish_reason == "length"
    assert [(e.token, e.finish_reason) for e in events if e.request is zero] == [(None, "length")]
    again = Request(PROMPTS[1], N, Sampler(GREEDY))
    run(batcher, [again])
    assert again.cached_tokens >= 4 and again.generated == alone[1]
    assert st.kv.audit() == [] and not any(s.active for s in st.kv.sequences)
