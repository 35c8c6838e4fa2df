"""Named contexts (`/llamay/contexts`): a prompt computed once, kept, forked, saved, restored and continued.

A context is a KV snapshot (its pages pinned, see `scheduler.Pin`) plus the tokens it stands for. Continuing
it offers the snapshot's whole pages to the prefix cache and queues an ordinary job whose prompt is the
context's tokens + the new text: admission adopts the pinned pages, so only the new text (and the last partial
page) is computed. With `update` the context then moves on to the new snapshot. A fork shares the pin: pages
are copied only when one side writes (copy-on-write). Snapshots go to files (`llamay.kv.snapshot_file`,
checked against the model's fingerprint) and come back into any name.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import StreamingResponse

from llamay.kv import snapshot_file

from .bodies import StrictJsonRoute
from .context_store import Context, ContextStore
from .deps import ServiceDep
from .errors import ApiError, bad_request
from .params import from_openai
from .scheduler import Job, Pin
from .schemas import (
    NAME_PATTERN,
    ContextCompletion,
    ContextContinue,
    ContextCreate,
    ContextFork,
    ContextInfo,
    ContextList,
    ContextRestore,
    SnapshotInfo,
)
from .service import Service
from .streaming import SSE_HEADERS, Generation, sse_stream
from .tools import message_dicts

router = APIRouter(prefix="/llamay/contexts", tags=["Contexts"], route_class=StrictJsonRoute)
Name = Annotated[str, Path(pattern=NAME_PATTERN, description="the context's name")]


def _store(service: Service) -> ContextStore:
    return service.contexts


def _discard(service: Service, job: Job) -> None:
    """Drop a kept snapshot nobody will own (after the job's cancel, which runs first: ops run in order)."""

    def drop(st: Any) -> None:
        if job.kept is not None:
            st.drop(job.kept)
            job.kept = None

    service.scheduler.call(drop)


async def _settled(service: Service) -> None:
    """Wait until the model thread has run every op sent so far (the jobs' cancels, so `kept` is final)."""
    await asyncio.wrap_future(service.scheduler.call(lambda _st: None))


# -- create, list, delete, fork -------------------------------------------------------------------------------


@router.post("", response_model=ContextInfo, summary="Create a named context from a prompt or a chat")
async def create(body: ContextCreate, request: Request, service: ServiceDep) -> dict[str, Any]:
    store = _store(service)
    if (body.prompt is None) == (body.messages is None):
        raise bad_request("give either `prompt` or `messages`", "prompt")
    if body.n != 1:
        raise bad_request("a context has one continuation: n must be 1", "n")
    with store.reserve(body.name):
        params = from_openai(body, service.tokenizer.n_vocab, max_tokens=body.max_tokens or 1)
        if body.messages is not None:
            ids = await service.offload(service.chat_ids, message_dicts(body.messages))
        else:
            ids = await service.offload(lambda: service.check_ids(service.encode(body.prompt or "")))
        budget = service.budget(ids, body.max_tokens or 1)
        gen = (await Generation.create(service, [ids], params, [budget], keep=True)).start()
        ch = gen.choices[0]
        try:
            await gen.collect(request.is_disconnected)
            await _settled(service)
            if ch.job.kept is None or ch.finish == "cancelled":
                raise ApiError(503, "the context's prompt was not computed (cancelled)")
        except BaseException:
            _discard(service, ch.job)
            raise
        tokens = ids + (ch.tokens if body.max_tokens else [])
        ctx = Context(body.name, tokens, Pin(ch.job.kept, service.scheduler), int(time.time()))
        store.put(ctx)
    return ctx.info(gen.text(0) if body.max_tokens else None, gen.usage())


@router.get("", response_model=ContextList, summary="List the named contexts")
async def list_contexts(service: ServiceDep) -> dict[str, Any]:
    return {"object": "list", "data": [c.info() for c in _store(service).items.values()]}


@router.get("/{name}", response_model=ContextInfo, summary="One context")
async def get_context(name: Name, service: ServiceDep) -> dict[str, Any]:
    return _store(service).get(name).info()


@router.delete("/{name}", summary="Delete a context (its pages are released once nothing else holds them)")
async def delete(name: Name, service: ServiceDep) -> dict[str, Any]:
    _store(service).drop(name)
    return {"name": name, "deleted": True}


@router.post("/{name}/fork", response_model=ContextInfo, summary="Fork a context under a new name (copy-on-write)")
async def fork(body: ContextFork, name: Name, service: ServiceDep) -> dict[str, Any]:
    store = _store(service)
    src = store.get(name)
    with store.reserve(body.name):
        ctx = Context(body.name, list(src.tokens), src.pin.hold(), int(time.time()))
        store.put(ctx)
    return ctx.info()


# -- snapshots ------------------------------------------------------------------------------------------------


@router.post("/{name}/snapshot", response_model=SnapshotInfo, summary="Save a context's KV to a snapshot file")
async def snapshot(name: Name, service: ServiceDep) -> dict[str, Any]:
    ctx = _store(service).get(name)
    sid = uuid.uuid4().hex[:16]
    path = service.snapshot_dir / f"{sid}.llkv"
    pin = ctx.pin.hold()
    fingerprint = service.model_fingerprint
    try:
        await asyncio.wrap_future(service.scheduler.call(
            lambda st: snapshot_file.save(st, pin.snapshot, path, fingerprint)))  # fmt: skip
    finally:
        pin.let_go()
    meta = {"context": name, "tokens": ctx.tokens}
    (service.snapshot_dir / f"{sid}.json").write_text(json.dumps(meta))
    return {"snapshot": sid, "context": name, "n_tokens": len(ctx.tokens), "bytes": path.stat().st_size}


@router.post("/{name}/restore", response_model=ContextInfo,
             summary="Restore a snapshot into a context (created, or replaced)")  # fmt: skip
async def restore(body: ContextRestore, name: Name, service: ServiceDep):
    store = _store(service)
    path = service.snapshot_dir / f"{body.snapshot}.llkv"
    meta_path = service.snapshot_dir / f"{body.snapshot}.json"
    if not path.exists() or not meta_path.exists():
        raise ApiError(404, f"no snapshot {body.snapshot!r}", param="snapshot", code="snapshot_not_found")
    tokens = json.loads(meta_path.read_text())["tokens"]
    fingerprint = service.model_fingerprint

    def load(st: Any) -> Any:
        seq = snapshot_file.load(st, path, fingerprint)
        snap = st.snapshot(seq)
        st.release(seq)  # its whole pages also go to the prefix cache
        return snap

    with store.reserve(name, replace=True):
        try:
            snap = await asyncio.wrap_future(service.scheduler.call(load, needs_sequence=True))
        except snapshot_file.SnapshotFileError as e:
            raise bad_request(str(e), "snapshot") from None
        ctx = Context(name, tokens, Pin(snap, service.scheduler), int(time.time()))
        store.put(ctx)
    return ctx.info()


# -- continue -------------------------------------------------------------------------------------------------


@router.post("/{name}/completions", response_model=ContextCompletion,
             summary="Continue a context: its tokens + `prompt`, then generate (SSE with `stream: true`)",
             responses={200: {"content": {"text/event-stream": {}}}})  # fmt: skip
async def continue_context(body: ContextContinue, request: Request, name: Name,
                           service: ServiceDep):  # fmt: skip
    store = _store(service)
    ctx = store.get(name)
    if body.n != 1:
        raise bad_request("a context continues one way at a time: n must be 1 (fork it for more)", "n")
    params = from_openai(body, service.tokenizer.n_vocab, max_tokens=body.max_tokens)
    new = await service.offload(service.encode, body.prompt, False) if body.prompt else []
    ctx = store.get(name)  # again: it may have moved on (or gone) while the prompt was tokenized
    ids = ctx.tokens + new
    budget = service.budget(ids, body.max_tokens)
    gen = (await Generation.create(service, [ids], params, [budget], keep=body.update, pin=ctx.pin)).start()
    head = {"id": f"cmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": service.generator.id,
            "system_fingerprint": service.fingerprint}  # fmt: skip

    def advance() -> dict[str, Any]:
        ch = gen.choices[0]
        if body.update and ch.job.kept is not None and store.items.get(name) is ctx:
            store.put(Context(name, ids + ch.tokens, Pin(ch.job.kept, service.scheduler), ctx.created))
        elif ch.job.kept is not None:
            _discard(service, ch.job)
        return store.items[name].info() if name in store.items else {"name": name, "deleted": True}

    if body.stream:
        return StreamingResponse(sse_stream(_chunks(service, gen, head, advance)), media_type="text/event-stream",
                                 headers=SSE_HEADERS)  # fmt: skip
    try:
        await gen.collect(request.is_disconnected)
        await _settled(service)
    except BaseException:
        _discard(service, gen.choices[0].job)
        raise
    info = advance()
    choice = {"index": 0, "text": gen.text(0), "logprobs": None, "finish_reason": gen.choices[0].finish}
    return {**head, "object": "text_completion", "choices": [choice], "usage": gen.usage(), "context": info}


async def _chunks(service: Service, gen: Generation, head: dict[str, Any], advance: Any) -> AsyncIterator[dict]:
    done = False
    try:
        async for piece in gen.pieces():
            if piece.text or piece.finish:
                yield {**head, "object": "text_completion", "choices": [{"index": 0, "text": piece.text,
                       "logprobs": None, "finish_reason": piece.finish}]}  # fmt: skip
        await _settled(service)
        done = True
        yield {**head, "object": "text_completion", "choices": [], "usage": gen.usage(), "context": advance()}
    finally:
        if not done:
            _discard(service, gen.choices[0].job)
