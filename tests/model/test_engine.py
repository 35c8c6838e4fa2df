"""The engine end to end on the tiny real model: known greedy text, prefix reuse, stop strings, embeddings."""

from __future__ import annotations

import json
import math

import pytest

from llamay.engine import Engine, StopMatcher
from llamay.errors import LlamayError
from llamay.model import load_model
from llamay.sampling import SamplerConfig
from tests import paths

GREEDY = SamplerConfig(temperature=0.0)
# the model card's greedy sample (README-karpathy-stories260K.md), reproduced by llama.cpp on the f32 file
STORIES_GREEDY = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."


def test_stories_f32_greedy_text(backend_name):
    with load_model(paths.stories("f32"), backend_name) as m:
        text = "Once upon a time" + "".join(Engine(m, n_ctx=128).complete("Once upon a time", 30, GREEDY))
    assert text.startswith(STORIES_GREEDY)


def test_prefix_reuse_gives_the_cold_result(backend_name):
    with load_model(paths.stories("q8_0"), backend_name) as m:
        warm = Engine(m, n_ctx=128)
        first = "".join(warm.complete("Once upon a time", 12, GREEDY))
        again = "".join(warm.complete("Once upon a time" + first, 12, GREEDY))
        assert warm.stats.cached_tokens > 5
        cold = "".join(Engine(m, n_ctx=128).complete("Once upon a time" + first, 12, GREEDY))
    assert again == cold


def test_sampling_is_seeded(backend_name):
    def sample(seed: int) -> str:
        cfg = SamplerConfig(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
        return "".join(Engine(m, n_ctx=64).complete("Once", 16, cfg))

    with load_model(paths.stories("f32"), backend_name) as m:
        a, b = sample(42), sample(42)
        others = {sample(s) for s in (1, 2, 3)}
    assert a == b and others - {a}


def test_stop_strings_and_finish_reason():
    with load_model(paths.stories("f32"), "portable") as m:
        e = Engine(m, n_ctx=128)
        text = "".join(e.complete("Once upon a time", 40, GREEDY, stop=["Lily"]))
        assert text == ", there was a little girl named " and e.stats.finish_reason == "stop"


@pytest.mark.parametrize(
    ("pieces", "stops", "want"),
    [
        (["ab", "cS", "TOPd"], ["STOP"], "abc"),
        (["x", "S", "T", "y"], ["STOP"], "xSTy"),
        (["hello"], [], "hello"),
    ],
)
def test_stop_matcher_holds_back_partial_matches(pieces, stops, want):
    m = StopMatcher(stops)
    out = "".join(m.push(p) for p in pieces if not m.stopped)
    if not m.stopped:
        out += m.flush()
    assert out == want


def _reference(pieces: list[str], stops: list[str]) -> str:
    """What a stop matcher must output: the text up to the earliest stop found after the push that completes
    one (quadratic and obviously right)."""
    text = ""
    for piece in pieces:
        text += piece
        found = [text.find(s) for s in stops if s and s in text]
        if found:
            return text[: min(found)]
    return text


def _partial(text: str, stops: list[str]) -> int:
    """Length of the longest suffix of text that is a proper prefix of a stop."""
    return max((k for s in stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)


hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies
ALPHABET = st.text("abAB", max_size=6)


@hypothesis.settings(max_examples=400, deadline=None, derandomize=True, database=None)
@hypothesis.given(pieces=st.lists(ALPHABET, max_size=12), stops=st.lists(st.text("abAB", max_size=5), max_size=4))
def test_stop_matcher_matches_the_reference_and_holds_back_only_partial_matches(pieces, stops):
    m = StopMatcher(stops)
    out, text = "", ""
    for piece in pieces:
        out += m.push(piece)
        if m.stopped:
            break
        text += piece
        assert text.startswith(out) and len(text) - len(out) == _partial(text, [s for s in stops if s])
    if not m.stopped:
        out += m.flush()
    assert out == _reference(pieces, stops)


def test_a_long_stop_string_costs_linear_time():
    """Pushing a character at a time against a 20k-character stop: O(L) in all (the old matcher was O(L^2) per
    push, i.e. 20k pushes of 4e8 steps; this runs in well under a second)."""
    stop = "ab" * 10_000
    m = StopMatcher([stop])
    out = "".join(m.push(ch) for ch in ("ab" * 9_999 + "a" + "c"))
    assert out == "ab" * 9_999 + "ac" and not m.stopped
    m = StopMatcher([stop, "zz"])
    out = "".join(m.push(ch) for ch in "x" + stop)
    assert out == "x" and m.stopped


def test_context_overflow_is_a_clear_error():
    with load_model(paths.stories("f32"), "portable") as m:
        e = Engine(m, n_ctx=8)
        with pytest.raises(LlamayError, match="the context holds 8"):
            list(e.complete("Once upon a time there was a little girl named Lily", 4, GREEDY))


def test_minilm_embeddings_match_sentence_transformers(backend_name):
    expected = json.loads((paths.MINILM.parent / "expected.json").read_text())
    with load_model(paths.MINILM, backend_name) as m:
        got = Engine(m).embed(expected["sentences"])
    for a, b in zip(got, expected["embeddings"], strict=True):
        cos = sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
        assert cos >= 0.9999


def test_embeddings_refuse_a_decoder():
    with load_model(paths.stories("f32"), "portable") as m, pytest.raises(LlamayError, match="without pooling"):
        Engine(m).embed(["hello"])
