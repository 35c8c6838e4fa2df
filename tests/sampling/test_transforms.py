"""Each transform of the chain against a direct formula or a hand-worked case."""

from __future__ import annotations

import math
import random

import pytest

from llamay.sampling import softmax
from llamay.sampling.dry import Dry, z_function
from llamay.sampling.logit_bias import LogitBias
from llamay.sampling.min_p import MinP
from llamay.sampling.mirostat import Mirostat, MirostatV2
from llamay.sampling.penalties import Penalties
from llamay.sampling.temperature import Temperature
from llamay.sampling.top_k import TopK
from llamay.sampling.top_n_sigma import TopNSigma
from llamay.sampling.top_p import TopP
from llamay.sampling.typical import Typical
from llamay.sampling.xtc import XTC
from tests.sampling.helpers import candidates, f32


def logits_of(probs: list[float]) -> list[float]:
    return [math.log(p) for p in probs]


def kept(c) -> list[int]:
    return [t for t, _ in c.items]


# -- penalties ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_penalties_match_the_formula(seed):
    rng = random.Random(seed)
    raw = f32([rng.uniform(-5, 5) for _ in range(40)])
    history = [rng.randrange(40) for _ in range(30)]
    last_n, repeat, freq, present = rng.choice([8, 16, -1]), rng.uniform(1.0, 1.5), rng.uniform(0, 0.5), 0.3
    p = Penalties(last_n, repeat, freq, present)
    for t in history:
        p.accept(t)
    c = candidates(raw)
    p.apply(c)
    assert c.lazy and set(c.edits) <= set(history)  # only the penalised tokens were touched
    window = history if last_n < 0 else history[-last_n:]
    for t, v in c.explicit():
        n = window.count(t)
        want = raw[t] if n == 0 else (raw[t] * repeat if raw[t] <= 0 else raw[t] / repeat) - n * freq - present
        assert v == pytest.approx(want, abs=1e-9), t


def test_penalties_off_touch_nothing():
    p = Penalties(64, 1.0, 0.0, 0.0)
    p.accept(3)
    c = candidates([1.0] * 8)
    p.apply(c)
    assert not c.edits and c.lazy


def test_logit_bias_adds_and_bans():
    c = candidates([0.0, 1.0, 2.0])
    LogitBias({0: 5.0, 2: -math.inf, 9: 1.0}).apply(c)
    assert dict(c.explicit()) == {0: 5.0, 1: 1.0, 2: -math.inf}


# -- truncation -----------------------------------------------------------------------------------------------


def test_top_k_uses_the_backend_and_merges_edits():
    c = candidates([0.0, 3.0, 1.0, 2.0, 2.0])
    LogitBias({0: 10.0}).apply(c)
    TopK(3).apply(c)
    assert kept(c) == [0, 1, 3] and c.sorted  # ties by id
    assert c.be.calls["top_k"] == 1 and c.be.floats_read <= 1


@pytest.mark.parametrize(("p", "want"), [(0.8, [0, 1]), (0.81, [0, 1, 2]), (0.3, [0]), (1.0, [0, 1, 2, 3])])
def test_top_p(p, want):
    c = candidates(logits_of([0.5, 0.3, 0.15, 0.05]))
    c.explicit()
    TopP(p).apply(c)
    assert sorted(kept(c)) == want


def test_top_p_min_keep():
    c = candidates(logits_of([0.9, 0.05, 0.05]))
    TopP(0.5, min_keep=2).apply(c)
    assert kept(c) == [0, 1]


@pytest.mark.parametrize(("p", "want"), [(0.2, [0, 1, 2]), (0.5, [0, 1]), (0.9, [0]), (0.0, [0, 1, 2, 3])])
def test_min_p(p, want):
    c = candidates(logits_of([0.4, 0.3, 0.2, 0.05]))
    c.explicit()
    MinP(p).apply(c)
    assert sorted(kept(c)) == want


def typical_reference(probs: list[float], p: float) -> set[int]:
    entropy = -sum(q * math.log(q) for q in probs)
    order = sorted(range(len(probs)), key=lambda i: abs(-math.log(probs[i]) - entropy))
    out, mass = set(), 0.0
    for i in order:
        out.add(i)
        mass += probs[i]
        if mass > p:
            break
    return out


@pytest.mark.parametrize("seed", range(5))
def test_typical_matches_the_definition(seed):
    rng = random.Random(seed)
    raw = [rng.uniform(-3, 3) for _ in range(12)]
    probs = softmax(f32(raw))
    c = candidates(raw)
    Typical(0.7).apply(c)
    assert set(kept(c)) == typical_reference(probs, 0.7)


def test_xtc_removes_top_choices_but_the_last_of_them():
    c = candidates(logits_of([0.4, 0.3, 0.2, 0.06, 0.04]))
    XTC(1.0, 0.1, 1, random.Random(0)).apply(c)
    assert kept(c) == [2, 3, 4]  # 0.4 and 0.3 go; 0.2 (the least likely above 0.1) stays
    for prob, threshold in ((0.0, 0.1), (1.0, 0.6)):
        c = candidates(logits_of([0.4, 0.3, 0.2, 0.1]))
        c.explicit()
        XTC(prob, threshold, 1, random.Random(0)).apply(c)
        assert sorted(kept(c)) == [0, 1, 2, 3]


