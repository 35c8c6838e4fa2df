"""Ollama-compatible routes: generate, chat (NDJSON streaming, streaming by default), embed, tags, show, ps,
version. The final object of a generation carries Ollama's counts and durations (nanoseconds)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request

from llamay.tools import ToolPlan

from . import keep_alive, store_show
from .bodies import StrictJsonRoute
from .deps import PoolDep, ServiceDep
from .errors import STATUSES, bad_request
from .limits import MAX_EMBED_INPUTS
from .ollama_schemas import (
    OllamaChatRequest,
    OllamaEmbeddingsRequest,
    OllamaEmbedRequest,
    OllamaGenerateRequest,
    OllamaShowRequest,
)
from .openai_routes import _token_entry
from .params import from_ollama
from .pool import Available, Lease, ModelPool, served_entry, stamp
from .schemas import OllamaErrorResponse
from .service import ServedModel, Service
from .streaming import Generation, Stream, check_room, ndjson_response, ndjson_stream
from .thinking import ThinkSplit, reasons, split
from .tools import OllamaPieces, message_dicts, ollama_message, plan_for

ERRORS = {code: {"model": OllamaErrorResponse} for code in STATUSES}
router = APIRouter(tags=["Ollama"], route_class=StrictJsonRoute, responses=ERRORS)  # Ollama's error shape
NDJSON = "application/x-ndjson"
DETAIL_KEYS = ("parent_model", "format", "family", "families", "parameter_size", "quantization_level")


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


# -- generate -------------------------------------------------------------------------------------------------


@router.post("/api/generate", summary="Generate a completion (NDJSON stream unless `stream: false`)",
             responses={200: {"content": {NDJSON: {}}}})  # fmt: skip
async def generate(body: OllamaGenerateRequest, request: Request, pool: PoolDep):
    return await _leased(pool, body, request, _generate)


async def _leased(pool: ModelPool, body: Any, request: Request, handler: Any) -> Any:
    """`handler(body, request, lease, keep)` holding the model the body names (released at its end, unless a
    stream it returns holds it on)."""
    keep = keep_alive.seconds(body.keep_alive, pool.default_keep_alive)
    lease = await pool.lease(body.model, "generate", keep)
    try:
        return await handler(body, request, lease, keep)
    finally:
        lease.done()


async def _generate(body: OllamaGenerateRequest, request: Request, lease: Lease, keep: float):
    service, model = lease.service, lease.model
    if body.images:
        raise bad_request("images are not supported: the served model reads text only", "images")
    if body.suffix:
        raise bad_request("suffix (fill-in-the-middle) is not supported", "suffix")
    if not body.prompt and not body.context:  # Ollama's load (and, with keep_alive 0, unload) request
        return await _load_reply(lease, keep, "response", "")
    check_room(service)  # before the prompt is rendered and tokenized
    params = _logprobs(service, body, from_ollama(body.options, body.format))
    if body.think is not None and (body.raw or body.template or body.context):
        raise bad_request("think needs the model's own template (not raw, template or context)", "think")
    own_template = not (body.raw or body.template or body.context)  # only then is the reply's reasoning known
    thinks = own_template and _thinks(service, model, body.think)
    prompt = await service.offload(_generate_prompt, service, body)
    gen, prompt = await _generation(service, body, prompt, params)
    opened = thinks and _opens_thinking(service, prompt)

    def final() -> dict[str, Any]:
        ch = gen.choices[0]
        return {"done": True, "done_reason": ch.finish, "context": prompt + ch.tokens, **gen.timings_ns()}

    if body.stream:
        events = _stream(gen, model, "response", final, ThinkSplit(opened) if thinks else None)
        return _streaming(lease, gen, events)
    await gen.collect(request.is_disconnected)
    reply: dict[str, Any] = {"model": model.id, "created_at": _now(), "response": gen.text(0)}
    if thinks:
        reply["thinking"], reply["response"] = split(gen.text(0), opened)
    if params.logprobs is not None:
        reply["logprobs"] = _entries(service, gen.choices[0].logprobs)
    return {**reply, **final()}


async def _load_reply(lease: Lease, keep: float, key: str, empty: Any) -> dict[str, Any]:
    """Ollama's answer to a request with nothing to generate: the model is loaded (`load`); with keep_alive 0,
    it is unloaded before the answer (`unload`)."""
    reason = "load"
    if keep == 0:
        lease.release()
        if await lease.pool.unload(lease.entry.name):
            reason = "unload"
    return {"model": lease.model.id, "created_at": _now(), key: empty, "done": True, "done_reason": reason}


def _streaming(lease: Lease, gen: Generation, items: AsyncIterator[dict[str, Any]]) -> Stream:
    """An NDJSON stream holding the model's lease to its end (released once, whichever way it ends, and the jobs
    cancelled: also when the client is gone before the first byte)."""
    return ndjson_response(ndjson_stream(items), gen, lease.hand_over())


def _logprobs(service: Service, body: Any, params: Any) -> Any:
    """`params` asking for the log-probabilities the request wants (`logprobs`, `top_logprobs` k)."""
    if body.top_logprobs is not None and not body.logprobs:
        raise bad_request("top_logprobs needs logprobs: true", "top_logprobs", "conflicting_fields")
    return dataclasses.replace(params, logprobs=(body.top_logprobs or 0) if body.logprobs else None)


def _entries(service: Service, lps: Any) -> list[dict[str, Any]]:
    """Ollama's `logprobs` items: each token's text, log-probability and bytes, and its `top_logprobs`."""
    out = []
    for tok, lp, top in lps:
        entry = _token_entry(service, tok, lp)
        entry["top_logprobs"] = [_token_entry(service, t, v) for t, v in top]
        out.append(entry)
    return out


def _thinks(service: Service, model: ServedModel, think: bool | None) -> bool:
    """Whether the reply's reasoning is split out (`think` not false, on a template that reasons); `think` on a
    template that does not is refused, as Ollama refuses it."""
    reasoning = reasons(service.tokenizer.chat_template_source)
    if think is not None and not reasoning:
        raise bad_request(f'"{model.id}" does not support thinking (its chat template has no reasoning block)',
                          "think", "thinking_not_supported")  # fmt: skip
    return reasoning and think is not False


def _opens_thinking(service: Service, prompt: list[int]) -> bool:
    """The template's generation prompt itself opened the reasoning block (DeepSeek-R1's does)."""
    return service.tokenizer.decode(prompt[-8:]).rstrip().endswith("<think>")


def _window(service: Service, body: Any) -> tuple[int | None, bool, int, str]:
    """(num_ctx, truncate, num_keep, how the limit is named) of a request: `options.num_ctx` is at most the
    server's; an over-long prompt is cut with num_ctx or `truncate: true`, never with `truncate: false`."""
    opts = body.options
    num_ctx = opts.num_ctx if opts else None
    if num_ctx is not None and num_ctx > service.n_ctx:
        raise bad_request(f"options.num_ctx is {num_ctx}, more than this server's context of {service.n_ctx} tokens "
                          "(llamay serve -c)", "options.num_ctx")  # fmt: skip
    truncate = body.truncate is not False and (num_ctx is not None or body.truncate is True)
    n_keep = opts.num_keep if opts and opts.num_keep is not None else 0
    return num_ctx, truncate, n_keep, "options.num_ctx" if num_ctx is not None else "-c"


