"""Where request fields become generation parameters, and those become a `Sampler`.

Every API family (OpenAI chat and completions, Ollama generate and chat, contexts) fills a `GenParams`. The
sampling fields go through `llamay.sampling.request.sampling_from_request` (the browser engine's path too): its
tables map each request field to the `SamplerConfig` field of the same meaning, and it checks each against
`llamay.sampling.BOUNDS` and the API's ranges, so a value that cannot be honoured is a 400 naming the request's
field (its `RequestFieldError`) before anything is queued. The schemas publish the same tables and bounds, so
pydantic usually refuses first. A `response_format` (`json_object`, `json_schema`; Ollama's `format`) becomes a
constraint through `llamay.constraints.constraint_from_request`; its compile limits come back as 400s naming
the limit.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any

from llamay.errors import LlamayError
from llamay.sampling import Sampler, SamplerConfig, SamplerConfigError, request
from llamay.sampling.request import RequestFieldError, RequestSampling, sampling_from_request
from llamay.tools import ToolRequestError

from .errors import ApiError, bad_request
from .ollama_schemas import OllamaOptions
from .schemas import Sampling

OPENAI_FIELDS = request.OPENAI_FIELDS  # request field -> SamplerConfig field
OLLAMA_FIELDS = request.OLLAMA_FIELDS


@dataclass(frozen=True)
class GenParams:
    max_tokens: int | None  # None: until the context is full
    sampling: dict[str, Any] = field(default_factory=dict)  # SamplerConfig fields the request set (checked)
    seed: int | None = None  # None (or -1): random; choice i uses seed + i
    stop: tuple[str, ...] = ()
    n: int = 1
    logprobs: int | None = None  # None: no logprobs; k: the sampled token's and the k most likely
    response_format: dict[str, Any] | None = None  # {"type": "json_object"} / {"type": "json_schema", ...}
    grammar: str | None = None  # llama.cpp's GBNF `grammar` (when no response_format is given)
    tools: Any = None  # a llamay.tools.ToolPlan: the reply's grammar is its tool calls'
    format_field: str = "response_format"  # the request's name of it, in errors (Ollama's `format`, ...)


def response_format(fmt: Any) -> dict[str, Any] | None:
    """A ResponseFormat as constraint_from_request reads it (None for text); the schema made sure of its shape."""
    if fmt is None or fmt.type == "text":
        return None
    return fmt.model_dump(exclude_none=True, by_alias=True)


def refused(e: RequestFieldError, prefix: str = "") -> ApiError:
    """The 400 of a field the core refused, named as the request spelled it (`options.` for Ollama's)."""
    return bad_request(f"{prefix}{e.field}: {e.problem}", f"{prefix}{e.field}", e.code)


def requested(req: Any, api: request.Api, n_vocab: int | None = None) -> RequestSampling:
    """The request's sampling fields (those of `api`'s table that the schema declares and the request set)."""
    fields = {name: getattr(req, name) for name in request.accepted(api) if name in type(req).model_fields}
    prefix = "options." if api == "ollama" else ""
    try:
        return sampling_from_request(fields, api, n_vocab)
    except RequestFieldError as e:
        raise refused(e, prefix) from None


def from_openai(req: Sampling, n_vocab: int, *, max_tokens: int | None, logprobs: int | None = None,
                fmt: Any = None) -> GenParams:  # fmt: skip
    got = requested(req, "openai", n_vocab)
    return GenParams(
        max_tokens=max_tokens,
        sampling=got.sampling,
        seed=got.seed,
        stop=got.stop,
        n=req.n,
        logprobs=logprobs,
        response_format=response_format(fmt),
    )


def from_ollama(opts: OllamaOptions | None, fmt: str | dict[str, Any] | None) -> GenParams:
    got = requested(opts or OllamaOptions(), "ollama")
    if fmt == "json":
        rf: dict[str, Any] | None = {"type": "json_object"}
    elif isinstance(fmt, dict):
        rf = {"type": "json_schema", "json_schema": {"schema": fmt}}
    elif fmt in (None, ""):
        rf = None
    else:
        raise bad_request(f"format is 'json' or a JSON schema, got {fmt!r}", "format")
    return GenParams(max_tokens=got.max_tokens, sampling=got.sampling, seed=got.seed, stop=got.stop,
                     response_format=rf, format_field="format")  # fmt: skip


def with_defaults(p: GenParams, defaults: Any) -> GenParams:
    """`p` over a stored model's PARAMETERs (an Options, or None): the sampler settings, seed and stop strings
    the request left out are the model's (mirostat, typical_p... that some routes cannot set included). A
    PARAMETER outside the sampler's bounds is a 400 naming it (a Modelfile is input too)."""
    if defaults is None:
        return p
    fields = _config_fields()
    base = {k: v for k, v in defaults.sampler.items() if k in fields and k != "seed"}
    sampling = {**base, **p.sampling}
    try:
        SamplerConfig(**sampling)
    except SamplerConfigError as e:
        raise bad_request(f"the model's PARAMETER {e.field}: {e.reason}", e.field, "invalid_value") from None
    seed = p.seed if p.seed is not None else defaults.sampler.get("seed")
    return dataclasses.replace(p, sampling=sampling, seed=seed, stop=p.stop or tuple(defaults.stop))


def _sampler_takes(name: str) -> bool:
    return name in inspect.signature(Sampler).parameters


def _config_fields() -> set[str]:
    return {f.name for f in dataclasses.fields(SamplerConfig)}


def constraint_for(p: GenParams, tokenizer: Any) -> Any:
    """The constraint a `response_format` asks for (None for plain text); 400 where it cannot be built (a
    compile limit names itself: `limit`). Runs on a preparation thread: compiling costs time. A tool plan's
    grammar constrains the reply instead (either of the others together with it is refused)."""
    if p.tools is not None:
        for given, name in ((p.response_format, p.format_field), (p.grammar, "grammar")):
            if given:
                raise bad_request(f"{name} cannot constrain a reply that may call tools: the tool calls' "
                                  "grammar does (give one of them, or tool_choice: none)", name,
                                  "conflicting_fields")  # fmt: skip
        try:
            return p.tools.constraint(tokenizer)
        except ToolRequestError as e:
            raise bad_request(str(e), e.field, "invalid_tools") from None
    if p.response_format is None and not p.grammar:
        return None
    field = p.format_field if p.response_format is not None else "grammar"
    req = {"response_format": p.response_format} if p.response_format is not None else {"grammar": p.grammar}
    try:
        from llamay.constraints import constraint_from_request
    except ImportError:
        constraint_from_request = None
    if constraint_from_request is None or not _sampler_takes("constraint"):
        raise bad_request(
            f"{field} needs the constraint engine, which this build's sampler does not have yet",
            field,
            "unsupported_parameter",
        )
    try:
        return constraint_from_request(req, tokenizer)
    except LlamayError as e:
        kind = "grammar" if p.response_format is None else "response_format"  # (the codes: one per kind)
        code = "constraint_limit_exceeded" if getattr(e, "limit", None) else f"invalid_{kind}"
        raise bad_request(f"{field}: {e}", field, code) from None
    except RecursionError:  # a compiler without a nesting limit
        raise bad_request(f"{field}: the schema is nested too deeply to compile", field,
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
    extra: dict[str, Any] = {}
    if constraint is not None:
        extra["constraint"] = constraint
    if tokenizer is not None:
        extra["tokenizer"] = tokenizer
    sampler = Sampler(request.config_for(p.sampling, p.seed, choice), **extra)
    if prompt:
        sampler.accept_prompt(prompt)
    return sampler
