"""Named contexts (`/llamay/contexts`): a prompt computed once, kept, forked, saved, restored and continued.

A context is a KV snapshot (its pages pinned, see `scheduler.Pin`) plus the tokens it stands for. Continuing
it offers the snapshot's whole pages to the prefix cache and queues an ordinary job whose prompt is the
context's tokens + the new text: admission adopts the pinned pages, so only the new text (and the last partial
page) is computed. With `update` the context then moves on to the new snapshot. A fork shares the pin: pages
are copied only when one side writes (copy-on-write). Snapshots go to files (`llamay.kv.snapshot_file`: one
checksum over the KV and the context's tokens, checked against the model's fingerprint; `snapshot_store`: the
folder and its quota) and come back into any name; `/llamay/snapshots` lists and deletes them.

Every route gives back what it took on every error: a reserved name (`ContextStore.reserve`), a pin
(`hold` / `let_go` in try-finally), a sequence (`KVCache.borrowed` on the model thread). File reads and writes run
in worker threads; only what touches the State runs on the model thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from llamay.kv import snapshot_file
from llamay.kv.cache import Snapshot
from llamay.kv.pages import OutOfPages

from .bodies import StrictJsonRoute
from .context_schemas import (
    ContextCompletion,
    ContextContinue,
    ContextCreate,
    ContextDeleted,
    ContextFork,
    ContextInfo,
    ContextList,
    ContextRestore,
    SnapshotDeleted,
    SnapshotInfo,
    SnapshotList,
)
from .context_store import Context, ContextStore
from .deps import ServiceDep
from .errors import ApiError, bad_request
from .params import from_openai
from .scheduler import Job, JobFailed, Pin
from .schemas import NAME_PATTERN, ErrorResponse
from .service import Service
from .snapshot_store import FULL, ID_PATTERN
from .streaming import Generation, check_room, sse_response, sse_stream
from .tools import message_dicts

BASE = "/llamay/contexts"
SNAPSHOTS = "/llamay/snapshots"
router = APIRouter(tags=["Contexts"], route_class=StrictJsonRoute)
Name = Annotated[str, Path(pattern=NAME_PATTERN, description="the context's name")]
SnapshotId = Annotated[str, Path(pattern=ID_PATTERN, description="the snapshot's id")]
STORAGE_FULL = {FULL: {"model": ErrorResponse, "description": "the snapshot quota (or the disk) is full"}}


def _store(service: Service) -> ContextStore:
    return service.contexts


def _discard(service: Service, job: Job) -> None:
    """Drop a kept snapshot nobody will own (after the job's cancel, which runs first: ops run in order)."""

    def drop(st: Any) -> None:
        if job.kept is not None:
            st.kv.drop(job.kept)
            job.kept = None

    service.scheduler.call(drop)


def _adopt(job: Job) -> Snapshot:
    """The job's kept snapshot, now owned by the caller (a context's new pin): `_discard` no longer drops it."""
    snap, job.kept = job.kept, None
    assert snap is not None
    return snap


async def _settled(service: Service) -> None:
    """Wait until the model thread has run every op sent so far (the jobs' cancels, so `kept` is final)."""
    await asyncio.wrap_future(service.scheduler.call(lambda _st: None))


async def _owned(future: concurrent.futures.Future[Any], release: Callable[[Any], Any]) -> Any:
    """Await a model-thread op that makes something to give back (a snapshot): if the route is cancelled (its
    client went away) while the op runs, the thing is released as soon as the op has made it."""
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:

        def later(f: concurrent.futures.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is None:
                release(f.result())

        future.add_done_callback(later)
        raise


# -- create, list, delete, fork -------------------------------------------------------------------------------


@router.post(BASE, response_model=ContextInfo, summary="Create a named context from a prompt or a chat")
async def create(body: ContextCreate, request: Request, service: ServiceDep) -> dict[str, Any]:
    store = _store(service)
    if (body.prompt is None) == (body.messages is None):
        raise bad_request("give either `prompt` or `messages`", "prompt")
    if body.n != 1:
        raise bad_request("a context has one continuation: n must be 1", "n")
    with store.reserve(body.name):
        check_room(service)  # before the prompt is rendered and tokenized
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
        ctx = Context(body.name, tokens, Pin(_adopt(ch.job), service.scheduler), int(time.time()))
        store.put(ctx)
    return ctx.info(gen.text(0) if body.max_tokens else None, gen.usage())


@router.get(BASE, response_model=ContextList, summary="List the named contexts")
async def list_contexts(service: ServiceDep) -> dict[str, Any]:
    return {"object": "list", "data": [c.info() for c in _store(service).items.values()]}


@router.get(BASE + "/{name}", response_model=ContextInfo, summary="One context")
async def get_context(name: Name, service: ServiceDep) -> dict[str, Any]:
    return _store(service).get(name).info()


@router.delete(BASE + "/{name}", response_model=ContextDeleted,
               summary="Delete a context (its pages are released once nothing else holds them)")  # fmt: skip
async def delete(name: Name, service: ServiceDep) -> dict[str, Any]:
    _store(service).drop(name)
    return {"name": name, "deleted": True}


@router.post(BASE + "/{name}/fork", response_model=ContextInfo,
             summary="Fork a context under a new name (copy-on-write)")  # fmt: skip
async def fork(body: ContextFork, name: Name, service: ServiceDep) -> dict[str, Any]:
    store = _store(service)
    src = store.get(name)
    with store.reserve(body.name):
        ctx = Context(body.name, list(src.tokens), src.pin.hold(), int(time.time()))
        store.put(ctx)
    return ctx.info()


# -- snapshots ------------------------------------------------------------------------------------------------


@router.post(BASE + "/{name}/snapshot", response_model=SnapshotInfo, responses=STORAGE_FULL,
             summary="Save a context's KV and tokens to a snapshot file (within the quota)")  # fmt: skip
async def snapshot(name: Name, service: ServiceDep) -> dict[str, Any]:
    ctx = _store(service).get(name)
    pin = ctx.pin.hold()
    fingerprint, tokens = service.model_fingerprint, list(ctx.tokens)
    try:
        # the file's size is known from the pin: a quota it would pass is refused before any work
        nbytes = snapshot_file.size(service.scheduler.state, pin.snapshot, len(tokens), name)
        async with service.snapshots.reserving(nbytes) as sid:

            def encode(st: Any) -> bytes:  # on the model thread: it reads the KV cache
                return snapshot_file.encode(st, pin.snapshot, fingerprint, context=tokens, label=name)

            data = await asyncio.wrap_future(service.scheduler.call(encode))
            entry = await service.snapshots.write(sid, data)
    finally:
        pin.let_go()
    return {"snapshot": entry.id, "context": name, "n_tokens": len(tokens), "bytes": entry.bytes,
            "created": entry.created}  # fmt: skip


@router.post(BASE + "/{name}/restore", response_model=ContextInfo,
             summary="Restore a snapshot into a context (created, or replaced)")  # fmt: skip
async def restore(body: ContextRestore, name: Name, service: ServiceDep) -> dict[str, Any]:
    store = _store(service)
    with store.reserve(name, replace=True):
        saved = await asyncio.to_thread(_read, service, body.snapshot)
        sched = service.scheduler

        def load(st: Any) -> Any:  # on the model thread; the sequence is given back whatever happens
            try:
                with st.kv.borrowed() as seq:
                    snapshot_file.install(st, saved, seq)
                    return st.kv.snapshot(seq)  # its whole pages also go to the prefix cache
            except OutOfPages as e:
                hint = "; delete some contexts" if st.kv.snapshots else ""
                raise JobFailed(f"the snapshot does not fit the KV cache now: {e}; {sched.describe_pages()}{hint}",
                                503, "kv_cache_full") from None  # fmt: skip

        try:
            snap = await _owned(sched.call(load, needs_sequence=True), lambda x: sched.call(lambda st: st.kv.drop(x)))
        except JobFailed as e:
            raise ApiError(e.status, str(e), code=e.code) from None
        ctx = Context(name, saved.context, Pin(snap, sched), int(time.time()))
        store.put(ctx)
    return ctx.info()


def _read(service: Service, sid: str) -> snapshot_file.Saved:
    """Read and check a whole snapshot file (in a worker thread): nothing is allocated for a bad one."""
    path = service.snapshots.path(sid)
    if not path.is_file():
        raise ApiError(404, f"no snapshot {sid!r}", param="snapshot", code="snapshot_not_found")
    try:
        return snapshot_file.read(path, service.snapshot_layout, service.model_fingerprint)
    except snapshot_file.SnapshotFileError as e:  # the message names the field; the client knows the id, not the path
        raise bad_request(str(e).replace(str(path), f"snapshot {sid}"), "snapshot", "invalid_snapshot") from None


@router.get(SNAPSHOTS, response_model=SnapshotList, summary="List the snapshot files and the quota")
async def list_snapshots(service: ServiceDep) -> dict[str, Any]:
    return await service.snapshots.list()


@router.get(SNAPSHOTS + "/{snapshot}", response_model=SnapshotInfo, summary="One snapshot file")
async def get_snapshot(snapshot: SnapshotId, service: ServiceDep) -> dict[str, Any]:
    return await service.snapshots.info(snapshot)


@router.delete(SNAPSHOTS + "/{snapshot}", response_model=SnapshotDeleted, summary="Delete a snapshot file")
async def delete_snapshot(snapshot: SnapshotId, service: ServiceDep) -> dict[str, Any]:
    await service.snapshots.delete(snapshot)
    return {"snapshot": snapshot, "deleted": True}


# -- continue -------------------------------------------------------------------------------------------------


@router.post(BASE + "/{name}/completions", response_model=ContextCompletion,
             summary="Continue a context: its tokens + `prompt`, then generate (SSE with `stream: true`)",
             responses={200: {"content": {"text/event-stream": {}}}})  # fmt: skip
async def continue_context(body: ContextContinue, request: Request, name: Name,
                           service: ServiceDep):  # fmt: skip
    store = _store(service)
    ctx = store.get(name)
    if body.n != 1:
        raise bad_request("a context continues one way at a time: n must be 1 (fork it for more)", "n")
    check_room(service)  # before the prompt is tokenized
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
            store.put(Context(name, ids + ch.tokens, Pin(_adopt(ch.job), service.scheduler), ctx.created))
        elif ch.job.kept is not None:
            _discard(service, ch.job)
        return store.items[name].info() if name in store.items else {"name": name, "deleted": True}

    if body.stream:  # a reply not streamed to its end leaves the context as it was (what it kept is dropped)
        return sse_response(sse_stream(_chunks(service, gen, head, advance)), gen,
                            lambda: _discard(service, gen.choices[0].job))  # fmt: skip
    try:
        await gen.collect(request.is_disconnected)
        await _settled(service)
        if gen.choices[0].finish == "cancelled":  # its client went away: nobody got the reply, the context stays
            raise ApiError(503, "the continuation was cancelled before its reply", code="cancelled")
    except BaseException:
        _discard(service, gen.choices[0].job)
        raise
    info = advance()
    choice = {"index": 0, "text": gen.text(0), "logprobs": None, "finish_reason": gen.choices[0].finish}
    return {**head, "object": "text_completion", "choices": [choice], "usage": gen.usage(), "context": info}


async def _chunks(service: Service, gen: Generation, head: dict[str, Any], advance: Any) -> AsyncIterator[dict]:
    async for piece in gen.pieces():
        if piece.text or piece.finish:
            yield {**head, "object": "text_completion", "choices": [{"index": 0, "text": piece.text,
                   "logprobs": None, "finish_reason": piece.finish}]}  # fmt: skip
    await _settled(service)
    yield {**head, "object": "text_completion", "choices": [], "usage": gen.usage(), "context": advance()}
