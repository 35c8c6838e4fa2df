"""Request models of llama-server's own routes (`/completion`, `/infill`, `/embedding`, `/apply-template`,
`/slots`), as its README names their fields.

The sampling fields (`temperature`, `top_k`, `penalty_repeat`, `samplers`, `logit_bias` pairs...) are not
declared here: they arrive as extra fields and go, by llama.cpp's names, through
`llamay.sampling.request.sampling_from_request` (its "llamacpp" table), which bounds and names them. Any other
field not declared is refused by name (`unknown_field`); llama-server's fields that have no meaning here take
their neutral value only (a 400 naming them otherwise).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from .limits import MAX_BATCH, MAX_MESSAGES, MAX_N, MAX_TOKEN_IDS
from .schemas import MAX_TOKENS, MODEL_NAME, ChatMessage, Int, Tool

MAX_N_PROBS = 100  # top tokens per generated token (each a pass over the vocabulary)
MAX_RESPONSE_FIELDS = 64
MAX_GRAMMAR_CHARS = 1 << 16
MAX_EXTRA_FILES = 64  # /infill's input_extra chunks
FILENAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$"  # a slot file: one path component, no "..", no "/"

# text, token ids, both mixed ([12, 34, "text", 56]), or a list of those: told apart (as llama-server does) and
# checked item by item by the route (`llamacpp_prompts`)
Prompt = str | Annotated[list[Any], Field(min_length=1, max_length=MAX_TOKEN_IDS)]
NOT_HERE = "only its neutral value: {why}"


def neutral(value: Any, why: str) -> Any:
    """A llama-server field honoured only at its neutral value (anything else is a 400 naming it)."""
    return Field(value, description=NOT_HERE.format(why=why))


class _Native(BaseModel):
    """Extra fields are kept: the route reads the sampling ones and refuses the rest by name."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False, strict=True)


class CompletionBody(_Native):
    prompt: Prompt = Field(description="text, token ids, both mixed, or a list of those (one result each)")
    model: str | None = Field(None, description=MODEL_NAME)
    n_predict: Int | None = Field(None, ge=-1, le=MAX_TOKENS, description="-1: until the context is full; 0: "
                                  "the prompt is evaluated into the cache, nothing generated")  # fmt: skip
    max_tokens: Int | None = Field(None, ge=-1, le=MAX_TOKENS, description="n_predict's other name")
    n_cmpl: Int = Field(1, ge=1, le=MAX_N, description="completions of each prompt")
    stream: bool = False
    n_probs: Int = Field(0, ge=0, le=MAX_N_PROBS, description="the top n tokens' logprobs (raw distribution)")
    cache_prompt: bool = Field(True, description="reuse the prefix cache's pages (false: compute every token)")
    id_slot: Int = Field(-1, ge=-1, description="a slot (-1: any): its prompt cache is kept for /slots actions")
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


class ApplyTemplateBody(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    tools: list[Tool] | None = None
    add_generation_prompt: bool = True
    model: str | None = None


class NativeEmbeddingBody(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
    content: Prompt | None = Field(None, description="a text, token ids, both mixed, or a list of those")
    input: Prompt | None = Field(None, description="content's other name (as /v1/embeddings)")
    embd_normalize: Int = Field(2, ge=-1, le=1 << 10, description="-1 none, 0 max-abs, 1 taxicab, 2 L2, >2 p-norm")
    model: str | None = None
    encoding_format: Literal["float"] = "float"


class RerankBody(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
    query: str
    documents: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    top_n: Int | None = Field(None, ge=1, description="only the best top_n results")
    model: str | None = None


class SlotFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    filename: str = Field(pattern=FILENAME_PATTERN, description="a name in the server's snapshot folder")
