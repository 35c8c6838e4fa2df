"""llama-server's `/props` and `/slots`, over llamay's sequences and named contexts.

A slot is one of the scheduler's sequences (`--parallel`). Its prompt cache is the named context `slot-{id}`:
a /completion with `id_slot` keeps its prompt and reply there (the next one with that slot starts from those
pages, as llama-server's slot would), `?action=save` writes it to a snapshot file named after `filename` in the
snapshot folder (`--snapshot-dir`, within its quota; listed by /llamay/snapshots), `restore` reads one back
into the slot, `erase` drops it. Filenames are one path component (no `/`, no `..`): a file outside the
folder cannot be named.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query

from llamay.kv import snapshot_file
from llamay.kv.pages import OutOfPages

from .bodies import StrictJsonRoute
from .context_store import Context
from .contexts import _owned
from .deps import ServiceDep
from .errors import ApiError, bad_request
from .llamacpp_prompts import generation_settings
from .llamacpp_routes import slot_name
from .llamacpp_schemas import SlotFile
from .scheduler import JobFailed, Pin
from .schemas import ErrorResponse
from .service import Service
from .snapshot_store import FULL

router = APIRouter(tags=["llama.cpp"], route_class=StrictJsonRoute)
SlotId = Annotated[int, Path(ge=0, description="the slot (a sequence: 0 to --parallel - 1)",
                             json_schema_extra={"x-llamay": "slot-id"})]  # fmt: skip
STORAGE_FULL = {FULL: {"model": ErrorResponse, "description": "the snapshot quota (or the disk) is full"}}


def default_settings(service: Service) -> dict[str, Any]:
    """The settings a /completion runs with when it sets nothing: the sampler's defaults under a stored model's
    PARAMETERs."""
    d = getattr(service, "defaults", None)
    sampling = dict(d.sampler) if d is not None else {}
    seed = sampling.pop("seed", None)
    stop = tuple(d.stop) if d is not None else ()
    return generation_settings(sampling, seed, n_predict=-1, stop=stop, n_ctx=service.n_ctx,
                               extra={"model": service.generator.id, "stream": False, "n_probs": 0, "n_keep": 0,
                                      "grammar": "", "timings_per_token": False, "post_sampling_probs": False,
                                      "cache_prompt": True, "lora": []})  # fmt: skip


def _busy(service: Service, i: int) -> bool:
    return bool(service.scheduler.state.kv.sequences[i].active)


def _slot(service: Service, i: int, defaults: dict[str, Any]) -> dict[str, Any]:
    ctx = service.contexts.items.get(slot_name(i))
    return {
        "id": i,
        "id_task": -1,
        "n_ctx": service.n_ctx,
        "speculative": False,
        "is_processing": _busy(service, i),
        "params": service.slot_params.get(i, defaults),
        "prompt": "",
        "next_token": {"has_next_token": _busy(service, i), "n_remain": -1, "n_decoded": 0, "stopping_word": ""},
        "n_cached": len(ctx.tokens) if ctx is not None else 0,  # llamay: the tokens of the slot's prompt cache
    }


@router.get("/props", summary="The server's properties (llama-server's shape)")
async def props(service: ServiceDep) -> dict[str, Any]:
    tok = service.tokenizer
    defaults = default_settings(service)
    source = tok.chat_template_source or ""
    return {
        "default_generation_settings": {**_slot(service, 0, defaults), "is_processing": False, "params": defaults},
        "total_slots": service.scheduler.cfg.n_seq,
        "model_path": str(service.generator.path),
        "model_alias": service.generator.id,
        "chat_template": source,
        "chat_template_caps": {
            "supports_tools": True,  # every model: its own syntax or the generic format
            "supports_system_role": "system" in source,
        },
        "bos_token": tok.token_text(tok.bos_id) if tok.bos_id is not None else "",
        "eos_token": tok.token_text(tok.eos_id) if tok.eos_id is not None else "",
        "modalities": {"vision": False, "audio": False},
        "build_info": f"llamay {service.version}",
        "is_sleeping": False,
    }


@router.post("/props", include_in_schema=False)  # (no operation to describe: every request is refused)
async def change_props() -> None:
    """llama-server changes its settings here only when started with `--props` (else it answers 501, as this
    does); llamay's are its command-line options and a request's own fields."""
    raise ApiError(501, "changing the server's properties (POST /props) is not supported: llamay's settings are "
                   "its command-line options, and each request may set its own sampling fields",
                   code="not_supported", type="not_supported_error")  # fmt: skip


@router.get("/slots", summary="Each slot (sequence): busy or idle, its last settings, its cached tokens")
async def slots(service: ServiceDep, fail_on_no_slot: Annotated[int, Query(ge=0, le=1)] = 0) -> list[dict[str, Any]]:
    defaults = default_settings(service)
    out = [_slot(service, i, defaults) for i in range(service.scheduler.cfg.n_seq)]
    if fail_on_no_slot and all(s["is_processing"] for s in out):
        raise ApiError(503, "no slot is available", code="no_slot_available")
    return out


def slot_file_id(filename: str) -> str:
    """The snapshot id a slot file is stored under (the store's names are ids; the filename is its label)."""
    return hashlib.sha256(b"llama-server slot\0" + filename.encode()).hexdigest()[:32]


@router.post("/slots/{id_slot}", summary="A slot's prompt cache: ?action=save, restore (a file) or erase",
             responses=STORAGE_FULL)  # fmt: skip
async def slot_action(id_slot: SlotId, service: ServiceDep,
                      action: Annotated[Literal["save", "restore", "erase"], Query()],
                      body: SlotFile | None = None) -> dict[str, Any]:  # fmt: skip
    n = service.scheduler.cfg.n_seq
    if id_slot >= n:
        raise bad_request(f"slot {id_slot} does not exist: the server has {n} slots (--parallel)", "id_slot",
                          "invalid_slot")  # fmt: skip
    if action == "erase":
        ctx = service.contexts.items.get(slot_name(id_slot))
        if ctx is not None:
            service.contexts.drop(ctx.name)
        service.slot_params.pop(id_slot, None)
        return {"id_slot": id_slot, "n_erased": len(ctx.tokens) if ctx is not None else 0}
    if body is None or body.filename is None:
        raise bad_request(f"action={action} needs a body with `filename`", "filename", "conflicting_fields")
    if action == "save":
        return await _save(service, id_slot, body.filename)
    return await _restore(service, id_slot, body.filename)


async def _save(service: Service, i: int, filename: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    ctx = service.contexts.items.get(slot_name(i))
    if ctx is None:
        raise bad_request(f"slot {i} holds no prompt cache: run a /completion with id_slot {i} first", "id_slot",
                          "slot_empty")  # fmt: skip
    pin = ctx.pin.hold()
    tokens = list(ctx.tokens)
    try:
        nbytes = snapshot_file.size(service.scheduler.state, pin.snapshot, len(tokens), filename)
        async with service.snapshots.reserving(nbytes, slot_file_id(filename)) as sid:

            def encode(st: Any) -> bytes:  # on the model thread: it reads the KV cache
                return snapshot_file.encode(st, pin.snapshot, service.model_fingerprint, context=tokens,
                                            label=filename)  # fmt: skip

            data = await asyncio.wrap_future(service.scheduler.call(encode))
            entry = await service.snapshots.write(sid, data)
    finally:
        pin.let_go()
    return {"id_slot": i, "filename": filename, "n_saved": len(tokens), "n_written": entry.bytes,
            "timings": {"save_ms": (time.perf_counter() - t0) * 1e3}}  # fmt: skip


async def _restore(service: Service, i: int, filename: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    sid = slot_file_id(filename)
    path = service.snapshots.path(sid)

    def read() -> tuple[snapshot_file.Saved, int]:
        if not path.is_file():
            raise ApiError(404, f"no slot file {filename!r} in the snapshot folder", param="filename",
                           code="slot_file_not_found")  # fmt: skip
        try:
            return snapshot_file.read(path, service.snapshot_layout, service.model_fingerprint), path.stat().st_size
        except snapshot_file.SnapshotFileError as e:
            raise bad_request(str(e).replace(str(path), filename), "filename", "invalid_snapshot") from None

    saved, n_read = await asyncio.to_thread(read)
    sched = service.scheduler

    def load(st: Any) -> Any:  # on the model thread; the borrowed sequence is given back whatever happens
        try:
            with st.kv.borrowed() as seq:
                snapshot_file.install(st, saved, seq)
                return st.kv.snapshot(seq)
        except OutOfPages as e:
            raise JobFailed(f"the slot file does not fit the KV cache now: {e}; {sched.describe_pages()}", 503,
                            "kv_cache_full") from None  # fmt: skip

    try:
        snap = await _owned(sched.call(load, needs_sequence=True), lambda x: sched.call(lambda st: st.kv.drop(x)))
    except JobFailed as e:
        raise ApiError(e.status, str(e), code=e.code) from None
    service.contexts.put(Context(slot_name(i), list(saved.context), Pin(snap, sched), int(time.time())))
    return {"id_slot": i, "filename": filename, "n_restored": len(saved.context), "n_read": n_read,
            "timings": {"restore_ms": (time.perf_counter() - t0) * 1e3}}  # fmt: skip
