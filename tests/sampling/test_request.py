"""llamay.sampling.request: the tables against the APIs' own field lists (OpenAI's, Ollama's options, llama.cpp's
/completion), every accepted name honoured, every refusal naming its field; and the server's OpenAI route and the
browser engine giving the same SamplerConfig (or the same refused field) for the same request."""

from __future__ import annotations

import math

import pytest

from llamay.sampling import BOUNDS, RequestFieldError, SamplerConfig, sampling_from_request
from llamay.sampling.request import (
    FIELDS,
    MAX_LOGIT_BIAS,
    MAX_STOP_CHARS,
    MAX_STOPS,
    OLLAMA_NEUTRAL,
    OLLAMA_RUNNER,
    accepted,
)
from tests import paths

# the APIs' own sampling field names, from their documentation (an independent list, not the tables)
OPENAI_DOCUMENTED = ("temperature", "top_p", "frequency_penalty", "presence_penalty", "seed", "logit_bias", "stop")
OLLAMA_DOCUMENTED = ("num_keep", "seed", "num_predict", "top_k", "top_p", "min_p", "typical_p", "repeat_last_n",
                     "temperature", "repeat_penalty", "presence_penalty", "frequency_penalty", "penalize_newline",
                     "stop", "numa", "num_ctx", "num_batch", "num_gpu", "main_gpu", "use_mmap", "num_thread",
                     "mirostat", "mirostat_tau", "mirostat_eta", "tfs_z")  # fmt: skip
LLAMACPP_DOCUMENTED = ("temperature", "dynatemp_range", "dynatemp_exponent", "top_k", "top_p", "min_p", "n_predict",
                       "stop", "typical_p", "repeat_penalty", "repeat_last_n", "presence_penalty",
                       "frequency_penalty", "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n",
                       "dry_sequence_breakers", "xtc_probability", "xtc_threshold", "mirostat", "mirostat_tau",
                       "mirostat_eta", "seed", "ignore_eos", "logit_bias", "n_probs", "min_keep", "samplers",
                       "post_sampling_probs", "top_n_sigma")  # fmt: skip
DOCUMENTED = {"openai": OPENAI_DOCUMENTED, "ollama": OLLAMA_DOCUMENTED, "llamacpp": LLAMACPP_DOCUMENTED}

# a value each config field takes that is not its default (so honouring it shows in the config)
GOOD = {"temp": 0.5, "top_k": 7, "top_p": 0.9, "min_p": 0.1, "typ_p": 0.8, "repeat_last_n": 16,
        "repeat_penalty": 1.2, "presence_penalty": 0.5, "frequency_penalty": -0.5, "dry_multiplier": 0.8,
        "dry_base": 2.0, "dry_allowed_length": 3, "dry_penalty_last_n": 32, "dry_sequence_breakers": ["\n", "."],
        "xtc_probability": 0.5, "xtc_threshold": 0.2, "mirostat": 2, "mirostat_tau": 4.0, "mirostat_eta": 0.2,
        "dynatemp_range": 0.3, "dynatemp_exponent": 1.5, "top_n_sigma": 2.0, "min_keep": 2, "n_probs": 3,
        "samplers": ["top_k", "temperature"], "ignore_eos": True, "post_sampling_probs": True}  # fmt: skip


@pytest.mark.parametrize("api", sorted(FIELDS))
def test_every_documented_name_is_read(api):
    assert set(DOCUMENTED[api]) <= set(accepted(api)), set(DOCUMENTED[api]) - set(accepted(api))


@pytest.mark.parametrize("api", sorted(FIELDS))
def test_every_sampler_field_is_honoured(api):
    for name, cfg in FIELDS[api].items():
        got = sampling_from_request({name: GOOD[cfg]}, api).config()
        want = GOOD[cfg] if not isinstance(GOOD[cfg], list) else tuple(GOOD[cfg])
        assert getattr(got, cfg) == want != getattr(SamplerConfig(), cfg), (api, name)


def outside(cfg: str) -> list:
    """Values just outside what BOUNDS[cfg] admits, and values of the wrong type."""
    b = BOUNDS[cfg]
    out: list = ["1", True, math.nan, math.inf]
    if b.lo is not None:
        out.append(b.lo if b.lo_open else b.lo - 1)
    if b.hi is not None:
        out.append(b.hi + 1)
    if b.integer:
        out += [1.5, 2**31]
    return out


