"""OpenAI's Responses API (`POST /v1/responses`, and `/responses`) over the chat machinery: `input` (a text or
message items) and `instructions` rendered with the model's template, `max_output_tokens`, the sampling fields,
`text.format` (json_object / json_schema: the constraint engine), `truncation`, and streaming as its typed
events (`response.created` ... `response.output_text.delta` ... `response.completed`). Nothing is stored: a
response lives only in its reply (`store` takes false only, `previous_response_id` is refused)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, ClassVar, Literal

from fastapi import APIRouter, Request
from pydantic import Field

from . import openai_routes
from .bodies import StrictJsonRoute
from .deps import PoolDep, ServiceDep
from .errors import ApiError, bad_request
from .limits import MAX_MESSAGES
from .params import GenParams, requested
from .schemas import MODEL_NAME, SEED, Int, Stop, _Checked, _Lenient, sampling_field
from .streaming import Generation, check_room, sse, sse_response

router = APIRouter(tags=["OpenAI"], route_class=StrictJsonRoute)
MAX_OUTPUT = 1 << 20  # a static cap; the real one is the context


class InputPart(_Lenient):
    type: Literal["input_text", "output_text", "text"]
    text: str
    annotations: list[Any] | None = None
    logprobs: list[Any] | None = None


class InputItem(_Lenient):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[InputPart]
    id: str | None = None
    status: str | None = None


class TextFormat(_Lenient):
    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    description: str | None = None
    strict: bool | None = None


class TextOptions(_Lenient):
    format: TextFormat | None = None


class ResponsesRequest(_Lenient, _Checked):
    FIELDS: ClassVar[str] = "openai.responses"
    model: str | None = Field(None, description=MODEL_NAME, json_schema_extra={"x-llamay": "model-name"})
    input: str | Annotated[list[InputItem], Field(min_length=1, max_length=MAX_MESSAGES)]
    instructions: str | None = None
    max_output_tokens: Int | None = Field(None, ge=1, le=MAX_OUTPUT)
    temperature: float | None = sampling_field("temp", api=(0.0, 2.0))
    top_p: float | None = sampling_field("top_p")
    top_k: Int | None = sampling_field("top_k", "llama.cpp extension")
    min_p: float | None = sampling_field("min_p", "llama.cpp extension")
    seed: Int | None = SEED
    stop: Stop = None
    stream: bool = False
    text: TextOptions | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    metadata: dict[str, str] | None = None
    store: Literal[False] | None = None
    service_tier: Literal["auto", "default"] | None = None
    parallel_tool_calls: bool | None = None
    tools: list[Any] | None = Field(None, max_length=0)
    tool_choice: Literal["none", "auto"] | None = None


def _messages(body: ResponsesRequest) -> list[dict[str, Any]]:
    out = [{"role": "system", "content": body.instructions}] if body.instructions else []
    if isinstance(body.input, str):
        return [*out, {"role": "user", "content": body.input}]
    for item in body.input:
        text = item.content if isinstance(item.content, str) else "".join(p.text for p in item.content)
        out.append({"role": "system" if item.role == "developer" else item.role, "content": text})
    return out


def _format(body: ResponsesRequest) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the constraint's response_format, the `text` block the response echoes)."""
    fmt = body.text.format if body.text else None
    if fmt is None or fmt.type == "text":
        return None, {"format": {"type": "text"}}
    echoed = {"format": fmt.model_dump(exclude_none=True, by_alias=True)}
    if fmt.type == "json_object":
        return {"type": "json_object"}, echoed
    if fmt.schema_ is None:
        raise bad_request("text.format json_schema needs its schema", "text.format.schema")
    return {"type": "json_schema", "json_schema": {"name": fmt.name, "schema": fmt.schema_}}, echoed


@router.post("/v1/responses", summary="A model response (OpenAI's Responses API; its typed events with `stream`)",
             responses={200: {"content": {"text/event-stream": {}}}})  # fmt: skip
