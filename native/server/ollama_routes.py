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
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from llamay.tools import ToolPlan

from . import keep_alive, store_show
from .bodies import StrictJsonRoute
from .deps import PoolDep, ServiceDep
from .errors import STATUSES, bad_request
from .limits import MAX_EMBED_INPUTS
from .params import from_ollama
from .pool import Available, Lease, ModelPool, not_found, served_entry, stamp
from .schemas import (
    OllamaChatRequest,
    OllamaEmbeddingsRequest,
    OllamaEmbedRequest,
    OllamaErrorResponse,
    OllamaGenerateRequest,
    OllamaShowRequest,
)
from .service import ServedModel, Service
from .streaming import Generation, ndjson_stream
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
    keep = keep_alive.seconds(body.keep_alive, pool.default_keep_alive)
    lease = await pool.lease(body.model, "generate", keep)
    try:
        return await _generate(body, request, lease, keep)
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
    params = from_ollama(body.options, body.format)
    prompt = await service.offload(_generate_prompt, service, body)
    budget = service.budget(prompt, params.max_tokens, "num_predict")
    gen = (await Generation.create(service, [prompt], params, [budget])).start()

    def final() -> dict[str, Any]:
        ch = gen.choices[0]
        return {"done": True, "done_reason": ch.finish, "context": prompt + ch.tokens, **gen.timings_ns()}

    if body.stream:
        return _streaming(lease, _stream(gen, model, "response", final))
    await gen.collect(request.is_disconnected)
    return {"model": model.id, "created_at": _now(), "response": gen.text(0), **final()}


async def _load_reply(lease: Lease, keep: float, key: str, empty: Any) -> dict[str, Any]:
    """Ollama's answer to a request with nothing to generate: the model is loaded (`load`); with keep_alive 0,
    it is unloaded before the answer (`unload`)."""
    reason = "load"
    if keep == 0:
        lease.release()
        if await lease.pool.unload(lease.entry.name):
            reason = "unload"
    return {"model": lease.model.id, "created_at": _now(), key: empty, "done": True, "done_reason": reason}


def _streaming(lease: Lease, items: AsyncIterator[dict[str, Any]]) -> StreamingResponse:
    """An NDJSON stream holding the model's lease to its end (released once, whichever way it ends)."""
    return StreamingResponse(ndjson_stream(lease.stream(items)), media_type=NDJSON,
                             background=BackgroundTask(lease.release))  # fmt: skip


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
    return service.chat_ids(messages)


async def _stream(gen: Generation, model: ServedModel, key: str, final: Any) -> AsyncIterator[dict[str, Any]]:
    async for piece in gen.pieces():
        if piece.text:
            value: Any = piece.text if key == "response" else {"role": "assistant", "content": piece.text}
            yield {"model": model.id, "created_at": _now(), key: value, "done": False}
    empty: Any = "" if key == "response" else {"role": "assistant", "content": ""}
    yield {"model": model.id, "created_at": _now(), key: empty, **final()}


# -- chat -----------------------------------------------------------------------------------------------------


@router.post("/api/chat", summary="Chat (NDJSON stream unless `stream: false`)",
             responses={200: {"content": {NDJSON: {}}}})  # fmt: skip
async def chat(body: OllamaChatRequest, request: Request, pool: PoolDep):
    keep = keep_alive.seconds(body.keep_alive, pool.default_keep_alive)
    lease = await pool.lease(body.model, "generate", keep)
    try:
        return await _chat(body, request, lease, keep)
    finally:
        lease.done()


async def _chat(body: OllamaChatRequest, request: Request, lease: Lease, keep: float):
    service, model = lease.service, lease.model
    if not body.messages:
        return await _load_reply(lease, keep, "message", {"role": "assistant", "content": ""})
    if any(m.images for m in body.messages):
        raise bad_request("images are not supported: the served model reads text only", "messages")
    plan = plan_for(service.chat_template, body.tools)  # Ollama has no tool_choice: the model may call
    if plan is not None and body.format:
        raise bad_request("format cannot constrain a reply that may call tools: the tool calls' grammar does",
                          "format", "conflicting_fields")  # fmt: skip
    params = dataclasses.replace(from_ollama(body.options, body.format), tools=plan)
    prompt = await service.offload(service.chat_ids, message_dicts(body.messages), plan)
    budget = service.budget(prompt, params.max_tokens, "num_predict")
    gen = (await Generation.create(service, [prompt], params, [budget])).start()

    def final() -> dict[str, Any]:
        return {"done": True, "done_reason": gen.choices[0].finish, **gen.timings_ns()}

    if body.stream:
        events = _stream(gen, model, "message", final) if plan is None else _tool_stream(gen, model, plan, final)
        return _streaming(lease, events)
    await gen.collect(request.is_disconnected)
    message = {"role": "assistant", "content": gen.text(0)} if plan is None else ollama_message(plan, gen.text(0))
    return {"model": model.id, "created_at": _now(), "message": message, **final()}


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
            raise not_found(name, ollama=True)
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
