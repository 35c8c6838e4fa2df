"""OpenAI-compatible routes: chat completions, completions, embeddings, models (streaming as SSE)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import struct
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel

from llamay.tools import OpenAIDeltas, ToolPlan, finish_of, openai_message

from .bodies import StrictJsonRoute
from .deps import PoolDep
from .errors import bad_request
from .limits import MAX_BATCH, MAX_EMBED_INPUTS
from .llamacpp_prompts import timings
from .params import from_openai
from .pool import Available, Lease, ModelPool, not_found, served_entry
from .schemas import (
    ChatCompletion,
    ChatCompletionRequest,
    Completion,
    CompletionRequest,
    EmbeddingRequest,
    EmbeddingResponse,
    ModelCard,
    ModelList,
)
from .service import Service
from .streaming import Generation, Piece, Stream, check_room, sse_response, sse_stream
from .tools import message_dicts, plan_for

router = APIRouter(tags=["OpenAI"], route_class=StrictJsonRoute)


# -- models ---------------------------------------------------------------------------------------------------


@router.get("/v1/models", response_model=ModelList,
            summary="The models available: the resident one, and every stored one when serving the store")  # fmt: skip
async def list_models(pool: PoolDep) -> dict[str, Any]:
    return {"object": "list", "data": [_card(a) for a in await asyncio.to_thread(pool.available)]}


@router.get("/v1/models/{model}", response_model=ModelCard, summary="One available model")
async def get_model(model: str, pool: PoolDep) -> dict[str, Any]:
    if not pool.store:
        return _card(served_entry(pool.resident.service.find(model)))
    available = await asyncio.to_thread(pool.available)
    for a in available:
        if a.name == model or a.name == f"{model}:latest" or a.name.removesuffix(":latest") == model:
            return _card(a)
    if any(m.matches(model) for m in pool.resident.service.models):
        return _card(served_entry(pool.resident.service.find(model)))
    raise not_found(model, False, [a.name for a in available])


def _card(a: Available) -> dict[str, Any]:
    return {"id": a.name, "object": "model", "created": int(a.modified), "owned_by": "llamay"}


# -- chat -----------------------------------------------------------------------------------------------------


@router.post(
    "/v1/chat/completions",
    response_model=ChatCompletion,
    summary="Chat completion (streams SSE chunks with `stream: true`, ending in `data: [DONE]`)",
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def chat_completions(body: ChatCompletionRequest, request: Request, pool: PoolDep):
    return await _leased(pool, body, request, _chat_completions)


async def _leased(pool: ModelPool, body: Any, request: Request, handler: Any) -> Any:
    """`handler(body, request, lease)` holding the model the body names (released at its end, unless a stream
    it returns holds it on); a request the queue cannot take now is refused before any preparation."""
    lease = await pool.lease(body.model, "generate", ollama=False)
    try:
        check_room(lease.service, body.n)
        return await handler(body, request, lease)
    finally:
        lease.done()


async def _chat_completions(body: ChatCompletionRequest, request: Request, lease: Lease):
    service = lease.service
    choice = body.tool_choice.model_dump() if isinstance(body.tool_choice, BaseModel) else body.tool_choice
    plan = plan_for(service.chat_template, body.tools, choice, body.parallel_tool_calls)
    max_tokens = body.max_completion_tokens or body.max_tokens
    param = "max_completion_tokens" if body.max_completion_tokens else "max_tokens"
    if body.top_logprobs is not None and not body.logprobs:  # as OpenAI: never silently ignored
        raise bad_request("top_logprobs needs logprobs: true", "top_logprobs", "conflicting_fields")
    logprobs = (body.top_logprobs or 0) if body.logprobs else None
    params = from_openai(body, service.tokenizer.n_vocab, max_tokens=max_tokens, logprobs=logprobs,
                         fmt=body.response_format)  # fmt: skip
    params = dataclasses.replace(params, tools=plan)
    prompt = await service.offload(service.chat_ids, message_dicts(body.messages), plan)
    truncate, n_keep = truncation(body)
    prompt, budget, cut = service.fit(prompt, max_tokens, param, truncate=truncate, n_keep=n_keep)
    gen, head = await _started(lease, [prompt], params, [budget], cut, "chatcmpl")
    if body.stream:
        return _streaming(body, lease, gen, lambda usage: _chat_chunks(gen, head, plan, usage))
    await gen.collect(request.is_disconnected)
    choices = []
    for i, ch in enumerate(gen.choices):
        message: dict[str, Any] = {"role": "assistant", "content": gen.text(i)}
        finish = ch.finish
        if plan is not None:
            message, finish = openai_message(plan, gen.text(i), finish)
        choices.append({"index": i, "message": message, "logprobs": _chat_logprobs(service, ch.job, gen, i),
                        "finish_reason": finish})  # fmt: skip
    return {**head, "object": "chat.completion", "choices": choices, "usage": gen.usage(), "timings": _timings(gen)}


async def _started(lease: Lease, prompts: list[list[int]], params: Any, budgets: list[int], cut: int,
                   kind: str) -> tuple[Generation, dict[str, Any]]:  # fmt: skip
    """The request's generation, queued, and the head every reply and chunk carries (`kind`: the id's prefix)."""
    service = lease.service
    gen = await Generation.create(service, prompts, params, budgets)
    gen.truncated = cut
    gen.start()
    return gen, {"id": f"{kind}-{uuid.uuid4().hex}", "created": int(time.time()), "model": lease.model.id,
                 "system_fingerprint": service.fingerprint}  # fmt: skip


def _streaming(body: Any, lease: Lease, gen: Generation,
               chunks: Callable[[bool], AsyncIterator[dict[str, Any]]]) -> Stream:  # fmt: skip
    """The SSE stream of `chunks(include_usage)`, with llama-server's timings, holding the model's lease to its
    end (released once, whichever way it ends, and the jobs cancelled: also when the client is gone before the
    first byte)."""
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    events = _timed(chunks(include_usage), gen, body.timings_per_token)
    return sse_response(sse_stream(events), gen, lease.hand_over())


async def _chat_chunks(gen: Generation, head: dict[str, Any], plan: ToolPlan | None,
                       include_usage: bool) -> AsyncIterator[dict[str, Any]]:  # fmt: skip
    chunk = {**head, "object": "chat.completion.chunk"}
    if include_usage:
        chunk["usage"] = None
    service = gen.service
    for i in range(len(gen.choices)):
        yield {**chunk, "choices": [{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                     "finish_reason": None}]}  # fmt: skip
    # with tools: each choice's text through the parser (content, then each call's name and argument pieces)
    tools = {i: OpenAIDeltas(plan) for i in range(len(gen.choices))} if plan is not None else {}
    async for piece in gen.pieces():
        logprobs = _chat_logprob_piece(service, piece)
        last = piece.finish is not None
        if plan is not None:
            delta = tools[piece.index].feed(piece.text, last)
        else:
            delta = {"content": piece.text} if piece.text or logprobs else None
        if delta or logprobs:
            yield {**chunk, "choices": [{"index": piece.index, "delta": delta or {}, "logprobs": logprobs,
                                         "finish_reason": None}]}  # fmt: skip
        if last:
            finish = finish_of(tools[piece.index].calls, piece.finish) if plan is not None else piece.finish
            yield {**chunk, "choices": [{"index": piece.index, "delta": {}, "logprobs": None,
                                         "finish_reason": finish}]}  # fmt: skip
    if include_usage:
        yield {**chunk, "choices": [], "usage": gen.usage()}


def _timings(gen: Generation, index: int = 0) -> dict[str, Any]:
    ch = gen.choices[index]
    return timings(ch.job, len(ch.tokens), time.monotonic())


async def _timed(chunks: AsyncIterator[dict[str, Any]], gen: Generation,
                 every: bool) -> AsyncIterator[dict[str, Any]]:  # fmt: skip
    """llama-server's `timings` in stream chunks: in the chunk that ends a choice (every chunk with
    timings_per_token), of the choice it is about."""
    async for chunk in chunks:
        choices = chunk.get("choices") or []
        if choices and (every or choices[0].get("finish_reason") is not None):
            chunk = {**chunk, "timings": _timings(gen, choices[0]["index"])}
        yield chunk


def _token_entry(service: Service, tok: int, lp: float) -> dict[str, Any]:
    data = service.tokenizer.token_bytes(tok)
    return {"token": data.decode("utf-8", "replace"), "logprob": lp, "bytes": list(data)}


def _chat_logprob_piece(service: Service, piece: Piece) -> dict[str, Any] | None:
    if piece.token is None or piece.logprob is None:
        return None
    entry = _token_entry(service, piece.token, piece.logprob)
    entry["top_logprobs"] = [_token_entry(service, t, lp) for t, lp in piece.top]
    return {"content": [entry]}


def _chat_logprobs(service: Service, job: Any, gen: Generation, i: int) -> dict[str, Any] | None:
    lps = gen.choices[i].logprobs
    if gen.params.logprobs is None:
        return None
    content = []
    for tok, lp, top in lps:
        entry = _token_entry(service, tok, lp)
        entry["top_logprobs"] = [_token_entry(service, t, v) for t, v in top]
        content.append(entry)
    return {"content": content}


# -- completions ----------------------------------------------------------------------------------------------


@router.post(
    "/v1/completions",
    response_model=Completion,
    summary="Text completion (streams SSE chunks with `stream: true`, ending in `data: [DONE]`)",
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def completions(body: CompletionRequest, request: Request, pool: PoolDep):
    return await _leased(pool, body, request, _completions)


async def _completions(body: CompletionRequest, request: Request, lease: Lease):
    service = lease.service
    if body.suffix:
        raise bad_request("suffix (fill-in-the-middle) is not supported", "suffix")
    if body.best_of is not None and body.best_of != body.n:
        raise bad_request("best_of must equal n (candidates are not ranked)", "best_of", "conflicting_fields")
    params = from_openai(body, service.tokenizer.n_vocab, max_tokens=body.max_tokens, logprobs=body.logprobs,
                         fmt=body.response_format)  # fmt: skip
    prompts, echo = await service.offload(_prompts, service, body.prompt, body.echo)
    truncate, n_keep = truncation(body)
    max_tokens = 16 if body.max_tokens is None else body.max_tokens
    fitted = [service.fit(p, max_tokens, truncate=truncate, n_keep=n_keep) for p in prompts]
    prompts = [p for p, _, _ in fitted]
    gen, head = await _started(lease, prompts, params, [b for _, b, _ in fitted], sum(c for _, _, c in fitted), "cmpl")
    if body.stream:
        return _streaming(body, lease, gen, lambda usage: _completion_chunks(gen, head, echo, usage))
    await gen.collect(request.is_disconnected)
    choices = []
    for i, ch in enumerate(gen.choices):
        prefix = echo[i // params.n]
        choices.append({"index": i, "text": prefix + gen.text(i), "finish_reason": ch.finish,
                        "logprobs": _completion_logprobs(service, gen, i, len(prefix))})  # fmt: skip
    return {**head, "object": "text_completion", "choices": choices, "usage": gen.usage(), "timings": _timings(gen)}


def truncation(body: Any) -> tuple[bool, int]:
    """(truncate, n_keep) of a request's `truncation` and llama.cpp's `n_keep` (which means nothing alone)."""
    truncate = body.truncation == "auto"
    if body.n_keep is not None and not truncate:
        raise bad_request("n_keep keeps the prompt's first tokens when it is truncated: give truncation: 'auto'",
                          "n_keep", "conflicting_fields")  # fmt: skip
    return truncate, body.n_keep or 0


def _prompts(service: Service, prompt: Any, echo: bool) -> tuple[list[list[int]], list[str]]:
    """The prompts' token ids, and their text when echoed (on a preparation thread)."""
    if isinstance(prompt, str):
        items: list[Any] = [prompt]
    elif prompt and isinstance(prompt[0], int):
        items = [prompt]
    else:
        items = list(prompt)
    if not items:
        raise bad_request("the prompt is empty", "prompt")
    if len(items) > MAX_BATCH:
        raise bad_request(f"at most {MAX_BATCH} prompts per request (max_batch), got {len(items)}", "prompt")
    ids = [service.check_ids(service.encode(p) if isinstance(p, str) else list(p)) for p in items]
    return ids, [service.tokenizer.decode(p) if echo else "" for p in ids]


