"""One path from a request's fields to the sampler, for every API and both targets: `sampling_from_request`.

The server (after its schema) and the browser engine both call it, so a field means the same and is refused the
same, by name, on either. Tables, per API, map a request's field names to `SamplerConfig`'s (llama.cpp's names:
`typical_p` is `typ_p`, `temperature` is `temp`):

- "openai": OpenAI's names, in OpenAI's ranges (temperature in [0, 2], penalties in [-2, 2]), and the llama.cpp
  server's extensions it takes on its OpenAI routes; other fields belong to the rest of the request (ignored);
- "ollama": the names of Ollama's `options` (an unknown option is refused: Ollama's schema is closed);
- "llamacpp": llama.cpp's `/completion` names and its aliases (`penalty_repeat`, `top_logprobs`...).

Every numeric field is bounded by `BOUNDS` (what the math admits) and, for integers, by llama.cpp's int32; stop
strings and logit biases by the limits below (each check costs work that grows with the request).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .config import BOUNDS, Bound, SamplerConfig, SamplerConfigError, _num

Api = Literal["openai", "ollama", "llamacpp"]

MAX_STOPS = 16  # stop strings of one request
MAX_STOP_CHARS = 1024  # characters of one stop string (each token's check scans them all: 16 Ki in all)
MAX_LOGIT_BIAS = 1024  # logit_bias entries
LOGIT_BIAS_LIMIT = 100.0  # OpenAI's range of a bias
INT32 = (-(2**31), 2**31 - 1)  # llama.cpp holds its integer parameters as int32
MAX_PREDICT = 1 << 20  # a static cap on num_predict / n_predict; the real limit is the context
COUNT = Bound(integer=True)  # a length or a runner option: its range is given where it is read

# request field -> SamplerConfig field: OpenAI's own four, then the llama.cpp server's extensions (its names)
OPENAI_OWN = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
RENAMED = {"temperature": "temp", "typical_p": "typ_p"}  # request name -> SamplerConfig's; the rest are the same
OPENAI_FIELDS = {name: RENAMED.get(name, name) for name in (
    *OPENAI_OWN, "top_k", "min_p", "typical_p", "repeat_penalty", "repeat_last_n", "dry_multiplier", "dry_base",
    "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability", "xtc_threshold",
    "mirostat", "mirostat_tau", "mirostat_eta", "dynatemp_range", "dynatemp_exponent", "top_n_sigma", "min_keep",
)}  # fmt: skip
OLLAMA_SAMPLING = ("temperature", "top_p", "top_k", "min_p", "typical_p", "presence_penalty", "frequency_penalty",
                   "repeat_penalty", "repeat_last_n", "mirostat", "mirostat_tau", "mirostat_eta")  # fmt: skip
OLLAMA_FIELDS = {name: OPENAI_FIELDS[name] for name in OLLAMA_SAMPLING}
LLAMACPP_FIELDS = {
    **OPENAI_FIELDS,
    **{name: name for name in ("temp", "typ_p", "n_probs", "samplers", "ignore_eos", "post_sampling_probs")},
    "penalty_last_n": "repeat_last_n",
    "penalty_repeat": "repeat_penalty",
    "penalty_freq": "frequency_penalty",
    "penalty_present": "presence_penalty",
    "top_logprobs": "n_probs",
}
FIELDS: dict[str, dict[str, str]] = {"openai": OPENAI_FIELDS, "ollama": OLLAMA_FIELDS, "llamacpp": LLAMACPP_FIELDS}
# a range an API documents, narrower than what the math admits
API_RANGES: dict[str, dict[str, tuple[float, float]]] = {
    "openai": {"temperature": (0.0, 2.0), "presence_penalty": (-2.0, 2.0), "frequency_penalty": (-2.0, 2.0)},
}
# fields of every API besides the sampler's table: how many tokens, the seed, the stop strings, logit biases
LENGTH_FIELD = {"ollama": "num_predict", "llamacpp": "n_predict"}  # OpenAI's max_tokens is the route's
HAS_LOGIT_BIAS = ("openai", "llamacpp")

# Ollama's other options: name -> the least integer it takes, or None for a flag; accepted, no effect here (the
# server's runner is set up at start-up, the context never shifts)
OLLAMA_RUNNER = {"num_ctx": 1, "num_batch": 1, "num_gpu": -1, "main_gpu": 0, "num_thread": 0, "numa": None,
                 "low_vram": None, "f16_kv": None, "vocab_only": None, "use_mmap": None, "use_mlock": None,
                 "num_keep": -1}  # fmt: skip
# gone from llama.cpp (tail-free sampling) or the only behaviour here (newlines penalised like any token): the
# neutral value only
OLLAMA_NEUTRAL = {"tfs_z": 1.0, "penalize_newline": True}


class RequestFieldError(SamplerConfigError):
    """A request field that cannot be honoured: `field` names it as the caller spelled it (`logit_bias.5` for
    one entry), `problem` says why, `code` is the server's error code. The server answers it with a 400, the
    browser engine with a "bad-request" error."""

    def __init__(self, field: str, problem: str, code: str | None = "invalid_value") -> None:
        super().__init__(field, problem)
        self.problem = problem
        self.code = code


@dataclass(frozen=True)
class RequestSampling:
    """What a request asks of the sampler, checked: SamplerConfig fields, the seed, stop strings, a length."""

    sampling: dict[str, Any] = field(default_factory=dict)  # SamplerConfig keyword arguments the request set
    seed: int | None = None  # None or -1: random; choice i uses seed + i
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None  # num_predict / n_predict (None: not given, or until the context is full)

    def config(self, choice: int = 0) -> SamplerConfig:
        return config_for(self.sampling, self.seed, choice)


def accepted(api: Api) -> tuple[str, ...]:
    """Every field name `sampling_from_request` reads under `api` (Ollama's: every option it takes)."""
    names = [*FIELDS[api], "seed", "stop"]
    if api in HAS_LOGIT_BIAS:
        names.append("logit_bias")
    if api in LENGTH_FIELD:
        names.append(LENGTH_FIELD[api])
    if api == "ollama":
        names += [*OLLAMA_NEUTRAL, *OLLAMA_RUNNER]
    if api == "llamacpp":
        names.append("logprobs")
    return tuple(names)


def config_for(sampling: Mapping[str, Any], seed: int | None, choice: int = 0) -> SamplerConfig:
    """The config of one choice: seeded `seed + choice`, so that n choices differ yet repeat (-1: random, as in
    llama.cpp)."""
    kw = dict(sampling)
    if seed is not None and seed != -1:
        kw["seed"] = (seed + choice) % (1 << 64)
    return SamplerConfig(**kw)


def sampling_from_request(fields: Mapping[str, Any], api: Api, n_vocab: int | None = None) -> RequestSampling:
    """The sampling a request's fields ask for under `api`'s names; RequestFieldError naming the first field that
    cannot be honoured. `n_vocab` bounds logit_bias's token ids when known."""
    if api not in FIELDS:
        raise ValueError(f"unknown API {api!r} ({', '.join(FIELDS)})")
    table, ranges = FIELDS[api], API_RANGES.get(api, {})
    given = {k: v for k, v in fields.items() if v is not None}
    sampling: dict[str, Any] = {}
    for name, value in given.items():
        cfg = table.get(name)
        if cfg in BOUNDS:
            sampling[cfg] = _checked(name, BOUNDS[cfg], value, ranges.get(name))
        elif cfg == "samplers" and isinstance(value, str):  # llama.cpp's "top_k;temperature"
            sampling[cfg] = tuple(s for s in value.replace(",", ";").split(";") if s)
        elif cfg is not None:
            sampling[cfg] = value  # a list or a flag: SamplerConfig checks it
        elif api == "ollama":
            _ollama_other(name, value)
    try:
        SamplerConfig(**sampling)  # the checks that span values (breakers, samplers)
    except SamplerConfigError as e:
        raise RequestFieldError(next((n for n in given if table.get(n) == e.field), e.field), e.reason) from None
    if "logit_bias" in given and api in HAS_LOGIT_BIAS:
        bias = logit_bias(given["logit_bias"], n_vocab, pairs=api == "llamacpp")
        if bias:
            sampling["logit_bias"] = bias
    if api == "llamacpp" and given.get("logprobs") is True and "n_probs" not in sampling:
        sampling["n_probs"] = 1
    seed = _checked("seed", BOUNDS["seed"], given["seed"]) if "seed" in given else None
    length = LENGTH_FIELD.get(api)
    max_tokens = None
    if length in given:
        n = _checked(length, COUNT, given[length], (-2, MAX_PREDICT))
        max_tokens = None if n < 0 else max(n, 1)
    return RequestSampling(sampling=sampling, seed=seed, stop=stops(given.get("stop")), max_tokens=max_tokens)


def _checked(name: str, bound: Bound, value: Any, api_range: tuple[float, float] | None = None) -> Any:
    """A value within `bound` (what the math admits), llama.cpp's int32 for integers, and the API's range."""
    try:
        value = bound.check(name, value)
    except SamplerConfigError as e:
        raise RequestFieldError(name, e.reason) from None
    lo, hi = api_range or (-math.inf, math.inf)
    if bound.integer and bound is not BOUNDS["seed"]:
        lo, hi = max(lo, INT32[0]), min(hi, INT32[1])
    if not lo <= value <= hi:
        raise RequestFieldError(name, f"must lie in [{_num(lo)}, {_num(hi)}], got {value!r}")
    return value


def _ollama_other(name: str, value: Any) -> None:
    """Ollama's options outside the sampler's table: the seed, stop strings and length are read by the caller;
    the runner's are type-checked; the neutral ones take their neutral value only; any other is refused."""
    if name in ("seed", "stop", "num_predict"):
        return
    if name in OLLAMA_NEUTRAL:
        want = OLLAMA_NEUTRAL[name]
        same_type = type(value) is type(want) or (isinstance(want, float) and type(value) is int)
        if not same_type or value != want:
            raise RequestFieldError(name, f"takes only {want!r} here, got {value!r}")
        return
    if name not in OLLAMA_RUNNER:
        raise RequestFieldError(name, "is not an Ollama option", "unknown_option")
    least = OLLAMA_RUNNER[name]
    if least is None:
        if not isinstance(value, bool):
            raise RequestFieldError(name, f"must be a boolean, got {value!r}")
    else:
        _checked(name, COUNT, value, (least, INT32[1]))


def stops(value: Any) -> tuple[str, ...]:
    """The stop strings, within their limits (count, each one's length: so at most 16 Ki characters in all, which
    each token's check scans at most once, in C); empty ones are dropped."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value if isinstance(value, list | tuple) else None
    if items is None or not all(isinstance(s, str) for s in items):
        raise RequestFieldError("stop", f"a string or a list of strings, got {value!r}", None)
    if len(items) > MAX_STOPS:
        raise RequestFieldError("stop", f"at most {MAX_STOPS} stop strings are allowed (max_stops), got {len(items)}",
                                None)  # fmt: skip
    longest = max(map(len, items), default=0)
    if longest > MAX_STOP_CHARS:
        raise RequestFieldError(
            "stop", f"a stop string has {longest} characters; the limit is {MAX_STOP_CHARS} (max_stop_chars)", None
        )
    return tuple(s for s in items if s)


def logit_bias(value: Any, n_vocab: int | None, *, pairs: bool = False) -> dict[int, float] | None:
    """{token: bias}: OpenAI's {"token id": bias in [-100, 100]}; with `pairs`, also llama.cpp's [[token, bias |
    false], ...] where false and -inf ban the token."""
    if not value:
        return None
    if isinstance(value, Mapping):
        items = list(value.items())
    elif pairs and isinstance(value, list | tuple) and all(isinstance(p, list | tuple) and len(p) == 2 for p in value):
        items = [tuple(p) for p in value]
    else:
        shape = "token -> bias pairs" if pairs else 'an object {"token id": bias}'
        raise RequestFieldError("logit_bias", f"must be {shape}, got {value!r}", None)
    if len(items) > MAX_LOGIT_BIAS:  # before any entry is read
        raise RequestFieldError(
            "logit_bias", f"logit_bias has {len(items)} entries; the limit is {MAX_LOGIT_BIAS} (max_logit_bias)", None
        )
    out: dict[int, float] = {}
    for key, bias in items:
        tok = _token(key, pairs)
        if tok is None:
            raise RequestFieldError("logit_bias", f"logit_bias keys are token ids, got {key!r}", None)
        if n_vocab is not None and tok >= n_vocab:
            raise RequestFieldError(
                "logit_bias", f"logit_bias token {tok} is outside the vocabulary of {n_vocab}", None
            )
        if pairs and (bias is False or bias == -math.inf):
            out[tok] = -math.inf
            continue
        if isinstance(bias, bool) or not isinstance(bias, int | float) or not abs(bias) <= LOGIT_BIAS_LIMIT:
            raise RequestFieldError(f"logit_bias.{key}", f"logit_bias values lie in [-100, 100], got {bias!r}", None)
        out[tok] = float(bias)
    return out


def _token(key: Any, ints: bool) -> int | None:
    """A token id from a key: a decimal string ("0", "17"; OpenAI's keys), or an integer where pairs are allowed."""
    if isinstance(key, str):
        return int(key) if key.isascii() and key.isdigit() and (key == "0" or key[0] != "0") else None
    if ints and isinstance(key, int) and not isinstance(key, bool) and key >= 0:
        return key
    return None
