"""One place where request fields become generation parameters, and those become a `Sampler`.

Every API family (OpenAI chat and completions, Ollama generate and chat, contexts) fills a `GenParams`; only
`sampler_for` knows the sampler. It passes each parameter the sampler's `SamplerConfig` has a field for, by name,
and refuses with a clear 400 a parameter that would change sampling but that this build's sampler cannot do yet
(`presence_penalty`, `frequency_penalty`, `repeat_penalty`, `logit_bias`, a `response_format` constraint): as
the sampler grows those fields, they are used here with no change. A `response_format` becomes a constraint
through `llamay.constraints.constraint_from_request` when that exists and the Sampler takes a `constraint`.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any

from llamay.errors import LlamayError
from llamay.sampling import Sampler, SamplerConfig

from .errors import bad_request
from .schemas import MAX_STOPS, OllamaOptions, ResponseFormat, Sampling

# a value of these that leaves sampling unchanged is accepted even where the sampler lacks the field
NEUTRAL: dict[str, Any] = {"presence_penalty": 0.0, "frequency_penalty": 0.0, "repeat_penalty": 1.0, "logit_bias": {}}
LOGIT_BIAS_LIMIT = 100.0


@dataclass(frozen=True)
class GenParams:
    max_tokens: int | None  # None: until the context is full
    temperature: float | None = None  # None: the sampler's default
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repeat_penalty: float | None = None
    logit_bias: dict[int, float] | None = None
    stop: tuple[str, ...] = ()
    n: int = 1
    logprobs: int | None = None  # None: no logprobs; k: the sampled token's and the k most likely
    response_format: dict[str, Any] | None = None  # {"type": "json_object"} / {"type": "json_schema", ...}
    extra: dict[str, Any] = field(default_factory=dict)


def stops(value: str | list[str] | None) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else list(value or [])
    if len(items) > MAX_STOPS:
        raise bad_request(f"at most {MAX_STOPS} stop strings are allowed, got {len(items)}", "stop")
    return tuple(s for s in items if s)


def logit_bias(value: dict[str, float] | None, n_vocab: int) -> dict[int, float] | None:
    if not value:
        return None
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


def response_format(fmt: ResponseFormat | None) -> dict[str, Any] | None:
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_schema" and not fmt.json_schema:
        raise bad_request("response_format json_schema needs a `json_schema` object", "response_format")
    return fmt.model_dump(exclude_none=True)


def from_openai(req: Sampling, n_vocab: int, *, max_tokens: int | None, logprobs: int | None = None,
                fmt: ResponseFormat | None = None) -> GenParams:  # fmt: skip
    return GenParams(
        max_tokens=max_tokens,
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=req.top_k,
        min_p=req.min_p,
        seed=req.seed,
        presence_penalty=req.presence_penalty,
        frequency_penalty=req.frequency_penalty,
        repeat_penalty=req.repeat_penalty,
        logit_bias=logit_bias(req.logit_bias, n_vocab),
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
        temperature=o.temperature,
        top_p=o.top_p,
        top_k=o.top_k,
        min_p=o.min_p,
        seed=o.seed,
        presence_penalty=o.presence_penalty,
        frequency_penalty=o.frequency_penalty,
        repeat_penalty=o.repeat_penalty,
        stop=stops(o.stop),
        response_format=rf,
    )


def with_defaults(p: GenParams, defaults: Any) -> GenParams:
    """`p` with the fields a request left out taken from a stored model's PARAMETERs (an Options, or None)."""
    if defaults is None:
        return p
    fill: dict[str, Any] = {}
    for name, fld in (("temperature", "temp"), ("top_p", "top_p"), ("top_k", "top_k"), ("min_p", "min_p"),
                      ("seed", "seed"), ("presence_penalty", "presence_penalty"),
                      ("frequency_penalty", "frequency_penalty"), ("repeat_penalty", "repeat_penalty")):  # fmt: skip
        if getattr(p, name) is None and fld in defaults.sampler:
            fill[name] = defaults.sampler[fld]
    if not p.stop and defaults.stop:
        fill["stop"] = tuple(defaults.stop)
    return dataclasses.replace(p, **fill) if fill else p


def _config_fields() -> set[str]:
    return {f.name for f in dataclasses.fields(SamplerConfig)}


def _sampler_takes(name: str) -> bool:
    return name in inspect.signature(Sampler).parameters


def constraint_for(p: GenParams, tokenizer: Any) -> Any:
    """The constraint a `response_format` asks for (None for plain text); 400 where it cannot be built."""
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
        raise bad_request(f"response_format: {e}", "response_format") from None


def check_supported(p: GenParams) -> None:
    """Refuse, before anything is queued, a parameter this build's sampler cannot honour."""
    fields = _config_fields()
    for name, neutral in NEUTRAL.items():
        value = getattr(p, name)
        if value is not None and value != neutral and name not in fields:
            raise bad_request(
                f"{name} is not supported by this build's sampler yet (only its neutral value {neutral!r})",
                name,
                "unsupported_parameter",
            )


def sampler_for(p: GenParams, choice: int = 0, *, tokenizer: Any = None, constraint: Any = None,
                prompt: list[int] | None = None, base: dict[str, Any] | None = None) -> Sampler:  # fmt: skip
    """The sampler of one choice: seeded `seed + choice` so that n choices differ yet repeat. The prompt is fed
    to the penalties where the sampler has them (as llama.cpp does)."""
    fields = _config_fields()
    # a stored model's PARAMETERs first (mirostat, typical_p, ... that requests cannot set), the request's over
    # them; its seed, from either, is set below (offset per choice)
    kw: dict[str, Any] = {k: v for k, v in (base or {}).items() if k in fields and k != "seed"}
    for name in ("temperature", "top_p", "top_k", "min_p"):  # every SamplerConfig takes these by name
        if getattr(p, name) is not None:
            kw[name] = getattr(p, name)
    for name in NEUTRAL:
        value = getattr(p, name)
        if value is not None and name in fields:
            kw[name] = value
    if p.seed is not None:
        kw["seed"] = (p.seed + choice) % (1 << 64)
    extra: dict[str, Any] = {}
    if constraint is not None:
        extra["constraint"] = constraint
    if tokenizer is not None and _sampler_takes("tokenizer"):
        extra["tokenizer"] = tokenizer
    sampler = Sampler(SamplerConfig(**kw), **extra)
    if prompt and hasattr(sampler, "accept_prompt"):
        sampler.accept_prompt(prompt)
    return sampler
