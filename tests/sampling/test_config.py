"""SamplerConfig's bounds (`config.BOUNDS`): every value they admit samples without an error, whatever the logits;
every value outside them is refused by name, before any sampler exists."""

from __future__ import annotations

import math

import pytest

from llamay.sampling import BOUNDS, Sampler, SamplerConfig, SamplerConfigError
from llamay.sampling.config import FLT_MAX
from tests.sampling.helpers import row

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

N = 48
FLOAT_FIELDS = sorted(name for name, b in BOUNDS.items() if not b.integer)
INT_FIELDS = sorted(name for name, b in BOUNDS.items() if b.integer and name != "seed")


def admitted(name: str) -> st.SearchStrategy:
    """Values the bound admits: its ends, values near them and anything in between (huge ones included)."""
    b = BOUNDS[name]
    if b.integer:
        lo = -(10**6) if b.lo is None else int(b.lo)
        hi = 10**6 if b.hi is None else int(b.hi)
        return st.integers(lo, hi) | st.sampled_from(sorted({lo, hi, 0, 1} & set(range(lo, hi + 1))))
    lo = -FLT_MAX if b.lo is None else b.lo
    hi = FLT_MAX if b.hi is None else b.hi
    ends = [v for v in (lo, hi, 0.0, 1.0, 1e-300, -1e-300, 5e-324, 0.5, 1e30, -1e30) if b.admits(v)]
    return st.floats(lo, hi, exclude_min=b.lo_open, allow_nan=False, allow_infinity=False) | st.sampled_from(ends)


def config_values() -> st.SearchStrategy:
    fields = {name: admitted(name) for name in FLOAT_FIELDS + INT_FIELDS}
    fields["mirostat"] = st.sampled_from((0, 1, 2))
    return st.fixed_dictionaries({}, optional=fields)


LOGITS = st.lists(
    st.floats(-1e4, 1e4, allow_nan=False, width=32)
    | st.sampled_from([-math.inf, math.inf, 0.0, 88.0, -88.0, 3e38, -3e38]),
    min_size=N,
    max_size=N,
).filter(lambda xs: any(x != -math.inf for x in xs))


@hypothesis.settings(max_examples=300, deadline=None, derandomize=True, database=None)
@hypothesis.given(kw=config_values(), logits=LOGITS, history=st.lists(st.integers(0, N - 1), max_size=40))
def test_every_admitted_value_samples_a_token(kw, logits, history):
    cfg = SamplerConfig(seed=1, **kw)
    be, buf = row(logits)
    s = Sampler(cfg, n_vocab=N)
    s.accept_prompt(history)
    for _ in range(4):
        tok = s.sample(be, buf, 0, N)
        assert 0 <= tok < N


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("repeat_penalty", 0.0),  # divides the positive logits
        ("repeat_penalty", -1.0),
        ("temp", math.nan),
        ("temp", math.inf),
        ("top_p", 1.5),
        ("top_p", -0.1),
        ("min_p", math.nan),
        ("typ_p", 2.0),
        ("presence_penalty", math.inf),
        ("frequency_penalty", -math.inf),
        ("repeat_last_n", -2),
        ("dry_penalty_last_n", -5),
        ("dry_multiplier", -1.0),
        ("dry_allowed_length", -1),
        ("xtc_probability", 1.01),
        ("xtc_threshold", -0.5),
        ("mirostat_tau", -1.0),
        ("mirostat_eta", math.nan),
        ("dynatemp_range", -0.1),
        ("dynatemp_exponent", -1.0),  # 0 ** -1: a zero-entropy row divides by zero
        ("min_keep", -1),
        ("n_probs", -3),
        ("top_k", 2.5),
        ("top_k", "40"),
        ("temp", True),
        ("seed", 2**64),
        ("mirostat", 3),
    ],
)
def test_values_outside_the_bounds_are_refused_by_name(field, value):
    with pytest.raises(SamplerConfigError) as e:
        SamplerConfig(**{field: value})
    assert e.value.field == field
    assert field in str(e.value)


def test_logit_bias_and_breakers_are_checked():
    for bias in ({3: math.nan}, {3: math.inf}, {-1: 1.0}, {"x": 1.0}):
        with pytest.raises(SamplerConfigError, match="logit_bias"):
            SamplerConfig(logit_bias=bias)
    assert dict(SamplerConfig(logit_bias={3: -math.inf}).logit_bias) == {3: -math.inf}  # -inf bans a token
    with pytest.raises(SamplerConfigError, match="dry_sequence_breakers"):
        SamplerConfig(dry_sequence_breakers=["x" * 41])
    with pytest.raises(SamplerConfigError, match="dry_sequence_breakers"):
        SamplerConfig(dry_sequence_breakers=[""])


def test_from_params_names_the_request_field():
    with pytest.raises(SamplerConfigError) as e:
        SamplerConfig.from_params({"penalty_repeat": 0})
    assert e.value.field == "penalty_repeat"
    with pytest.raises(SamplerConfigError) as e:
        SamplerConfig.from_params({"typical_p": math.nan})
    assert e.value.field == "typical_p"


def test_integral_floats_are_integers():
    assert SamplerConfig(top_k=40.0).top_k == 40 and isinstance(SamplerConfig(top_k=40.0).top_k, int)


def test_a_vanishing_temperature_is_greedy_and_infinite_logits_share_the_mass():
    from llamay.sampling import softmax

    logits = [1.0, 3.0, 2.0, -math.inf]
    be, buf = row(logits)
    s = Sampler(SamplerConfig(temp=5e-324, top_k=0, top_p=1.0, min_p=0.0, seed=3), n_vocab=4)
    assert {s.sample(be, buf, 0, 4) for _ in range(20)} == {1}  # 3 / 5e-324 overflows: the limit is argmax
    assert softmax([math.inf, 0.0, math.inf]) == [0.5, 0.0, 0.5]


def test_dynamic_temperature_of_a_uniform_row_with_a_huge_exponent():
    """The normalised entropy of five equal logits rounds to 1 + 2e-16; raised to 1e30 it overflowed."""
    be, buf = row([0.3] * 5)
    s = Sampler(SamplerConfig(temp=1.0, dynatemp_range=0.5, dynatemp_exponent=1e30, top_k=0, seed=1), n_vocab=5)
    assert 0 <= s.sample(be, buf, 0, 5) < 5