@pytest.mark.parametrize("api", sorted(FIELDS))
def test_every_refusal_names_its_field(api):
    for name, cfg in FIELDS[api].items():
        if cfg not in BOUNDS:
            continue
        for value in outside(cfg):
            with pytest.raises(RequestFieldError) as e:
                sampling_from_request({name: value}, api)
            assert e.value.field == name and str(e.value).startswith(f"{name}: "), (api, name, value)


def test_the_rules_each_side_had():
    openai = lambda **kw: sampling_from_request(kw, "openai", n_vocab=100)  # noqa: E731
    for field, value in [("repeat_penalty", 0), ("temperature", 2.5), ("temperature", -0.1), ("presence_penalty", 3),
                         ("frequency_penalty", -3), ("top_k", 2**40), ("seed", 2**64), ("seed", -(2**63) - 1),
                         ("dry_sequence_breakers", [""]), ("dry_sequence_breakers", ["x" * 41])]:  # fmt: skip
        with pytest.raises(RequestFieldError) as e:
            openai(**{field: value})
        assert e.value.field == field
    # the API's range narrows only its own API: llama.cpp takes a negative temperature (greedy)
    assert sampling_from_request({"temperature": -1, "presence_penalty": 5}, "llamacpp").config().temp == -1
    assert openai(seed=-1).config().seed is None and openai(seed=2**64 - 1).config(1).seed == 0  # choice 1 wraps
    stop_limits = [(["a"] * (MAX_STOPS + 1), "max_stops"), ("x" * (MAX_STOP_CHARS + 1), "max_stop_chars"),
                   (["a", 3], "list of strings")]  # fmt: skip
    for stop, what in stop_limits:
        with pytest.raises(RequestFieldError, match=what) as e:
            openai(stop=stop)
        assert e.value.field == "stop"
    assert openai(stop=["a", "", "b"]).stop == ("a", "b") and openai(stop="z").stop == ("z",)
    for bias in ({"5": 101}, {"5": True}, {"abc": 1}, {"-1": 1}, {"05": 1}, {"100": 1},
                 {str(i): 1 for i in range(MAX_LOGIT_BIAS + 1)}, [[5, 1.0]]):  # fmt: skip
        with pytest.raises(RequestFieldError) as e:
            openai(logit_bias=bias)
        assert e.value.field.split(".")[0] == "logit_bias", bias
    assert openai(logit_bias={"7": -100, "0": 100}).sampling["logit_bias"] == {7: -100.0, 0: 100.0}
    pairs = sampling_from_request({"logit_bias": [[5, False], [6, 2.5]]}, "llamacpp").config()
    assert dict(pairs.logit_bias) == {5: -math.inf, 6: 2.5}  # llama.cpp's pairs; false bans


def test_unknown_fields():
    """An OpenAI or llama.cpp body carries other fields (messages, model...): they are not the sampler's. Ollama's
    options are a closed set: an unknown option is refused by name."""
    assert sampling_from_request({"model": "m", "messages": [], "temp": 3.0}, "openai").sampling == {}
    with pytest.raises(RequestFieldError) as e:
        sampling_from_request({"bogus_option": 1}, "ollama")
    assert e.value.field == "bogus_option" and e.value.code == "unknown_option"


def test_ollama_options():
    got = sampling_from_request({"num_predict": 0, "temperature": 0, "typical_p": 0.5, "stop": ["a"]}, "ollama")
    assert (got.max_tokens, got.sampling, got.stop) == (1, {"temp": 0, "typ_p": 0.5}, ("a",))
    assert sampling_from_request({"num_predict": -1}, "ollama").max_tokens is None  # until the context is full
    ok = {**{name: (True if least is None else least) for name, least in OLLAMA_RUNNER.items()}, **OLLAMA_NEUTRAL}
    assert sampling_from_request(ok, "ollama").sampling == {}  # accepted, no effect
    for field, value in [("tfs_z", 0.5), ("penalize_newline", False), ("num_predict", -3), ("num_ctx", 0),
                         ("use_mmap", 1), ("num_keep", -2), ("temperature", "hot")]:  # fmt: skip
        with pytest.raises(RequestFieldError) as e:
            sampling_from_request({field: value}, "ollama")
        assert e.value.field == field


