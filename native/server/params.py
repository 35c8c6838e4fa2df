"""One place where request fields become generation parameters, and those become a `Sampler`.

Every API family (OpenAI chat and completions, Ollama generate and chat, contexts) fills a `GenParams`; only
this module knows the sampler. Each request field that steers sampling is mapped, by a table, to the
`SamplerConfig` field of the same meaning (llama.cpp's names: `typical_p` is `typ_p`, `temperature` is
`temp`), and the config is built once per request, here, so a value outside `llamay.sampling.BOUNDS` is a 400
naming the request's field before anything is queued (the schemas publish the same bounds, so pydantic
usually refuses first). Fields with no config counterpart (Ollama's `tfs_z`, `penalize_newline`) are admitted
by the schema at their neutral value only. A `response_format` (`json_object`, `json_schema`; Ollama's
`format`) becomes a constraint through `llamay.constraints.constraint_from_request`; its compile limits come
back as 400s naming the limit.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any

from llamay.errors import LlamayError
from llamay.sampling import Sampler, SamplerConfig, SamplerConfigError

from .errors import bad_request
from .limits import MAX_LOGIT_BIAS, MAX_STOP_CHARS, MAX_STOPS
from .schemas import OLLAMA_SAMPLING, SAMPLING_FIELDS, OllamaOptions, Sampling

OPENAI_FIELDS = SAMPLING_FIELDS  # request field -> SamplerConfig field (the table is the schemas')
OLLAMA_FIELDS = {name: SAMPLING_FIELDS[name] for name in OLLAMA_SAMPLING}
LOGIT_BIAS_LIMIT = 100.0


@dataclass(frozen=True)
class GenParams:
    max_tokens: int | None  # None: until the context is full
    sampling: dict[str, Any] = field(default_factory=dict)  # SamplerConfig fields the request set (checked)
    seed: int | None = None  # None (or -1): random; choice i uses seed + i
    stop: tuple[str, ...] = ()
    n: int = 1
    logprobs: int | None = None  # None: no logprobs; k: the sampled token's and the k most likely
    response_format: dict[str, Any] | None = None  # {"type": "json_object"} / {"type": "json_schema", ...}


def stops(value: str | list[str] | None, param: str = "stop") -> tuple[str, ...]:
    """The stop strings, within their limits (count, each one's length: so at most 16 Ki characters in all, which
    each token's check scans at most once, in C)."""
    items = [value] if isinstance(value, str) else list(value or [])
    if len(items) > MAX_STOPS:
        raise bad_request(f"at most {MAX_STOPS} stop strings are allowed (max_stops), got {len(items)}", param)
    longest = max(map(len, items), default=0)
    if longest > MAX_STOP_CHARS:
        raise bad_request(f"a stop string has {longest} characters; the limit is {MAX_STOP_CHARS} (max_stop_chars)",
                          param)  # fmt: skip
    return tuple(s for s in items if s)


def logit_bias(value: dict[str, float] | None, n_vocab: int) -> dict[int, float] | None:
    if not value:
        return None
    if len(value) > MAX_LOGIT_BIAS:
        raise bad_request(f"logit_bias has {len(value)} entries; the limit is {MAX_LOGIT_BIAS} (max_logit_bias)",
                          "logit_bias")  # fmt: skip
    out = {}
    for key, bias in value.items():
        try:
            tok = int(key)
        except ValueError:
            raise bad_request(f"logit_bias keys are token ids, got {key!r}", "logit_bias") from None
        if not 0 <= tok < n_vocab:
            raise bad_request(f"logit_bias token {tok} is outside the vocabulary of {n_vocab}", "logit_bias")
        if not -LOGIT_BIAS_LIMIT <= bias <= LOGIT_BIAS_LIMIT:
            raise bad_request(f"logit_bias values lie in [-100, 100], got {bias}", "logit_bias")
        out[tok] = float(bias)
    return out


def response_format(fmt: Any) -> dict[str, Any] | None:
    """A ResponseFormat as constraint_from_request reads it (None for text); the schema made sure of its shape."""
    if fmt is None or fmt.type == "text":
        return None
    return fmt.model_dump(exclude_none=True, by_alias=True)


def _sampling(req: Any, table: dict[str, str], prefix: str = "") -> dict[str, Any]:
    """The config fields a request sets, checked against SamplerConfig's bounds (400 naming the field)."""
    kw = {cfg: getattr(req, name) for name, cfg in table.items() if getattr(req, name, None) is not None}
    try:
        SamplerConfig(**kw)
    except SamplerConfigError as e:
        name = next((n for n, c in table.items() if c == e.field), e.field)
        raise bad_request(f"{prefix}{name}: {e.reason}", f"{prefix}{name}", "invalid_value") from None
    return kw


def from_openai(req: Sampling, n_vocab: int, *, max_tokens: int | None, logprobs: int | None = None,
                fmt: Any = None) -> GenParams:  # fmt: skip
    sampling = _sampling(req, OPENAI_FIELDS)
    bias = logit_bias(req.logit_bias, n_vocab)
    if bias:
        sampling["logit_bias"] = bias
    return GenParams(
        max_tokens=max_tokens,
        sampling=sampling,
        seed=req.seed,
        stop=stops(req.stop),
        n=req.n,
        logprobs=logprobs,
        response_format=response_format(fmt),
    )


def from_ollama(opts: OllamaOptions | None, fmt: str | dict[str, Any] | None) -> GenParams:
    o = opts or OllamaOptions()
    num_predict = o.num_predict
    if fmt == "json":
        rf: dict[str, Any] | None = {"type": "json_object"}
    elif isinstance(fmt, dict):
        rf = {"type": "json_schema", "json_schema": {"schema": fmt}}
    elif fmt in (None, ""):
        rf = None
    else:
        raise bad_request(f"format is 'json' or a JSON schema, got {fmt!r}", "format")
    return GenParams(
        max_tokens=None if num_predict is None or num_predict < 0 else max(num_predict, 1),
        sampling=_sampling(o, OLLAMA_FIELDS, "options."),
        seed=o.seed,
        stop=stops(o.stop, "options.stop"),
        response_format=rf,
    )


def _sampler_takes(name: str) -> bool:
    return name in inspect.signature(Sampler).parameters


def _config_fields() -> set[str]:
    return {f.name for f in dataclasses.fields(SamplerConfig)}


def constraint_for(p: GenParams, tokenizer: Any) -> Any:
    """The constraint a `response_format` asks for (None for plain text); 400 where it cannot be built (a
    compile limit names itself: `limit`). Runs on a preparation thread: compiling costs time."""
    if p.response_format is None:
        return None
    try:
        from llamay.constraints import constraint_from_request
    except ImportError:
        constraint_from_request = None
    if constraint_from_request is None or not _sampler_takes("constraint"):
        raise bad_request(
            f"response_format {p.response_format['type']!r} needs the constraint engine, which this build's "
            "sampler does not have yet",
            "response_format",
            "unsupported_parameter",
        )
    try:
        return constraint_from_request({"response_format": p.response_format}, tokenizer)
    except LlamayError as e:
        code = "constraint_limit_exceeded" if getattr(e, "limit", None) else "invalid_response_format"
        raise bad_request(f"response_format: {e}", "response_format", code) from None
    except RecursionError:  # a compiler without a nesting limit
        raise bad_request("response_format: the schema is nested too deeply to compile", "response_format",
                          "constraint_limit_exceeded") from None  # fmt: skip


def check_supported(p: GenParams) -> None:
    """Refuse, before anything is queued, a parameter this build's sampler cannot honour (kept for callers
    that build GenParams themselves: from_openai / from_ollama already checked theirs)."""
    fields = _config_fields()
    unknown = sorted(set(p.sampling) - fields)
    if unknown:
        raise bad_request(f"{unknown[0]} is not supported by this build's sampler", unknown[0], "unsupported_parameter")


def sampler_for(p: GenParams, choice: int = 0, *, tokenizer: Any = None, constraint: Any = None,
                prompt: list[int] | None = None) -> Sampler:  # fmt: skip
    """The sampler of one choice: seeded `seed + choice` so that n choices differ yet repeat. The prompt is fed
    to the penalties (as llama.cpp does)."""
    kw = dict(p.sampling)
    if p.seed is not None and p.seed != -1:  # -1: random, as in llama.cpp
        kw["seed"] = (p.seed + choice) % (1 << 64)
    extra: dict[str, Any] = {}
    if constraint is not None:
        extra["constraint"] = constraint
    if tokenizer is not None:
        extra["tokenizer"] = tokenizer
    sampler = Sampler(SamplerConfig(**kw), **extra)
    if prompt:
        sampler.accept_prompt(prompt)
    return sampler
