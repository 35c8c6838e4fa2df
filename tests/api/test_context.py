"""Contexts against independent references: greedy tokens from a loop of the caller's own equal the Engine's and
llama.cpp's (tests/goldens, and llama.cpp itself natively); a fork continues exactly as its parent would; a
snapshot restores the logits bit for bit; closing gives every page back (the State's audit and page_use)."""

from __future__ import annotations

import dataclasses
import json

import pytest

import llamay
from llamay.engine import Engine
from llamay.sampling import Sampler as ChainSampler
from llamay.sampling import SamplerConfig
from tests import paths
from tests.model.test_goldens import GOLDENS

N_STEPS = 24


def golden_case(type_name: str, name: str = "once") -> dict:
    g = json.loads((GOLDENS / f"stories260K-{type_name}.json").read_text())
    return next(c for c in g["cases"] if c["name"] == name)


def loop_greedy(model: llamay.Model, prompt: list[int], n: int) -> list[int]:
    sampler = llamay.Sampler(temperature=0)
    with model.context(n_ctx=len(prompt) + n + 1) as ctx:
        ctx.decode(prompt)
        out = []
        for _ in range(n):
            tok = sampler.sample(ctx)
            if model.is_eog(tok):
                break
            out.append(tok)
            ctx.decode(tok)
    return out


def free_running(case: dict) -> int:
    """Steps of the golden's greedy run before its first near-tie (where a rounding difference may flip it)."""
    ties = case["near_ties"]
    return min([N_STEPS, *(t["step"] if isinstance(t, dict) else t for t in ties)])


@pytest.mark.parametrize("type_name", ["f32", "q8_0"])
def test_greedy_loop_equals_the_engine_and_llamacpp(backend_name, type_name):
    case = golden_case(type_name)
    with llamay.load(paths.stories(type_name), backend=backend_name) as model:
        prompt = model.tokenize(case["prompt"])
        assert prompt == case["prompt_ids"]
        ours = loop_greedy(model, prompt, N_STEPS)
        engine = Engine(model.core, n_ctx=64)
        theirs = list(engine.generate_tokens(prompt, N_STEPS, ChainSampler(SamplerConfig(temperature=0.0))))
    n = free_running(case)
    assert ours == theirs
    assert ours[:n] == case["ids"][:n] and n >= 16


@pytest.mark.native_only
def test_greedy_loop_equals_llamacpp_itself():
    pytest.importorskip("xllamacpp")
    from tests.tokenizer.llamacpp_reference import LlamaCppServer

    path = paths.stories("f32")
    server = LlamaCppServer(path)
    try:
        with llamay.load(path) as model:
            prompt = model.tokenize("Lily and Ben went to the park")
            ours = loop_greedy(model, prompt, N_STEPS)
        body = {"prompt": prompt, "n_predict": N_STEPS, "temperature": 0.0, "top_k": 1, "cache_prompt": False,
                "return_tokens": True}  # fmt: skip
        theirs = server._post("/completion", body)["tokens"]
    finally:
        server.close()
    assert ours == theirs


def test_a_fork_continues_as_its_parent(backend_name):
    with llamay.load(paths.stories("q8_0"), backend=backend_name) as model:
        prompt = model.tokenize("Once upon a time")
        with model.context(n_ctx=64, n_seq=2) as ctx:
            ctx.decode(prompt)
            fork = ctx.fork()
            assert fork.tokens == ctx.tokens and fork.logits.tolist() == ctx.logits.tolist()
            a = [ctx.decode(t).tolist() for t in (401, 396, 267)]
            b = [fork.decode(t).tolist() for t in (401, 396, 267)]
            assert a == b  # bit for bit: the same cache and the same positions
            fork.decode(300)  # the fork writes past the parent: its pages are copied, the parent's unchanged
            assert ctx.tokens == (*prompt, 401, 396, 267) and fork.tokens == (*ctx.tokens, 300)
            with model.context(n_ctx=64) as cold:
                want = cold.decode([*prompt, 401, 396, 267, 300]).tolist()
            assert fork.logits.tolist() == pytest.approx(want, abs=1e-4)
            fork.close()
            assert ctx.state.kv.audit() == []


