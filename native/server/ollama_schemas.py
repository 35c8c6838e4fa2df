"""Ollama's request models (pydantic): /api/generate, /api/chat, /api/embed, /api/embeddings, /api/show and their
`options`, checked against fields.py's tables like the OpenAI ones (schemas.py holds those and the shared
pieces)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from llamay.sampling.request import INT32, OLLAMA_RUNNER, OLLAMA_SAMPLING
from llamay.sampling.request import MAX_PREDICT as MAX_TOKENS

from .keep_alive import KeepAlive
from .limits import MAX_CONTEXT_TOKENS, MAX_EMBED_INPUTS, MAX_MESSAGES, MAX_STOPS, MAX_TOOLS
from .schemas import MAX_TOP_LOGPROBS, SEED, Int, Tool, ToolCall, _Checked, _Lenient, _sampling_fields, token_ids

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
    thinking: str | None = Field(None, description="an earlier reply's reasoning (passed to the template)")
    images: list[str] | None = NO_IMAGES
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = Field(None, description="the tool whose result a `tool` message is")
    tool_call_id: str | None = None


THINK = Field(None, description="reason before answering (templates that reason, with <think>): the reasoning "
              "comes back in `thinking`; false: answer at once")  # fmt: skip
OLLAMA_LOGPROBS = Field(None, description="each generated token's log-probability (`logprobs` of the reply)")
OLLAMA_TOP_LOGPROBS = Field(None, ge=0, le=MAX_TOP_LOGPROBS, description="with logprobs: the k most likely tokens")
OLLAMA_TRUNCATE = Field(None, description="with options.num_ctx: an over-long prompt keeps num_keep and its end "
                        "(Ollama's); false: refused")  # fmt: skip


class _OllamaGeneration(_Lenient, _Checked):
    """What /api/generate and /api/chat both read: the model, sampling `options`, `format`, streaming, thinking,
    log-probabilities, the context's truncation and keep_alive."""

    think: bool | None = THINK
    logprobs: bool | None = OLLAMA_LOGPROBS
    top_logprobs: Int | None = OLLAMA_TOP_LOGPROBS
    shift: Literal[False] | None = Field(None, description="no context shift: only false")
    truncate: bool | None = OLLAMA_TRUNCATE
    model: str
    format: OllamaFormat = None
    stream: bool = True
    options: OllamaOptions | None = None
    keep_alive: KeepAlive = None


class OllamaGenerateRequest(_OllamaGeneration):
    FIELDS: ClassVar[str] = "ollama.generate"
    prompt: str = ""
    suffix: str | None = Field(None, max_length=0, description="not supported (fill-in-the-middle)")
    system: str | None = None
    template: str | None = None
    context: token_ids("token-id", min_length=0, max_length=MAX_CONTEXT_TOKENS) | None = Field(
        None, description="tokens of an earlier reply"
    )
    raw: bool = False
    images: list[str] | None = NO_IMAGES


class OllamaChatRequest(_OllamaGeneration):
    FIELDS: ClassVar[str] = "ollama.chat"
    messages: list[OllamaMessage] = Field(default_factory=list, max_length=MAX_MESSAGES)
    tools: list[Tool] | None = Field(None, max_length=MAX_TOOLS)


class NoOptions(_Lenient):
    """An embedding's `options`: none of Ollama's applies (the sampling ones mean nothing there, the encoder's
    context is its own), so only an empty object."""


class OllamaEmbedRequest(_Lenient, _Checked):
    FIELDS: ClassVar[str] = "ollama.embed"
    model: str
    input: str | Annotated[list[str], Field(min_length=1, max_length=MAX_EMBED_INPUTS)]
    truncate: Literal[True] = Field(True, description="inputs longer than the context are refused, never cut")
    options: NoOptions | None = None
    keep_alive: KeepAlive = None


class OllamaEmbeddingsRequest(_Lenient, _Checked):
    """Ollama's older embedding route: one text, one vector."""

    FIELDS: ClassVar[str] = "ollama.embeddings"
    model: str
    prompt: str = Field(description="the text (empty: an empty vector, as Ollama answers)")
    options: NoOptions | None = None
    keep_alive: KeepAlive = None


class OllamaShowRequest(_Lenient, _Checked):
    FIELDS: ClassVar[str] = "ollama.show"
    model_config = ConfigDict(json_schema_extra={"anyOf": [{"required": ["model"]}, {"required": ["name"]}]})
    model: str = Field(None, description="the model (or `name`)")  # type: ignore[assignment]
    name: str = Field(None, description="older clients' spelling of `model`")  # type: ignore[assignment]
    verbose: bool = False
