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
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, StringConstraints, Tag, create_model

from llamay.sampling import BOUNDS
from llamay.sampling.config import FLT_MAX, MAX_BREAKER_CHARS, MAX_BREAKERS
from llamay.sampling.request import API_RANGES, INT32, OLLAMA_RUNNER, OLLAMA_SAMPLING, OPENAI_FIELDS, OPENAI_OWN
from llamay.sampling.request import MAX_PREDICT as MAX_TOKENS  # a static cap; the real limit is the context

from .keep_alive import KeepAlive
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
    """Unknown fields are ignored (clients send fields of newer API versions); types are strict (a number is a
    JSON number, a boolean a JSON boolean: as the published schema says), floats finite."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, strict=True)


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


class _SamplingBase(_Lenient):
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


Sampling = create_model(
    "Sampling", __base__=_SamplingBase, __module__=__name__,
    **_sampling_fields(SAMPLING_FIELDS, API_RANGES["openai"], "llama.cpp extension"),
)  # fmt: skip


class StreamOptions(_Lenient):
    include_usage: bool = False


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
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class ToolFunction(_Lenient):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


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


class ChatCompletionRequest(Sampling):
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


class CompletionRequest(Sampling):
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


class EmbeddingRequest(_Lenient):
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


# -- Ollama ---------------------------------------------------------------------------------------------------


NO_EFFECT = "accepted, no effect here: the server's runner is set up at start-up"
# Ollama's runner options: name -> the least integer it takes, or None for a flag
RUNNER_OPTIONS = {name: least for name, least in OLLAMA_RUNNER.items() if name != "num_keep"}  # (its own field)


class _OllamaOptionsBase(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
    seed: Int | None = SEED
    num_predict: Int | None = Field(None, ge=-2, le=MAX_TOKENS, description="-1, -2: until the context is full")
    stop: list[str] | None = Field(None, max_length=MAX_STOPS)
    # neutral values only: tail-free sampling is gone (from llama.cpp too); newlines are penalised like any token
    tfs_z: float | None = Field(None, ge=1.0, le=1.0, description="only 1 (off)")
    penalize_newline: Literal[True] | None = Field(None, description="only true")
    num_keep: Int | None = Field(None, ge=-1, le=INT32[1], description="accepted, no effect: the context never shifts")


OllamaOptions = create_model(
    "OllamaOptions", __base__=_OllamaOptionsBase, __module__=__name__,
    __doc__="Ollama's options: the sampling ones are honoured; the runner's (context size, threads, GPU, memory "
    "mapping) are accepted and have no effect; any other name is refused.",
    **_sampling_fields(OLLAMA_SAMPLING, {}),
    **{name: (bool | None, Field(None, description=NO_EFFECT)) if least is None else
       (Int | None, Field(None, ge=least, le=INT32[1], description=NO_EFFECT))
       for name, least in RUNNER_OPTIONS.items()},
)  # fmt: skip


OllamaFormat = Literal["json", ""] | dict[str, Any] | None  # "json", or a JSON schema
NO_IMAGES = Field(None, max_length=0, description="not supported: the served models read text only")


class OllamaMessage(_Lenient):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    images: list[str] | None = NO_IMAGES
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = Field(None, description="the tool whose result a `tool` message is")


class OllamaGenerateRequest(_Lenient):
    model: str
    prompt: str = ""
    suffix: str | None = Field(None, max_length=0, description="not supported (fill-in-the-middle)")
    system: str | None = None
    template: str | None = None
    context: token_ids("token-id", min_length=0, max_length=MAX_CONTEXT_TOKENS) | None = Field(
        None, description="tokens of an earlier reply"
    )
    stream: bool = True
    raw: bool = False
    format: OllamaFormat = None
    images: list[str] | None = NO_IMAGES
    options: OllamaOptions | None = None
    keep_alive: KeepAlive = None


class OllamaChatRequest(_Lenient):
    model: str
    messages: list[OllamaMessage] = Field(default_factory=list, max_length=MAX_MESSAGES)
    tools: list[Tool] | None = Field(None, max_length=MAX_TOOLS)
    format: OllamaFormat = None
    stream: bool = True
    options: OllamaOptions | None = None
    keep_alive: KeepAlive = None


class OllamaEmbedRequest(_Lenient):
    model: str
    input: str | Annotated[list[str], Field(min_length=1, max_length=MAX_EMBED_INPUTS)]
    truncate: bool = True
    options: OllamaOptions | None = None
    keep_alive: KeepAlive = None


class OllamaEmbeddingsRequest(_Lenient):
    """Ollama's older embedding route: one text, one vector."""

    model: str
    prompt: str = Field(description="the text (empty: an empty vector, as Ollama answers)")
    options: OllamaOptions | None = None
    keep_alive: KeepAlive = None


class OllamaShowRequest(_Lenient):
    model_config = ConfigDict(json_schema_extra={"anyOf": [{"required": ["model"]}, {"required": ["name"]}]})
    model: str = Field(None, description="the model (or `name`)")  # type: ignore[assignment]
    name: str = Field(None, description="older clients' spelling of `model`")  # type: ignore[assignment]
    verbose: bool = False


# -- llamay contexts ------------------------------------------------------------------------------------------


class ContextCreate(Sampling):
    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["prompt"]}, {"required": ["messages"]}]})
    name: str = Field(pattern=NAME_PATTERN)
    prompt: str = Field(None, description="text to start from (with the model's BOS)")  # type: ignore[assignment]
    messages: list[ChatMessage] = Field(  # type: ignore[assignment]
        None, min_length=1, max_length=MAX_MESSAGES, description="or a chat, rendered with the model's template"
    )
    n: Int = Field(1, ge=1, le=1, description="a context has one continuation")
    max_tokens: Int = Field(0, ge=0, le=MAX_TOKENS, description="tokens to generate after the prompt (0: none)")


class ContextContinue(Sampling):
    prompt: str = Field("", description="text appended to the context before generating")
    n: Int = Field(1, ge=1, le=1, description="a context continues one way at a time (fork it for more)")
    max_tokens: Int | None = Field(None, ge=1, le=MAX_TOKENS)
    stream: bool = False
    update: bool = Field(True, description="the context grows by the prompt and the reply")


class ContextFork(_Lenient):
    name: str = Field(pattern=NAME_PATTERN, description="the new context's name")


class ContextRestore(_Lenient):
    snapshot: str = Field(pattern=r"^[0-9a-f]{8,64}$")


class ContextInfo(BaseModel):
    name: str
    n_tokens: int
    created: int
    text: str | None = Field(None, description="what the creating or continuing request generated")
    usage: Usage | None = None


class ContextCompletion(Completion):
    context: dict[str, Any] = Field(description="the context after this request (its name and token count)")


class ContextList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ContextInfo]


class SnapshotInfo(BaseModel):
    snapshot: str
    context: str | None = Field(description="the context it was taken of (None: unreadable here, see `error`)")
    n_tokens: int | None = Field(description="the context's tokens")
    bytes: int
    created: int
    error: str | None = Field(None, description="why the file cannot be restored here (another model or format)")


class SnapshotList(BaseModel):
    object: Literal["list"] = "list"
    data: list[SnapshotInfo]
    count: int
    bytes: int
    max_count: int = Field(description="the quota: --max-snapshots")
    max_bytes: int = Field(description="the quota: --max-snapshot-bytes")


class ContextDeleted(BaseModel):
    name: str
    deleted: Literal[True] = True


class SnapshotDeleted(BaseModel):
    snapshot: str
    deleted: Literal[True] = True