def test_snapshot_and_restore_reproduce_the_logits_bit_for_bit(backend_name):
    with llamay.load(paths.stories("f32"), backend=backend_name) as model, model.context(n_ctx=64) as ctx:
        start = ctx.decode(model.tokenize("Once upon a time")).tolist()
        snap = ctx.snapshot()
        first = [ctx.decode(t).tolist() for t in (432, 383, 286)]
        assert ctx.restore(snap).tolist() == start
        assert ctx.tokens == snap.tokens
        again = [ctx.decode(t).tolist() for t in (432, 383, 286)]
        ctx.restore(snap)  # as often as wanted, until closed
        assert ctx.decode(432).tolist() == first[0]
        snap.close()
        assert ctx.state.kv.audit() == [] and ctx.state.kv.page_use()["snapshots"] == 0
    assert first == again


def test_closing_gives_every_page_back():
    with llamay.load(paths.stories("f32"), backend="portable") as model:
        ctx = model.context(n_ctx=64, n_seq=3)
        st = ctx.state
        all_free = st.kv.page_use()["free"]
        with ctx:
            ctx.decode(model.tokenize("Once upon a time there was a little girl"))
            fork = ctx.fork()
            snap = ctx.snapshot()
            fork.decode(300)
            assert st.kv.page_use()["free"] < all_free
        assert ctx.closed and st.kv.audit() == []
        fork.close()
        assert st.kv.page_use()["snapshots"] > 0  # the snapshot still holds the prompt's pages
        with model.context(n_ctx=64) as other, pytest.raises(llamay.LlamayError, match="another context"):
            other.restore(snap)
        snap.close()
        snap.close()  # a second close does nothing
        assert st.kv.page_use() == {"free": all_free, "sequences": 0, "snapshots": 0, "prefix_cache": 0}
        assert st.kv.audit() == [] and not any(s.active for s in st.kv.sequences)


def test_a_failed_decode_leaves_the_context_as_it_was(monkeypatch):
    with llamay.load(paths.stories("f32"), backend="portable") as model, model.context(n_ctx=64) as ctx:
        logits = ctx.decode(model.tokenize("Once upon a time"))
        before, row = ctx.tokens, logits.tolist()
        calls = []

        def broken(*args, **kw):
            calls.append(1)
            raise RuntimeError("a kernel failed")

        monkeypatch.setattr(model.core, "arch", dataclasses.replace(model.core.arch, output=broken))
        with pytest.raises(RuntimeError, match="a kernel failed"):
            ctx.decode([401, 396])
        monkeypatch.undo()
        assert calls and ctx.tokens == before and ctx.state.kv.audit() == []
        assert logits.tolist() == row  # still the last good step's
        with model.context(n_ctx=64) as cold:
            assert ctx.decode(401).tolist() == cold.decode([*before, 401]).tolist()


def test_misuse_is_a_clear_error():
    with llamay.load(paths.stories("f32"), backend="portable") as model:
        with model.context(n_ctx=8) as ctx:
            with pytest.raises(llamay.ContextFullError, match="holds 8 tokens: it has 0 and 9 more"):
                ctx.decode(list(range(1, 10)))
            with pytest.raises(llamay.TokenError, match="token 1 is 512: not a token id"):
                ctx.decode([1, 512])
            with pytest.raises(llamay.TokenError, match="at least one token"):
                ctx.decode([])
            with pytest.raises(llamay.LlamayError, match="no logits yet"):
                llamay.Sampler().sample(ctx)
            old = ctx.decode(1)
            ctx.decode(403)
            with pytest.raises(llamay.LlamayError, match="stale"):
                old.argmax()
            with pytest.raises(llamay.ContextFullError, match=r"all 1 \(model.context\(n_seq"):
                ctx.fork()
        with pytest.raises(llamay.ContextClosedError, match="was closed"):
            ctx.decode(1)
        with pytest.raises(llamay.LlamayError, match="n_seq must be a positive integer"):
            model.context(n_seq=0)
        ctx = model.context(n_ctx=8)
        ctx.decode(1)
    assert repr(ctx) == "<llamay.Context of stories260K (karpathy/llama2.c TinyStories): 1/8 tokens>"
    with pytest.raises(llamay.ContextClosedError, match=r"stories260K .* was closed"):
        ctx.decode(403)  # its model was closed
    with pytest.raises(llamay.ContextClosedError, match="was closed"):
        model.complete("Once", 4)
    ctx.close()
    with llamay.load(paths.MINILM, backend="portable") as encoder, pytest.raises(llamay.LlamayError, match="encoder"):
        encoder.context()
