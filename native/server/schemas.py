"""Request and response models (pydantic): what the OpenAPI description publishes and what requests are checked
against before any work is done.

Bounds here are static (the description is built once); a request is further checked against the loaded model
at run time (`max_tokens` beyond the context, a prompt longer than the context), with the same error body.
The sampling fields take their bounds from `llamay.sampling.BOUNDS` (what the sampler's math admits), narrowed
where an API documents a smaller range (OpenAI's temperature in [0, 2], penalties in [-2, 2]). No float field
takes NaN or an infinity.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    create_model,
    model_validator,
)

from llamay.sampling import BOUNDS
from llamay.sampling.config import FLT_MAX, MAX_BREAKER_CHARS, MAX_BREAKERS
from llamay.sampling.request import API_RANGES, INT32, OPENAI_FIELDS, OPENAI_OWN
from llamay.sampling.request import MAX_PREDICT as MAX_TOKENS  # a static cap; the real limit is the context

from . import fields as api_fields
from .limits import (
    MAX_BATCH,
    MAX_CONTEXT_TOKENS,
    MAX_DETOKENIZE_TOKENS,
    MAX_EMBED_INPUTS,
    MAX_LOGIT_BIAS,
    MAX_MESSAGES,
    MAX_N,
    MAX_STOP_CHARS,
    MAX_STOPS,
    MAX_TOKEN_IDS,
    MAX_TOKENIZE_CHARS,
    MAX_TOOLS,
)

MAX_TOP_LOGPROBS = 20
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"


def _json_integer(value: Any) -> Any:
    """An integer as JSON Schema has it: 3 or 3.0, never true or "3" (pydantic's lax mode takes both)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("Input should be a valid integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError("Input should be a valid integer, got a number with a fractional part")
    return int(value)


Int = Annotated[int, BeforeValidator(_json_integer)]  # request models are strict: this is their integer


def _token_ids(max_length: int, value: Any) -> Any:
    """A list of token ids checked in one pass, refused at its first bad item (on the event loop, a per-item
    validator cost 2 µs an id and one error object per bad id: seconds for a large list)."""
    if not isinstance(value, list) or len(value) > max_length:
        return value  # the list type's own error, before any scan
    for i, v in enumerate(value):
        if type(v) is not int:
            if isinstance(v, float) and v.is_integer():  # JSON's 3.0 is an integer
                return [_token_id(x, j) for j, x in enumerate(value)]
            raise ValueError(f"item {i}: {v!r} is not a token id (an integer)")
        if v < 0:
            raise ValueError(f"item {i}: {v} is not a token id (at least 0)")
    return value


def _token_id(v: Any, i: int) -> int:
    if type(v) is int or (isinstance(v, float) and v.is_integer()):
        return int(v)
    raise ValueError(f"item {i}: {v!r} is not a token id (an integer)")


def token_ids(kind: str, *, min_length: int = 1, max_length: int = MAX_TOKEN_IDS) -> Any:
    """A list of token ids of `kind` ("token-id": the generative model's, < n_vocab set per server by openapi.py;
    "embed-token-id": the embedder's)."""
    item = Annotated[int, Field(ge=0, json_schema_extra={"x-llamay": kind})]
    return Annotated[list[item], Field(min_length=min_length, max_length=max_length),
                     BeforeValidator(partial(_token_ids, max_length))]  # fmt: skip


TokenIds = token_ids("token-id")
EmbedTokenIds = token_ids("embed-token-id")


def _shape(value: Any) -> str:
    """Which member of a text-or-tokens union a value is, from its first item: only that member is validated
    (smart unions try every member, each failing once per item of a large list)."""
    if isinstance(value, str):
        return "text"
    if isinstance(value, list) and value:
        first = value[0]
        if isinstance(first, list):
            return "id_lists"
        if isinstance(first, int | float) and not isinstance(first, bool):
            return "ids"
    return "texts"


def text_or_tokens(max_batch: int, ids: Any) -> Any:
    """A text, a batch of texts, token ids, or a batch of token-id lists (the OpenAI API's prompt and input)."""
    return Annotated[
        Annotated[str, Tag("text")]
        | Annotated[list[str], Field(min_length=1, max_length=max_batch), Tag("texts")]
        | Annotated[ids, Tag("ids")]
        | Annotated[list[ids], Field(min_length=1, max_length=max_batch), Tag("id_lists")],
        Discriminator(_shape),
    ]


Stop = str | list[str] | None  # limits: checked by llamay.sampling.request.stops (naming them), published by openapi.py


def sampling_field(name: str, description: str = "", api: tuple[float, float] | None = None) -> Any:
    """A request field bounded as SamplerConfig's BOUNDS[name], within `api` (a documented range) if given."""
    b = BOUNDS[name]
    lo, hi = b.lo, b.hi
    if b.integer:
        lo = INT32[0] if lo is None else max(lo, INT32[0])
        hi = INT32[1] if hi is None else min(hi, INT32[1])
    else:
        lo = -FLT_MAX if lo is None else lo
        hi = FLT_MAX if hi is None else hi
    if api is not None:
        lo, hi = max(lo, api[0]), min(hi, api[1])
    bounds: dict[str, Any] = {"gt" if b.lo_open and lo == b.lo else "ge": lo, "le": hi}
    text = "; ".join(x for x in (description, b.why) if x)
    return Field(None, description=text or None, **bounds)


SEED = Field(
    None, ge=BOUNDS["seed"].lo, le=BOUNDS["seed"].hi, description="sampling seed (choice i uses seed + i; -1: random)"
)


class _Lenient(BaseModel):
    """Unknown fields are refused (400 naming them: never silently ignored); types are strict (a number is a JSON
    number, a boolean a JSON boolean: as the published schema says), floats finite."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class _Checked(BaseModel):
    """A request body checked against its API's field table (`fields.TABLES[FIELDS]`) before validation: an
    unknown field, or a documented one not supported here, is a 400 naming it and saying why."""

    FIELDS: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        return api_fields.check(cls.FIELDS, data) if cls.FIELDS else data


# -- errors ---------------------------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class OllamaErrorResponse(BaseModel):
    """Ollama's error body, on its routes (`/api/...`)."""

    error: str


# -- shared sampling fields -----------------------------------------------------------------------------------


# request field -> SamplerConfig field, the APIs' ranges: llamay.sampling.request's tables (one for both targets)
SAMPLING_FIELDS = OPENAI_FIELDS


def _sampling_fields(names: Any, ranges: dict[str, tuple[float, float]], extension: str = "") -> dict[str, Any]:
    """Pydantic field definitions (type, Field) of the numeric sampling fields, typed and bounded from BOUNDS."""
    out = {}
    for name in names:
        cfg = SAMPLING_FIELDS[name]
        if cfg not in BOUNDS:
            continue
        kind = Int if BOUNDS[cfg].integer else float
        out[name] = (kind | None, sampling_field(cfg, "" if name in OPENAI_OWN else extension, ranges.get(name)))
    return out


class _SamplingBase(_Lenient, _Checked):
    seed: Int | None = SEED
    dry_sequence_breakers: (
        list[Annotated[str, StringConstraints(min_length=1, max_length=MAX_BREAKER_CHARS)]] | None
    ) = Field(
        None, max_length=MAX_BREAKERS, description=f"llama.cpp extension; each 1 to {MAX_BREAKER_CHARS} characters"
    )
    logit_bias: (
        dict[
            Annotated[str, StringConstraints(pattern=r"^(0|[1-9][0-9]{0,9})$")],
            Annotated[float, Field(ge=-100, le=100)],
        ]
        | None
    ) = Field(
        None,
        max_length=MAX_LOGIT_BIAS,
        description="token id (as a string) -> bias in [-100, 100]",
        json_schema_extra={"x-llamay": "logit-bias"},
    )
    stop: Stop = Field(None, description=f"up to {MAX_STOPS} stop strings of at most {MAX_STOP_CHARS} characters")
    n: Int = Field(1, ge=1, le=MAX_N)
    max_tokens: Int | None = Field(
        None,
        ge=0,
        le=MAX_TOKENS,
        description="0: the prompt is evaluated into the cache, nothing is generated (llama-server's n_predict 0)",
    )
    user: str | None = None


def _neutral_fields() -> dict[str, Any]:
    """llama-server's fields taken at their neutral value only (fields.LLAMACPP_NEUTRAL): declared so that the
    description says which value each takes."""
    out: dict[str, Any] = {}
    for name, (values, why) in api_fields.LLAMACPP_NEUTRAL.items():
        kind: Any = (
            Annotated[list[Any], Field(max_length=0)] if isinstance(values[0], list) else Literal[values]  # type: ignore[valid-type]
        )
        out[name] = (kind | None, Field(None, description=f"llama.cpp's; {why}"))
    return out


Sampling = create_model(
    "Sampling", __base__=_SamplingBase, __module__=__name__,
    **_sampling_fields(SAMPLING_FIELDS, API_RANGES["openai"], "llama.cpp extension"),
    **_neutral_fields(),
)  # fmt: skip


class StreamOptions(_Lenient):
    include_usage: bool = False
    include_obfuscation: Literal[False] | None = Field(None, description="chunks are not padded here")


class TextFormat(_Lenient):
    type: Literal["text"]


class JsonObjectFormat(_Lenient):
    type: Literal["json_object"]
    schema_: dict[str, Any] | None = Field(None, alias="schema", description="llama.cpp's: a JSON Schema")


class JsonSchemaSpec(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False, populate_by_name=True)
    name: str | None = None
    description: str | None = None
    schema_: dict[str, Any] = Field(alias="schema", description="the JSON Schema the reply follows")
    strict: bool | None = None


class JsonSchemaFormat(_Lenient):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


ResponseFormat = Annotated[TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")]


# -- OpenAI: chat ---------------------------------------------------------------------------------------------


class ContentPart(_Lenient):
    type: Literal["text"] = Field(description="the served models read text only")
    text: str


class _PassedOn(BaseModel):
    """Fields beyond the declared ones are kept: they go on to the chat template as the client sent them."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False, strict=True)


class FunctionCall(_PassedOn):
    name: str
    arguments: str | dict[str, Any] = Field("{}", description="a JSON text (OpenAI) or an object (Ollama)")


class ToolCall(_PassedOn):
    """A call in an assistant message of the history (OpenAI's and Ollama's shape)."""

    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_PassedOn):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)  # its fields: fields.py's table
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = Field(None, description="llama.cpp's: an earlier reply's reasoning (passed to the "
                                          "template)")  # fmt: skip
    refusal: str | None = Field(None, description="an earlier reply's refusal (accepted; templates do not render it)")


class ToolFunction(_Lenient):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(_Lenient):
    type: Literal["function"] = "function"
    function: ToolFunction


class NamedFunction(_Lenient):
    name: str


class NamedToolChoice(_Lenient):
    type: Literal["function"]
    function: NamedFunction


MODEL_NAME = (
    "the served model's name; optional: any other name, or none, is the served model (llama-server's way), "
    "unless the server runs with --strict-model-name"
)


NOOP = "accepted, no effect here (docs/server.md's field table says why)"
TRUNCATION = Field(
    None,
    description="llamay's: 'auto' keeps the end of a prompt longer than the context (and its first n_keep tokens); "
    "'disabled' (the default) refuses it",
)
N_KEEP = Field(
    None, ge=-1, le=MAX_CONTEXT_TOKENS, description="llama.cpp's: with truncation, the first tokens kept (-1: all)"
)


class _Truncatable(_Lenient):
    truncation: Literal["auto", "disabled"] | None = TRUNCATION
    n_keep: Int | None = N_KEEP


class ChatCompletionRequest(Sampling, _Truncatable):
    FIELDS: ClassVar[str] = "openai.chat"
    safety_identifier: str | None = Field(None, description=NOOP)
    prompt_cache_key: str | None = Field(None, description=NOOP)
    metadata: dict[str, str] | None = Field(None, description=NOOP)
    store: Literal[False] | None = Field(None, description="nothing is stored")
    service_tier: Literal["auto", "default"] | None = None
    modalities: list[Literal["text"]] | None = Field(None, min_length=1, max_length=1, description="['text'] only")
    model: str | None = Field(None, description=MODEL_NAME, json_schema_extra={"x-llamay": "model-name"})
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_completion_tokens: Int | None = Field(None, ge=1, le=MAX_TOKENS)
    logprobs: bool = False
    top_logprobs: Int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    response_format: ResponseFormat | None = None
    tools: list[Tool] | None = Field(None, max_length=MAX_TOOLS)
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = Field(
        None, description="enforced: the reply's calls follow a grammar of the model's tool-call syntax"
    )
    parallel_tool_calls: bool | None = Field(None, description="false: at most one call (enforced)")
    functions: list[Any] | None = Field(None, max_length=0, description="not supported (deprecated): send `tools`")
    function_call: None = Field(None, description="not supported (deprecated): send `tool_choice`")
    timings_per_token: bool = Field(False, description="llama.cpp extension: `timings` in every stream chunk")


# -- OpenAI: completions --------------------------------------------------------------------------------------


class CompletionRequest(Sampling, _Truncatable):
    FIELDS: ClassVar[str] = "openai.completions"
    model: str | None = Field(None, description=MODEL_NAME, json_schema_extra={"x-llamay": "model-name"})
    prompt: text_or_tokens(MAX_BATCH, TokenIds) = Field(
        description="text, a batch of texts, token ids, or a batch of token-id lists"
    )
    stream: bool = False
    stream_options: StreamOptions | None = None
    logprobs: Int | None = Field(None, ge=0, le=5)
    echo: bool = False
    suffix: str | None = Field(None, max_length=0, description="not supported (fill-in-the-middle)")
    best_of: Int | None = Field(None, ge=1, le=MAX_N)
    response_format: ResponseFormat | None = None
    timings_per_token: bool = Field(False, description="llama.cpp extension: `timings` in every stream chunk")


# -- OpenAI: embeddings, models -------------------------------------------------------------------------------


class EmbeddingRequest(_Lenient, _Checked):
    FIELDS: ClassVar[str] = "openai.embeddings"
    model: str | None = Field(None, description=MODEL_NAME, json_schema_extra={"x-llamay": "model-name"})
    input: text_or_tokens(MAX_EMBED_INPUTS, EmbedTokenIds) = Field(
        description="a text, a list of texts, token ids (of the embedding model), or a list of token-id lists"
    )
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Int | None = Field(None, ge=1, le=1 << 16)
    user: str | None = None


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class EmbeddingUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


# -- OpenAI responses (documented shapes; the routes build plain dicts) ---------------------------------------


class PromptTokensDetails(BaseModel):
    cached_tokens: int


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    llamay_cached_prompt_tokens: int = Field(description="prompt tokens reused from the prefix cache")
    llamay_truncated_prompt_tokens: int = Field(0, description="prompt tokens cut by truncation: 'auto'")


class ChatChoice(BaseModel):
    model_config = ConfigDict(extra="allow")
    index: int
    message: dict[str, Any]
    logprobs: dict[str, Any] | None = None
    finish_reason: str | None


TIMINGS = "llama-server's timings of the first choice: cache_n, prompt_n, prompt_ms, predicted_n, predicted_ms..."


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[ChatChoice]
    usage: Usage
    timings: dict[str, float] | None = Field(None, description=TIMINGS)


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: dict[str, Any] | None = None
    finish_reason: str | None


class Completion(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[CompletionChoice]
    usage: Usage
    timings: dict[str, float] | None = Field(None, description=TIMINGS)


# -- llama.cpp-style utilities --------------------------------------------------------------------------------


class TokenizeRequest(_Lenient):
    content: str = Field(max_length=MAX_TOKENIZE_CHARS)
    add_special: bool = False
    parse_special: bool = True
    with_pieces: bool = False
    model: str | None = None


class TokenPiece(BaseModel):
    id: int
    piece: str | list[int] = Field(description="the text, or its bytes where they are not UTF-8 by themselves")


class TokenizeResponse(BaseModel):
    tokens: list[int] | list[TokenPiece]


class DetokenizeRequest(_Lenient):
    tokens: token_ids("token-id", min_length=0, max_length=MAX_DETOKENIZE_TOKENS)
    model: str | None = None


class DetokenizeResponse(BaseModel):
    content: str


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    model: str
    queue_depth: int
    running: int
    problems: list[str] = Field(default_factory=list, description="why the server is degraded (empty when ok)")