async def responses(body: ResponsesRequest, request: Request, service: ServiceDep, pool: PoolDep):
    model = await pool.resident_only(body.model, "generate")
    check_room(service)  # before the prompt is rendered and tokenized
    got = requested(body, "openai", service.tokenizer.n_vocab)
    rf, text_block = _format(body)
    params = GenParams(max_tokens=body.max_output_tokens, sampling=got.sampling, seed=got.seed, stop=got.stop,
                       response_format=rf, format_field="text.format")  # fmt: skip
    prompt = await service.offload(service.chat_ids, _messages(body))
    prompt, budget, cut = service.fit(prompt, body.max_output_tokens, "max_output_tokens",
                                      truncate=body.truncation == "auto")  # fmt: skip
    gen = await Generation.create(service, [prompt], params, [budget])
    gen.truncated = cut
    gen.start()
    rid, mid = f"resp_{uuid.uuid4().hex}", f"msg_{uuid.uuid4().hex}"
    head = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model.id,
            "instructions": body.instructions, "max_output_tokens": body.max_output_tokens,
            "temperature": body.temperature, "top_p": body.top_p, "parallel_tool_calls": False, "tool_choice": "none",
            "tools": [], "text": text_block, "truncation": body.truncation or "disabled", "store": False,
            "metadata": body.metadata or {}, "user": body.user, "error": None}  # fmt: skip
    if body.stream:
        return sse_response(_events(gen, head, mid), gen)
    await gen.collect(request.is_disconnected)
    return _response(gen, head, mid, gen.text(0))


def _message(mid: str, text: str, status: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "message", "id": mid, "status": status, "role": "assistant", "content": [part]}


def _response(gen: Generation, head: dict[str, Any], mid: str, text: str) -> dict[str, Any]:
    complete = gen.choices[0].finish != "length"
    u = gen.usage()
    usage = {
        "input_tokens": u["prompt_tokens"],
        # computed now (not from the prefix cache), and handed to it when the sequence ends
        "input_tokens_details": {
            "cached_tokens": u["llamay_cached_prompt_tokens"],
            "cache_write_tokens": u["prompt_tokens"] - u["llamay_cached_prompt_tokens"],
        },
        "output_tokens": u["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u["total_tokens"],
        "llamay_truncated_prompt_tokens": u["llamay_truncated_prompt_tokens"],
    }
    return {**head, "status": "completed" if complete else "incomplete",
            "incomplete_details": None if complete else {"reason": "max_output_tokens"},
            "output": [_message(mid, text, "completed" if complete else "incomplete")], "usage": usage}  # fmt: skip


async def _events(gen: Generation, head: dict[str, Any], mid: str) -> AsyncIterator[str]:
    """The Responses API's stream: each event an SSE frame `event: TYPE` + `data: {...}`, numbered."""
    seq = 0

    def event(kind: str, **fields: Any) -> str:
        nonlocal seq
        seq += 1
        return f"event: {kind}\n" + sse({"type": kind, "sequence_number": seq - 1, **fields})

    pending = {**head, "status": "in_progress", "incomplete_details": None, "output": [], "usage": None}
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    item = {"type": "message", "id": mid, "status": "in_progress", "role": "assistant", "content": []}
    yield event("response.output_item.added", output_index=0, item=item)
    where = {"item_id": mid, "output_index": 0, "content_index": 0}
    yield event("response.content_part.added", **where, part={"type": "output_text", "text": "", "annotations": []})
    text = []
    try:
        async for piece in gen.pieces():
            if piece.text:
                text.append(piece.text)
                yield event("response.output_text.delta", **where, delta=piece.text, logprobs=[])
    except ApiError as e:  # after the headers went out: the Responses API's error event
        yield event("error", code=e.code, message=e.message, param=e.param)
        return
    whole = "".join(text)
    final = _response(gen, head, mid, whole)
    yield event("response.output_text.done", **where, text=whole, logprobs=[])
    yield event("response.content_part.done", **where, part=final["output"][0]["content"][0])
    yield event("response.output_item.done", output_index=0, item=final["output"][0])
    yield event("response.completed" if final["status"] == "completed" else "response.incomplete", response=final)


openai_routes._unprefixed(router)
