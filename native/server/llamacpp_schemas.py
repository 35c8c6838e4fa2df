"""Request models of llama-server's own routes (`/completion`, `/infill`, `/embedding`, `/apply-template`,
`/rerank`, `/slots`), as its README names their fields, and as exact as the OpenAI ones (schemathesis checks
that a request valid against the description is accepted).

The sampling fields take llama.cpp's names (`temperature` and `temp`, `penalty_repeat`, `samplers`,
`logit_bias` pairs...), typed and bounded from `llamay.sampling.BOUNDS`, and reach the sampler through
`llamay.sampling.request.sampling_from_request`'s "llamacpp" table. Any other field is refused by name (the
models forbid extra fields); llama-server's fields that have no meaning here take only their neutral value.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model

from llamay.sampling import BOUNDS
from llamay.sampling.config import DEFAULT_SAMPLERS, MAX_BREAKER_CHARS, MAX_BREAKERS
from llamay.sampling.request import LLAMACPP_FIELDS

from .limits import MAX_BATCH, MAX_EMBED_INPUTS, MAX_LOGIT_BIAS, MAX_MESSAGES, MAX_N, MAX_TOKEN_IDS, MAX_TOOLS
from .schemas import (
    MAX_TOKENS,
    MODEL_NAME,
    SEED,
    ChatMessage,
    EmbedTokenIds,
    Int,
    Stop,
    Tool,
    sampling_field,
    text_or_tokens,
)

MAX_N_PROBS = 100  # top tokens per generated token (each a pass over the vocabulary)
MAX_RESPONSE_FIELDS = 64
MAX_GRAMMAR_CHARS = 1 << 16
MAX_EXTRA_FILES = 64  # /infill's input_extra chunks
FILENAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$"  # a slot file: one path component, no "..", no "/"
NOT_HERE = "only its neutral value: {why}"

TokenId = Annotated[Int, Field(ge=0, json_schema_extra={"x-llamay": "token-id"})]
Mixed = Annotated[list[TokenId | str], Field(min_length=1, max_length=MAX_TOKEN_IDS)]
# text, token ids and text mixed ([12, 34, "text", 56]: at least one id), or a list of prompts (texts or lists)
Prompt = (
    str
    | Annotated[list[TokenId | str], Field(min_length=1, max_length=MAX_TOKEN_IDS,
                                           json_schema_extra={"contains": {"type": "integer"}})]
    | Annotated[list[str | Mixed], Field(min_length=1, max_length=MAX_BATCH)]
)  # fmt: skip
SamplerName = Literal[tuple(DEFAULT_SAMPLERS)]  # type: ignore[valid-type]
SAMPLER_LIST = "(?:" + "|".join(DEFAULT_SAMPLERS) + ")"
Bias = Annotated[float, Field(ge=-100, le=100)]
Pair = tuple[TokenId, Bias | Literal[False]]  # llama.cpp's [token, bias], false: never


def neutral(value: Any, why: str) -> Any:
    """A llama-server field honoured only at its neutral value (anything else is a 400 naming it)."""
    return Field(value, description=NOT_HERE.format(why=why))


class _Native(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


def _llamacpp_sampling() -> dict[str, Any]:
    """The numeric sampling fields by llama.cpp's names (and their aliases), bounded as the sampler's BOUNDS."""
    out = {}
    for name, cfg in LLAMACPP_FIELDS.items():
        if cfg in BOUNDS and cfg != "n_probs":
            kind = Int if BOUNDS[cfg].integer else float
            out[name] = (kind | None, sampling_field(cfg))
    return out


_CompletionBase = create_model(
    "_CompletionBase", __base__=_Native, __module__=__name__, **_llamacpp_sampling(),
)  # fmt: skip


class CompletionBody(_CompletionBase):
    prompt: Prompt = Field(description="text, token ids, both mixed, or a list of those (one result each)")
    model: str | None = Field(None, description=MODEL_NAME, json_schema_extra={"x-llamay": "model-name"})
    n_predict: Int | None = Field(None, ge=-1, le=MAX_TOKENS, description="-1: until the context is full; 0: "
                                  "the prompt is evaluated into the cache, nothing generated")  # fmt: skip
    max_tokens: Int | None = Field(None, ge=-1, le=MAX_TOKENS, description="n_predict's other name")
    n_cmpl: Int = Field(1, ge=1, le=MAX_N, description="completions of each prompt")
    stream: bool = False
    stop: Stop = None
    seed: Int | None = SEED
    n_probs: Int = Field(0, ge=0, le=MAX_N_PROBS, description="the top n tokens' logprobs (raw distribution)")
    top_logprobs: Int | None = Field(None, ge=0, le=MAX_N_PROBS, description="n_probs' other name")
    logprobs: bool | None = Field(None, description="true: n_probs 1 where n_probs is not given")
    ignore_eos: bool | None = None
    samplers: (
        Annotated[list[SamplerName], Field(max_length=4 * len(DEFAULT_SAMPLERS))]
        | Annotated[str, StringConstraints(pattern=f"^(?:{SAMPLER_LIST}(?:[;,]{SAMPLER_LIST})*)?$", max_length=512)]
        | None
    ) = Field(None, description="the sampler chain, in order (a list, or names joined by ';')")
    dry_sequence_breakers: (
        list[Annotated[str, StringConstraints(min_length=1, max_length=MAX_BREAKER_CHARS)]] | None
    ) = Field(None, max_length=MAX_BREAKERS)
    logit_bias: (
        Annotated[list[Pair], Field(max_length=MAX_LOGIT_BIAS)]
        | dict[Annotated[str, StringConstraints(pattern=r"^(0|[1-9][0-9]{0,9})$")], Bias]
        | None
    ) = Field(None, max_length=MAX_LOGIT_BIAS, description="[[token, bias or false], ...] or {\"token\": bias}",
              json_schema_extra={"x-llamay": "logit-bias"})  # fmt: skip
    cache_prompt: bool = Field(True, description="reuse the prefix cache's pages (false: compute every token)")
    id_slot: Int = Field(-1, ge=-1, description="a slot (-1: any): its prompt cache is kept for /slots actions",
                         json_schema_extra={"x-llamay": "slot-id"})  # fmt: skip
    return_tokens: bool = False
    timings_per_token: bool = False
    response_fields: list[Annotated[str, StringConstraints(min_length=1, max_length=256)]] | None = Field(
        None, max_length=MAX_RESPONSE_FIELDS
    )
    grammar: str | None = Field(None, max_length=MAX_GRAMMAR_CHARS, description="GBNF")
    json_schema: dict[str, Any] | None = None
    n_keep: Int = Field(0, ge=-1, description="no effect: the context never shifts (a prompt past it is refused)")
    n_indent: Int = Field(0, ge=0, le=0, description=NOT_HERE.format(why="no indentation rule"))
    n_cache_reuse: Int = Field(0, ge=0, le=0, description=NOT_HERE.format(why="no KV shifting"))
    t_max_predict_ms: Int = Field(0, ge=0, le=0, description=NOT_HERE.format(why="no time limit per request"))
    t_max_prompt_ms: Int = Field(0, ge=-1, le=0, description=NOT_HERE.format(why="no time limit per request"))
    return_progress: Literal[False] = neutral(False, "no prompt progress events")
    post_sampling_probs: Literal[False] = neutral(False, "n_probs come from the raw distribution")
    lora: list[Any] = Field([], max_length=0, description="no LoRA adapters are served")


class InfillExtra(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    filename: str = Field("", max_length=1024)
    text: str = ""


class InfillBody(CompletionBody):
    prompt: Prompt = Field("", description="text after the FIM middle token")  # type: ignore[assignment]
    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: list[InfillExtra] = Field([], max_length=MAX_EXTRA_FILES)


class ApplyTemplateBody(_Native):
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    tools: list[Tool] | None = Field(None, max_length=MAX_TOOLS)
    add_generation_prompt: bool = True
    model: str | None = None


EmbedInput = text_or_tokens(MAX_EMBED_INPUTS, EmbedTokenIds)


class NativeEmbeddingBody(_Native):
    model_config = ConfigDict(json_schema_extra={"anyOf": [{"required": ["content"]}, {"required": ["input"]}]})
    content: EmbedInput = Field(None, description="a text, token ids, or a list of either")  # type: ignore[assignment]
    input: EmbedInput = Field(None, description="content's other name (as /v1/embeddings)")  # type: ignore[assignment]
    embd_normalize: Int = Field(
        2,
        ge=-1,
        le=1 << 10,
        description="-1 none (a model without pooling only), 0 max-abs, 1 taxicab, 2 L2, >2 p-norm",
        json_schema_extra={"x-llamay": "embd-normalize"},
    )
    model: str | None = None
    encoding_format: Literal["float"] = "float"


class RerankBody(_Native):
    query: str
    documents: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    top_n: Int | None = Field(None, ge=1, description="only the best top_n results")
    model: str | None = None


class SlotFile(_Native):
    # optional here so that erase takes a body of `{}` as llama-server does; save and restore require it by name
    filename: str | None = Field(None, pattern=FILENAME_PATTERN, description="a name in the server's snapshot folder")