async def _generation(service: Service, body: Any, prompt: list[int], params: Any) -> tuple[Generation, list[int]]:
    """The started generation of `prompt` within the request's context (`_window`): an over-long prompt is
    refused, or cut to its first `num_keep` tokens (and BOS) and its end, as Ollama's runner cuts it."""
    num_ctx, truncate, n_keep, where = _window(service, body)
    prompt, budget, _ = service.fit(prompt, params.max_tokens, "num_predict", n_ctx=num_ctx, truncate=truncate,
                                    n_keep=n_keep, ctx_param=where)  # fmt: skip
    gen = await Generation.create(service, [prompt], params, [budget])
    return gen.start(), prompt


def _chat_prompt(service: Service, messages: list[dict[str, Any]], tools: Any, think: bool | None,
                 n_ctx: int | None, max_tokens: int | None) -> list[int]:  # fmt: skip
    """/api/chat's prompt (on a preparation thread). Cut to `n_ctx` (truncation asked) as Ollama cuts a chat:
    its oldest messages dropped, the system messages and the last message kept, as few dropped as leave the
    reply its room (found by bisection: a handful of renders, whatever the chat's length); what still does not
    fit is then cut in tokens (`_generation`)."""
    ids = service.chat_ids(messages, tools, think)
    if n_ctx is None or len(ids) + 1 <= n_ctx:
        return ids
    target = n_ctx - max(1, min(max_tokens if max_tokens is not None else n_ctx // 2, n_ctx - 1))
    rest = [i for i, m in enumerate(messages) if m["role"] != "system"]  # the droppable ones, oldest first
    renders: dict[int, list[int]] = {}

    def kept(drop: int) -> list[int]:  # the chat without its `drop` oldest non-system messages, in order
        if drop not in renders:
            gone = set(rest[:drop])
            renders[drop] = service.chat_ids([m for i, m in enumerate(messages) if i not in gone], tools, think)
        return renders[drop]

    lo, hi = 1, len(rest) - 1  # drop at least one, keep at least the last
    if hi < lo or len(kept(hi)) > target:  # the last message alone is too long: cut in tokens
        return kept(hi) if hi >= lo else ids
    while lo < hi:  # the least drop that fits (a render shrinks as messages go)
        mid = (lo + hi) // 2
        if len(kept(mid)) <= target:
            hi = mid
        else:
            lo = mid + 1
    return kept(lo)


def _generate_prompt(service: Service, body: OllamaGenerateRequest) -> list[int]:
    """/api/generate's prompt as token ids (on a preparation thread)."""
    if body.context:
        return service.check_ids(list(body.context), "context") + service.encode(body.prompt, add_special=False)
    if body.raw or body.template:
        return service.encode(body.prompt)
    # ollama renders the prompt as a one-turn chat with the model's template
    messages = ([{"role": "system", "content": body.system}] if body.system else []) + [
        {"role": "user", "content": body.prompt}
    ]
    return service.chat_ids(messages, think=body.think)


async def _stream(gen: Generation, model: ServedModel, key: str, final: Any,
                  think: ThinkSplit | None = None) -> AsyncIterator[dict[str, Any]]:  # fmt: skip
    def line(text: str, thinking: str = "") -> dict[str, Any]:
        if key == "response":
            out: dict[str, Any] = {"response": text, **({"thinking": thinking} if thinking else {})}
        else:
            out = {"message": {"role": "assistant", "content": text, **({"thinking": thinking} if thinking else {})}}
        return {"model": model.id, "created_at": _now(), **out}

    held: list[dict[str, Any]] = []  # log-probabilities of tokens whose text is not out yet
    async for piece in gen.pieces():
        if piece.token is not None and piece.logprob is not None:
            held += _entries(gen.service, [(piece.token, piece.logprob, piece.top)])
        thinking, text = think.feed(piece.text, piece.finish is not None) if think else ("", piece.text)
        if text or thinking:
            yield {**line(text, thinking), "done": False, **({"logprobs": held} if held else {})}
            held = []
    yield {**line(""), **final(), **({"logprobs": held} if held else {})}


# -- chat -----------------------------------------------------------------------------------------------------


@router.post("/api/chat", summary="Chat (NDJSON stream unless `stream: false`)",
             responses={200: {"content": {NDJSON: {}}}})  # fmt: skip
async def chat(body: OllamaChatRequest, request: Request, pool: PoolDep):
    return await _leased(pool, body, request, _chat)


async def _chat(body: OllamaChatRequest, request: Request, lease: Lease, keep: float):
    service, model = lease.service, lease.model
    if not body.messages:
        return await _load_reply(lease, keep, "message", {"role": "assistant", "content": ""})
    check_room(service)  # before the prompt is rendered and tokenized
    if any(m.images for m in body.messages):
        raise bad_request("images are not supported: the served model reads text only", "messages")
    plan = plan_for(service.chat_template, body.tools)  # Ollama has no tool_choice: the model may call
    if plan is not None and body.format:
        raise bad_request("format cannot constrain a reply that may call tools: the tool calls' grammar does",
                          "format", "conflicting_fields")  # fmt: skip
    params = _logprobs(service, body, dataclasses.replace(from_ollama(body.options, body.format), tools=plan))
    thinks = _thinks(service, model, body.think)
    num_ctx, truncate, _, _ = _window(service, body)
    window = (num_ctx or service.n_ctx) if truncate else None
    prompt = await service.offload(_chat_prompt, service, message_dicts(body.messages), plan, body.think, window,
                                   params.max_tokens)  # fmt: skip
    gen, prompt = await _generation(service, body, prompt, params)
    opened = thinks and _opens_thinking(service, prompt)

    def final() -> dict[str, Any]:
        return {"done": True, "done_reason": gen.choices[0].finish, **gen.timings_ns()}

    if body.stream:
        if plan is None:
            events = _stream(gen, model, "message", final, ThinkSplit(opened) if thinks else None)
        else:
            events = _tool_stream(gen, model, plan, final)
        return _streaming(lease, gen, events)
    await gen.collect(request.is_disconnected)
    thinking, text = split(gen.text(0), opened) if thinks else ("", gen.text(0))
    message = {"role": "assistant", "content": text} if plan is None else ollama_message(plan, text)
    if thinking:
        message["thinking"] = thinking
    reply = {"model": model.id, "created_at": _now(), "message": message, **final()}
    if params.logprobs is not None:
        reply["logprobs"] = _entries(service, gen.choices[0].logprobs)
    return reply


async def _tool_stream(gen: Generation, model: ServedModel, plan: ToolPlan,
                       final: Any) -> AsyncIterator[dict[str, Any]]:  # fmt: skip
    """Content as it comes; each tool call, once complete, in a message of its own (as Ollama streams them)."""
    parser = OllamaPieces(plan)
    async for piece in gen.pieces():
        content, calls = parser.feed(piece.text, piece.finish is not None)
        if content or calls:
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = calls
            yield {"model": model.id, "created_at": _now(), "message": message, "done": False}
    yield {"model": model.id, "created_at": _now(), "message": {"role": "assistant", "content": ""}, **final()}


# -- embed ----------------------------------------------------------------------------------------------------


@router.post("/api/embed", summary="Embeddings (encoder models)")
async def embed(body: OllamaEmbedRequest, pool: PoolDep) -> dict[str, Any]:
    t0 = time.perf_counter()
    texts = [body.input] if isinstance(body.input, str) else list(body.input)
    if not texts or len(texts) > MAX_EMBED_INPUTS:
        raise bad_request(f"between 1 and {MAX_EMBED_INPUTS} inputs per request, got {len(texts)}", "input")
    lease = await pool.lease(body.model, "embed", keep_alive.seconds(body.keep_alive, pool.default_keep_alive))
    try:
        model, vectors, n_tokens = await lease.service.embed(body.model, texts)
    finally:
        lease.done()
    return {"model": model.id, "embeddings": vectors, "total_duration": int((time.perf_counter() - t0) * 1e9),
            "load_duration": 0, "prompt_eval_count": n_tokens}  # fmt: skip


@router.post("/api/embeddings", summary="One text's embedding (Ollama's older route; the vector of /api/embed)")
async def embeddings(body: OllamaEmbeddingsRequest, pool: PoolDep) -> dict[str, Any]:
    lease = await pool.lease(body.model, "embed", keep_alive.seconds(body.keep_alive, pool.default_keep_alive))
    try:
        if not body.prompt:  # Ollama's answer to an empty prompt (the model checked to be an embedding one)
            return {"embedding": []}
        _, vectors, _ = await lease.service.embed(body.model, [body.prompt])
        return {"embedding": vectors[0]}
    finally:
        lease.done()


# -- models ---------------------------------------------------------------------------------------------------


def _entry(a: Available) -> dict[str, Any]:
    name = a.name if ":" in a.name else f"{a.name}:latest"  # a stored model's name has its tag
    return {"name": name, "model": name, "modified_at": stamp(a.modified), "size": a.size, "digest": a.digest,
            "details": a.details}  # fmt: skip


@router.get("/api/tags", summary="Models available: the resident one, and every stored one when serving the store")
async def tags(pool: PoolDep) -> dict[str, Any]:
    return {"models": [_entry(a) for a in await asyncio.to_thread(pool.available)]}


@router.get("/api/ps", summary="Models loaded: size (weights and KV), when each may be unloaded (expires_at)")
async def ps(pool: PoolDep) -> dict[str, Any]:
    out = []
    for e in pool.all_loaded():
        m = e.service.generator
        name = e.name if ":" in e.name else f"{e.name}:latest"
        d = m.details
        out.append({"name": name, "model": name, "size": e.size, "digest": m.digest.removeprefix("sha256:"),
                    "details": {k: d[k] for k in DETAIL_KEYS}, "expires_at": stamp(e.expires),
                    "size_vram": 0, "context_length": e.service.n_ctx})  # fmt: skip
    return {"models": out}


@router.post("/api/show", summary="A model's details, layers (template, system, parameters, license, messages) and "
             "GGUF metadata (model_info)")  # fmt: skip
async def show(body: OllamaShowRequest, pool: PoolDep) -> dict[str, Any]:
    if not (body.model or body.name):
        raise bad_request("give the model's name in `model`", "model")
    if body.model and body.name:  # both spellings: each must name a model (never one silently ignored)
        await _shown(pool, body.name, "name", False)
    return await _shown(pool, body.model or body.name, "model" if body.model else "name", body.verbose)


async def _shown(pool: ModelPool, name: str, param: str, verbose: bool) -> dict[str, Any]:
    """/api/show of a stored model (read from its store, loaded or not), else of the resident service's."""
    if pool.store:
        found = await asyncio.to_thread(store_show.stored_show, name, verbose)
        if found is not None:
            return found
        service = pool.resident.service
        if not any(m.matches(name) for m in service.models):
            raise await pool.unknown(name, ollama=True)
    service = pool.resident.service
    m = service.find(name, param)
    model = m.model
    cfg = model.cfg
    info = {
        "general.architecture": cfg.arch,
        "general.name": model.name,
        "general.parameter_count": m.details["parameter_count"],
        f"{cfg.arch}.context_length": cfg.n_ctx_train,
        f"{cfg.arch}.embedding_length": cfg.n_embd,
        f"{cfg.arch}.block_count": cfg.n_layer,
        f"{cfg.arch}.attention.head_count": cfg.n_head,
        "tokenizer.ggml.model": model.file.get("tokenizer.ggml.model"),
        "llamay.context_length": service.n_ctx if m.kind == "generate" else cfg.n_ctx_train,
    }
    caps = ["completion"] if m.kind == "generate" else ["embedding"]
    if m.kind == "generate":
        caps.append("tools")  # every model: its template's syntax, else the generic format in the prompt
    template = model.tokenizer.chat_template_source or "" if m.kind == "generate" else ""
    entry = _entry(served_entry(m))
    return {
        "license": model.file.get("general.license") or "",
        "modelfile": f"FROM {m.path}\n",
        "parameters": f"num_ctx {service.n_ctx}",
        "template": template,
        "details": entry["details"],
        "model_info": info,
        "capabilities": caps,
        "modified_at": entry["modified_at"],
    }


@router.get("/api/version", summary="Server version")
async def version(service: ServiceDep) -> dict[str, str]:
    return {"version": service.version}
