"""Request and response models (pydantic): what the OpenAPI description publishes and what requests are checked
against before any work is done.

Bounds here are static (the description is built once); a request is further checked against the loaded model
at run time (`max_tokens` beyond the context, a prompt longer than the context), with the same error body.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_N = 16  # choices per request
MAX_TOKENS = 1 << 20  # a static cap; the real limit is the context, checked at run time
MAX_STOPS = 16
MAX_BATCH = 64  # prompts or inputs in one request
MAX_TOP_LOGPROBS = 20
SEED = Field(None, ge=-(2**63), le=2**64 - 1, description="sampling seed (choice i uses seed + i)")
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"

Stop = str | list[str] | None


class _Lenient(BaseModel):
    """Unknown fields are ignored (clients send fields of newer API versions)."""

    model_config = ConfigDict(extra="ignore")


# -- errors ---------------------------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


# -- shared sampling fields -----------------------------------------------------------------------------------


class Sampling(_Lenient):
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="0 samples greedily")
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0, le=1 << 20, description="llamay extension; 0 = whole vocabulary")
    min_p: float | None = Field(None, ge=0.0, le=1.0, description="llamay extension")
    seed: int | None = SEED
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repeat_penalty: float | None = Field(None, ge=0.0, le=10.0, description="llamay extension (llama.cpp's)")
    logit_bias: dict[str, float] | None = Field(None, description="token id (as a string) -> bias in [-100, 100]")
    stop: Stop = Field(None, description=f"up to {MAX_STOPS} stop strings")
    n: int = Field(1, ge=1, le=MAX_N)
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    user: str | None = None


class StreamOptions(_Lenient):
    include_usage: bool = False


class ResponseFormat(_Lenient):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None


# -- OpenAI: chat ---------------------------------------------------------------------------------------------


class ContentPart(_Lenient):
    type: Literal["text"] = Field(description="the served models read text only")
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class ToolFunction(_Lenient):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class Tool(_Lenient):
    type: Literal["function"] = "function"
    function: ToolFunction


class ChatCompletionRequest(Sampling):
    model: str
    messages: list[ChatMessage] = Field(min_length=1, max_length=4096)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    response_format: ResponseFormat | None = None
    tools: list[Tool] | None = Field(None, max_length=128)
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None


# -- OpenAI: completions --------------------------------------------------------------------------------------


class CompletionRequest(Sampling):
    model: str
    prompt: str | list[str] | list[int] | list[list[int]] = Field(
        description="text, a batch of texts, token ids, or a batch of token-id lists"
    )
    stream: bool = False
    stream_options: StreamOptions | None = None
    logprobs: int | None = Field(None, ge=0, le=5)
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = Field(None, ge=1, le=MAX_N)
    response_format: ResponseFormat | None = None


# -- OpenAI: embeddings, models -------------------------------------------------------------------------------


class EmbeddingRequest(_Lenient):
    model: str
    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, ge=1, le=1 << 16)
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


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[ChatChoice]
    usage: Usage


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


# -- llama.cpp-style utilities --------------------------------------------------------------------------------


class TokenizeRequest(_Lenient):
    content: str = Field(max_length=1 << 22)
    add_special: bool = False
    parse_special: bool = True
    with_pieces: bool = False
    model: str | None = None


class TokenPiece(BaseModel):
    id: int
    piece: str


class TokenizeResponse(BaseModel):
    tokens: list[int] | list[TokenPiece]


class DetokenizeRequest(_Lenient):
    tokens: list[int] = Field(max_length=1 << 20)
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


class OllamaOptions(_Lenient):
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0, le=1 << 20)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    seed: int | None = SEED
    num_predict: int | None = Field(None, ge=-2, le=MAX_TOKENS, description="-1: until the context is full")
    stop: list[str] | None = Field(None, max_length=MAX_STOPS)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repeat_penalty: float | None = Field(None, ge=0.0, le=10.0)
    num_ctx: int | None = Field(None, ge=1, description="ignored: the server's context is fixed at start-up")


class OllamaMessage(_Lenient):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    images: list[str] | None = None
    tool_calls: list[dict[str, Any]] | None = None


class OllamaGenerateRequest(_Lenient):
    model: str
    prompt: str = ""
    suffix: str | None = None
    system: str | None = None
    template: str | None = None
    context: list[int] | None = Field(None, max_length=1 << 20, description="tokens of an earlier reply")
    stream: bool = True
    raw: bool = False
    format: str | dict[str, Any] | None = None
    images: list[str] | None = None
    options: OllamaOptions | None = None
    keep_alive: str | int | None = None


class OllamaChatRequest(_Lenient):
    model: str
    messages: list[OllamaMessage] = Field(default_factory=list, max_length=4096)
    tools: list[Tool] | None = Field(None, max_length=128)
    format: str | dict[str, Any] | None = None
    stream: bool = True
    options: OllamaOptions | None = None
    keep_alive: str | int | None = None


class OllamaEmbedRequest(_Lenient):
    model: str
    input: str | list[str]
    truncate: bool = True
    options: OllamaOptions | None = None
    keep_alive: str | int | None = None


class OllamaShowRequest(_Lenient):
    model: str | None = None
    name: str | None = Field(None, description="older clients' spelling of `model`")
    verbose: bool = False


# -- llamay contexts ------------------------------------------------------------------------------------------


class ContextCreate(Sampling):
    name: str = Field(pattern=NAME_PATTERN)
    prompt: str | None = Field(None, description="text to start from (with the model's BOS)")
    messages: list[ChatMessage] | None = Field(None, description="or a chat, rendered with the model's template")
    max_tokens: int = Field(0, ge=0, le=MAX_TOKENS, description="tokens to generate after the prompt (0: none)")


class ContextContinue(Sampling):
    prompt: str = Field("", description="text appended to the context before generating")
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
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