def test_top_n_sigma():
    raw = [10.0, 9.0, 0.0, 0.0, 0.0, 0.0]
    c = candidates(raw)
    TopNSigma(1.0).apply(c)
    mean = sum(raw) / 6
    std = math.sqrt(sum((v - mean) ** 2 for v in raw) / 6)
    assert sorted(kept(c)) == [i for i, v in enumerate(raw) if v >= 10.0 - std]


# -- temperature ----------------------------------------------------------------------------------------------


def test_temperature_scales_and_zero_keeps_the_best():
    c = candidates([1.0, 2.0, 4.0])
    Temperature(0.5).apply(c)
    assert dict(c.items) == {0: 2.0, 1: 4.0, 2: 8.0}
    c = candidates([1.0, 4.0, 4.0, 2.0])
    Temperature(0.0).apply(c)
    assert c.items == [(1, 4.0)]


def test_dynamic_temperature_follows_entropy():
    raw = [2.0, 1.0, 0.5, 0.0]
    c = candidates(raw)
    Temperature(1.0, dynatemp_range=0.5, exponent=2.0).apply(c)
    probs = softmax(raw)
    normalized = -sum(q * math.log(q) for q in probs) / math.log(4)
    temp = 0.5 + 1.0 * normalized**2
    assert dict(c.items) == pytest.approx({i: v / temp for i, v in enumerate(raw)})


# -- mirostat -------------------------------------------------------------------------------------------------


def test_mirostat_v2_truncates_by_surprise_and_updates_mu():
    m = MirostatV2(tau=1.0, eta=0.5, rng=random.Random(1))
    assert m.mu == 2.0
    c = candidates(logits_of([0.6, 0.3, 0.1]))
    token = m.choose(c)
    # surprise: -log2 0.6 = 0.74, -log2 0.3 = 1.74 <= mu 2, -log2 0.1 = 3.3 > 2: two candidates remain
    assert kept(c) == [0, 1] and token in (0, 1)
    q = [0.6 / 0.9, 0.3 / 0.9][token]
    assert m.mu == pytest.approx(2.0 - 0.5 * (-math.log2(q) - 1.0), rel=1e-6)


def test_mirostat_v1_runs_and_moves_mu():
    m = Mirostat(n_vocab=50, tau=3.0, eta=0.1, rng=random.Random(2))
    rng = random.Random(3)
    for _ in range(20):
        token = m.choose(candidates([rng.gauss(0, 2) for _ in range(50)]))
        assert 0 <= token < 50
    assert m.mu != 6.0


# -- DRY ------------------------------------------------------------------------------------------------------


def dry_reference(history, allowed, breaker_tokens=()):
    """For every earlier position, the longest match of the context's suffix ending there (not reaching past
    the most recent breaker); the token that followed gets the longest one. Brute force."""
    n = len(history)
    limit = n
    for dist, t in enumerate(reversed(history)):
        if t in breaker_tokens:
            limit = dist
            break
    out = {}
    for i in range(n - 1):
        length = 0
        while length <= i and history[i - length] == history[n - 1 - length]:
            length += 1
        length = min(length, limit)
        if length >= allowed:
            nxt = history[i + 1]
            out[nxt] = max(out.get(nxt, 0), length)
    return {t: v for t, v in out.items() if t not in breaker_tokens}


@pytest.mark.parametrize("seed", range(8))
def test_dry_matches_a_brute_force_reference(seed):
    rng = random.Random(seed)
    alphabet = rng.randint(2, 5)
    history = [rng.randrange(alphabet) for _ in range(rng.randint(3, 60))]
    breakers = {alphabet - 1: {()}} if seed % 2 else {}
    dry = Dry(0.8, 1.75, 2, -1, breakers)
    for t in history:
        dry.accept(t)
    c = candidates([0.0] * alphabet)
    dry.apply(c)
    want = dry_reference(history, 2, tuple(breakers))
    got = {t: v for t, v in c.explicit() if v != 0.0}
    assert got == pytest.approx({t: -0.8 * 1.75 ** (n - 2) for t, n in want.items()})


def test_dry_worked_example_and_multi_token_breaker():
    # a b c x a b: "a b" repeats, so 'c' would extend it to "a b c" (length 2 before it)
    dry = Dry(1.0, 2.0, 2, -1, {})
    for t in [0, 1, 2, 9, 0, 1]:
        dry.accept(t)
    c = candidates([0.0] * 10)
    dry.apply(c)
    assert {t: v for t, v in c.explicit() if v} == {2: -1.0}
    # "7 8 0 1" repeats (length 4: penalty 2**2); a breaker spanning two tokens (head 7, tail 8) stops the
    # repeat at the breaker: length 2, penalty 2**0
    for breakers, want in (({}, -4.0), ({7: {(8,)}}, -1.0)):
        dry = Dry(1.0, 2.0, 2, -1, breakers)
        for t in [7, 8, 0, 1, 2, 7, 8, 0, 1]:
            dry.accept(t)
        c = candidates([0.0] * 10)
        dry.apply(c)
        assert {t: v for t, v in c.explicit() if v} == {2: want}


def test_z_function():
    assert z_function([1, 2, 1, 2, 1]) == [5, 0, 3, 0, 1]
    assert z_function([]) == []