async def _completion_chunks(gen: Generation, head: dict[str, Any], echo: list[str],
                             include_usage: bool) -> AsyncIterator[dict[str, Any]]:  # fmt: skip
    chunk = {**head, "object": "text_completion"}
    if include_usage:
        chunk["usage"] = None
    n = gen.params.n
    for i in range(len(gen.choices)):
        if echo[i // n]:
            yield {**chunk, "choices": [{"index": i, "text": echo[i // n], "logprobs": None, "finish_reason": None}]}
    async for piece in gen.pieces():
        logprobs = None
        if piece.logprob is not None and piece.token is not None:
            logprobs = _completion_logprob_block(gen.service, [(piece.token, piece.logprob, piece.top)], 0)
        if piece.text or logprobs or piece.finish:
            yield {**chunk, "choices": [{"index": piece.index, "text": piece.text, "logprobs": logprobs,
                                         "finish_reason": piece.finish}]}  # fmt: skip
    if include_usage:
        yield {**chunk, "choices": [], "usage": gen.usage()}


def _completion_logprobs(service: Service, gen: Generation, i: int, offset: int) -> dict[str, Any] | None:
    lps = gen.choices[i].logprobs
    if gen.params.logprobs is None:
        return None
    return _completion_logprob_block(service, lps, offset)


def _completion_logprob_block(service: Service, lps: list[tuple[int, float, Any]], offset: int) -> dict[str, Any]:
    tokens, token_lps, tops, offsets = [], [], [], []
    for tok, lp, top in lps:
        text = service.tokenizer.token_bytes(tok).decode("utf-8", "replace")
        tokens.append(text)
        token_lps.append(lp)
        tops.append({service.tokenizer.token_bytes(t).decode("utf-8", "replace"): v for t, v in top})
        offsets.append(offset)
        offset += len(text)
    return {"tokens": tokens, "token_logprobs": token_lps, "top_logprobs": tops, "text_offset": offsets}


# -- embeddings -----------------------------------------------------------------------------------------------


@router.post("/v1/embeddings", response_model=EmbeddingResponse, summary="Sentence embeddings (encoder models)")
async def embeddings(body: EmbeddingRequest, pool: PoolDep) -> dict[str, Any]:
    inp = body.input  # a text, texts, token ids, or lists of them (the schema made sure of which)
    inputs: list[Any] = [inp] if isinstance(inp, str) or (inp and isinstance(inp[0], int)) else list(inp)
    if not inputs or len(inputs) > MAX_EMBED_INPUTS:
        raise bad_request(f"between 1 and {MAX_EMBED_INPUTS} inputs per request, got {len(inputs)}", "input")
    lease = await pool.lease(body.model, "embed", ollama=False)
    try:
        model, vectors, n_tokens = await lease.service.embed(body.model, inputs)
    finally:
        lease.done()
    if body.dimensions is not None and body.dimensions != len(vectors[0]):
        raise bad_request(f"{model.id} gives {len(vectors[0])} dimensions; it cannot be shortened", "dimensions")
    data = []
    for i, v in enumerate(vectors):
        value: Any = v if body.encoding_format == "float" else base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()
        data.append({"object": "embedding", "index": i, "embedding": value})
    return {"object": "list", "data": data, "model": model.id,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}  # fmt: skip


# -- the same routes without /v1 --------------------------------------------------------------------------------


LLAMA_SERVER_OWN = ("/v1/completions",)  # /completions is llama-server's own route there (llamacpp_routes)


def _unprefixed(router: APIRouter) -> None:
    """Each /v1 route also without the prefix (`OpenAI(base_url="http://host:port")`, as llama-server allows):
    the same handler, left out of the description, where the /v1 operation names it (`x-aliases`)."""
    for route in list(router.routes):
        if not (isinstance(route, APIRoute) and route.path.startswith("/v1/")) or route.path in LLAMA_SERVER_OWN:
            continue
        alias = route.path.removeprefix("/v1")
        router.add_api_route(alias, route.endpoint, methods=sorted(route.methods), response_model=route.response_model,
                             name=f"{route.name}_unprefixed", include_in_schema=False)  # fmt: skip
        route.description = f"{route.description}\n\nAlso served at `{alias}`.".lstrip()
        route.openapi_extra = {**(route.openapi_extra or {}), "x-aliases": [alias]}


_unprefixed(router)