def test_from_params_is_the_llama_cpp_path():
    with pytest.raises(RequestFieldError) as e:
        SamplerConfig.from_params({"penalty_repeat": 0})
    assert e.value.field == "penalty_repeat"
    cfg = SamplerConfig.from_params({"samplers": "top_k;temperature", "logprobs": True}, temp=0.1)
    assert (cfg.samplers, cfg.n_probs, cfg.temp) == (("top_k", "temperature"), 1, 0.1)


# -- the server's OpenAI route and the browser engine: one path -----------------------------------------------


N_VOCAB = 64


def through_browser(body: dict):
    try:
        cfg, stop = paths.web_py_module().request_sampling(body, N_VOCAB)
    except RequestFieldError as e:
        return ("refused", e.field.split(".")[0])
    return (cfg, tuple(stop))


def through_server(body: dict):
    """The OpenAI completions route's path: its schema, then params.from_openai and sampler_for."""
    pydantic = pytest.importorskip("pydantic")
    params = pytest.importorskip("llamay.native.server.params")
    from llamay.native.server.errors import ApiError
    from llamay.native.server.schemas import CompletionRequest

    try:
        req = CompletionRequest.model_validate({"model": "m", "prompt": "x", **body})
        p = params.from_openai(req, N_VOCAB, max_tokens=4)
    except pydantic.ValidationError as e:
        return ("refused", str(e.errors()[0]["loc"][0]))
    except ApiError as e:
        return ("refused", e.param.split(".")[0])
    return (params.sampler_for(p).cfg, p.stop)


def values(cfg: str):
    st = hypothesis.strategies
    b = BOUNDS[cfg]
    lo = -5.0 if b.lo is None else b.lo
    hi = 5.0 if b.hi is None else b.hi
    inside = st.integers(math.ceil(lo), int(hi)) if b.integer else st.floats(lo, hi, allow_nan=False)
    return rarely(st.sampled_from([*outside(cfg), 2.5, -0.1]), inside | st.sampled_from([0, 1]))


def rarely(bad, good):
    """Mostly `good`: a body of some 25 fields is then accepted about half the time, not almost never."""
    st = hypothesis.strategies
    return st.integers(0, 24).flatmap(lambda i: bad if i == 0 else good)


hypothesis = pytest.importorskip("hypothesis")


@hypothesis.settings(max_examples=200, deadline=None, derandomize=True, database=None)
@hypothesis.given(data=hypothesis.strategies.data())
def test_the_server_route_and_the_browser_give_the_same_config(data):
    st = hypothesis.strategies
    fields = {name: values(cfg) for name, cfg in FIELDS["openai"].items() if cfg in BOUNDS}
    fields["seed"] = rarely(st.sampled_from([2**64, 1.5, "1"]), st.sampled_from([-1, 0, 7, 2**64 - 1]))
    fields["stop"] = rarely(st.sampled_from([["a"] * 17, "y" * 1025, [3]]), st.sampled_from(["x", ["a", ""]]))
    fields["logit_bias"] = rarely(st.sampled_from([{"64": 1}, {"5": 101}, {"x": 1}]),
                                  st.sampled_from([{"5": 1.5}, {"63": -100}]))  # fmt: skip
    fields["dry_sequence_breakers"] = rarely(st.sampled_from([[""], ["x" * 41]]), st.just(["\n", "a"]))
    body = data.draw(st.fixed_dictionaries({}, optional=fields))
    server, browser = through_server(body), through_browser(body)
    if server[0] == "refused" or browser[0] == "refused":
        # both refuse; the first field named may differ (pydantic goes in declaration order), so each side's field,
        # alone, is refused by name on the other side too
        assert server[0] == browser[0] == "refused", (server, browser)
        for name in {server[1], browser[1]}:
            alone = {name: body[name]}
            assert through_server(alone) == through_browser(alone) == ("refused", name), (name, body[name])
    else:
        assert server == browser
