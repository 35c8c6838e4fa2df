"""The models a server answers for, by name, as Ollama serves them: loaded on first use, kept for `keep_alive`
after their last request, unloaded when idle past it, and within a memory budget.

The resident model (`-m`, else the default) is loaded at start and stays for the server's lifetime: the named
contexts, /tokenize and /health are its. With a store (any `-m` but a file path), every model of llamay's and
Ollama's stores is served by its name besides: each loads, off the event loop, into a Service of its own (its
scheduler, its model thread) the first time a request names it; requests for it meanwhile wait for that one
load, and a failed load fails only them. A request holds a `Lease` on its model until its last byte is sent;
a model with leases is never unloaded. Before a load, the least recently used idle models are unloaded until
the new one fits `--max-loaded` (models, the resident one counted) and `--memory` (bytes: weights and KV); if
the busy ones leave no room, 503 with Retry-After. A name no model has is a 404 listing those available, or
with `--any-model-name` (`any_name`) the resident model, on every route. Without a store (`-m FILE`) there is
the one model, which answers to any name as llama-server's does (Service.resolve).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from llamay.errors import LlamayError

from .errors import ApiError, bad_request
from .keep_alive import FOREVER
from .service import ServedModel, Service

log = logging.getLogger("llamay.server")
FOREVER_STAMP = "9999-12-31T23:59:59Z"  # expires_at of a model loaded for the server's lifetime
RETRY_SECONDS = "1"
MAX_TICK = 60.0  # seconds the reaper sleeps at most between looks (woken at once by any change)


def kv_bytes(service: Service) -> int:
    """Bytes of a service's KV cache (every group's keys and values)."""
    groups = service.scheduler.state.kv.groups
    return sum(getattr(g.k, "nbytes", 0) + getattr(g.v, "nbytes", 0) for g in groups)


def loaded_size(service: Service) -> int:
    """What a loaded model takes: its GGUF's bytes (mapped) and its KV cache."""
    return int(service.generator.details["size"]) + kv_bytes(service)


def stamp(t: float) -> str:
    """An ISO time (UTC, `Z`) of a wall-clock time, or FOREVER_STAMP."""
    if math.isinf(t):
        return FOREVER_STAMP
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Loaded:
    """A model in memory."""

    name: str  # name:tag for a stored model, the file stem for a file
    service: Service
    size: int
    resident: bool = False
    leases: int = 0
    keep_alive: float = FOREVER  # seconds after its last request (FOREVER: never)
    last_used: float = field(default_factory=time.time)

    @property
    def expires(self) -> float:
        """Wall-clock time it may be unloaded at (FOREVER while resident or kept forever; a busy model's is its
        keep_alive from now: it cannot go before)."""
        if self.resident or math.isinf(self.keep_alive):
            return FOREVER
        return (time.time() if self.leases else self.last_used) + self.keep_alive


@dataclass
class Available:
    """A model the server can answer for (/api/tags, /v1/models)."""

    name: str
    size: int
    digest: str  # Ollama's ID: the manifest's SHA-256 (a file's: over its fingerprint)
    modified: float
    details: dict[str, Any]


class Lease:
    """A request's hold on a loaded model: released once (by the request's end, or its stream's)."""

    def __init__(self, pool: ModelPool, entry: Loaded, model: ServedModel) -> None:
        self.pool, self.entry, self.model = pool, entry, model
        self.service = entry.service
        self._released = False
        self._handed = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.pool._release(self.entry)

    def done(self) -> None:
        """The handler's end: the lease goes, unless a stream now holds it (`stream`)."""
        if not self._handed:
            self.release()

    def hand_over(self) -> Callable[[], None]:
        """The lease goes to a stream the handler returns: held until the stream's clean-up calls what this
        returns (`streaming.Stream`: once its last byte is sent, or its client is gone, even before the first)."""
        self._handed = True
        return self.release


Loader = Callable[[Any], Service]  # a llamay.native.store.Resolved -> a started Service


class ModelPool:
    def __init__(self, resident: Service, *, store: bool = False, keep_alive: float = 300.0,
                 max_loaded: int | None = None, memory: int | None = None, loader: Loader | None = None,
                 any_name: bool = False) -> None:  # fmt: skip
        self.resident = Loaded(resident.generator.id, resident, loaded_size(resident), resident=True)
        self.store = store  # answer for stored models by name (else: the resident model for any name)
        self.any_name = any_name  # --any-model-name: a name no model has is the resident model's (else 404)
        # the routes only the resident serves: by its own names (unless any_name: then `resident_only` looked)
        resident.own_names_only = store and not any_name
        self.default_keep_alive = keep_alive
        self.max_loaded = max_loaded
        self.memory = memory
        self._loader = loader
        self.loaded: dict[str, Loaded] = {}  # by name, the resident model not among them
        self._loading: dict[str, asyncio.Task[Loaded]] = {}
        self._reserved: dict[str, int] = {}  # estimated bytes of the models being loaded
        self._wanted: dict[str, int] = {}  # requests waiting for a model's load
        self._changed: asyncio.Event | None = None
        self._reaper: asyncio.Task[None] | None = None

    # -- life cycle -----------------------------------------------------------------------------------------

    def start(self) -> None:
        """The reaper of idle models (on the running event loop)."""
        self._changed = asyncio.Event()
        self._reaper = asyncio.get_running_loop().create_task(self._reap(), name="llamay-model-reaper")

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for name in list(self.loaded):
            await asyncio.to_thread(_close, self.loaded.pop(name).service)

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def _reap(self) -> None:
        assert self._changed is not None
        while True:
            self._changed.clear()  # before looking: a change from here on wakes the wait below
            now = time.time()
            for name, e in list(self.loaded.items()):
                if self._idle(e) and e.expires <= now:
                    await self.unload(name)
            nxt = min((e.expires for e in self.loaded.values() if self._idle(e)), default=FOREVER)
            wait = min(max(nxt - time.time(), 0.0), MAX_TICK)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait)

    def _idle(self, e: Loaded) -> bool:
        return e.leases == 0 and e.name not in self._wanted

    async def unload(self, name: str) -> bool:
        """Unload an idle loaded model (off the event loop); False if it is busy or not loaded."""
        e = self.loaded.get(name)
        if e is None or not self._idle(e):
            return False
        del self.loaded[name]
        log.info("unloading %s", name)
        try:
            await asyncio.to_thread(_close, e.service)
        except Exception:  # its threads are stopped; what could not be closed goes with the last reference
            log.exception("unloading %s", name)
        return True

    # -- names ----------------------------------------------------------------------------------------------

    def all_loaded(self) -> list[Loaded]:
        return [self.resident, *self.loaded.values()]

    def _resident_for(self, name: str | None, kind: str) -> ServedModel | None:
        svc = self.resident.service
        if name is None or not name:
            return svc.resolve(None, kind)
        if any(m.matches(name) for m in svc.models):
            return svc.resolve(name, kind)
        return None

    async def lease(self, name: str | None, kind: str, keep_alive: float | None = None,
                    ollama: bool = True) -> Lease:  # fmt: skip
        """The model `name` names for a route of `kind` ("generate" or "embed"), loaded if need be, held until
        the lease is released; `keep_alive` in seconds (None: the server's default); `ollama`: the route's
        family, for the 404's wording."""
        if not self.store:
            return self._take(self.resident, self.resident.service.resolve(name, kind), keep_alive)
        served = self._resident_for(name, kind)
        if served is not None:
            return self._take(self.resident, served, keep_alive)
        assert name is not None
        resolved = await asyncio.to_thread(_find, name)
        if resolved is None:
            if self.any_name:  # --any-model-name: the resident model answers, and its reply names it
                return self._take(self.resident, self.resident.service.resolve(None, kind), keep_alive)
            raise await self.unknown(name, ollama)
        if resolved.name == self.resident.name:  # the resident model by another spelling (`alpha`, `library/alpha`)
            return self._take(self.resident, self.resident.service.resolve(resolved.name, kind), keep_alive)
        if kind == "embed":
            raise bad_request(f"{resolved.name} is a stored model: this server's embeddings come from its "
                              "--embedding-model only", "model", "model_not_embedding")  # fmt: skip
        entry = self.loaded.get(resolved.name)
        if entry is None:
            self._wanted[resolved.name] = self._wanted.get(resolved.name, 0) + 1  # not unloaded before it is taken
            try:
                entry = await self._load(resolved)
            finally:
                self._wanted[resolved.name] -= 1
                if not self._wanted[resolved.name]:
                    del self._wanted[resolved.name]
        return self._take(entry, entry.service.generator, keep_alive)

    async def resident_only(self, name: str | None, kind: str) -> ServedModel:
        """The model of a route only the resident model serves (llama-server's routes, /v1/responses): by its own
        names, or none; a stored model's name is a 404 naming the routes that serve it; any other name is a 404
        too, or with --any-model-name the resident model (as `lease` answers it)."""
        svc = self.resident.service
        if not self.store or not name:
            return svc.resolve(name, kind)
        served = self._resident_for(name, kind)
        if served is not None:
            return served
        resolved = await asyncio.to_thread(_find, name)
        if resolved is not None and resolved.name == self.resident.name:
            return svc.resolve(resolved.name, kind)
        if resolved is not None:
            raise ApiError(404, f"{resolved.name} is a stored model, but this route serves the resident model "
                           f"{self.resident.name} only: ask /v1/chat/completions, /v1/completions or Ollama's "
                           "/api/generate and /api/chat for it", param="model", code="model_not_found")  # fmt: skip
        if self.any_name:
            return svc.resolve(None, kind)
        raise await self.unknown(name, ollama=False)

    async def unknown(self, name: str, ollama: bool) -> ApiError:
        """The 404 of a name no model has, listing the models that are available (off the event loop)."""
        names = [a.name for a in await asyncio.to_thread(self.available)]
        return not_found(name, ollama, names)

    def _take(self, e: Loaded, model: ServedModel, keep_alive: float | None) -> Lease:
        ka = self.default_keep_alive if keep_alive is None else keep_alive
        if e.resident and ka == 0:
            raise bad_request(f"keep_alive 0 asks to unload {e.name}, the server's resident model (-m): it stays "
                              "loaded for the server's lifetime", "keep_alive")  # fmt: skip
        e.keep_alive = ka
        e.leases += 1
        e.last_used = time.time()
        return Lease(self, e, model)

    def _release(self, e: Loaded) -> None:
        e.leases -= 1
        e.last_used = time.time()
        self._wake()

    # -- loading --------------------------------------------------------------------------------------------

    async def _load(self, resolved: Any) -> Loaded:
        """The loaded model `resolved` names: one load per name, in a task of its own (a request that goes away
        meanwhile does not cancel it: the others still wait for it, and what it made is kept or released)."""
        name = resolved.name
        task = self._loading.get(name)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._do_load(resolved), name=f"llamay-load-{name}")
            self._loading[name] = task
        return await asyncio.shield(task)

    async def _do_load(self, resolved: Any) -> Loaded:
        name = resolved.name
        try:
            estimate = resolved.path.stat().st_size
            await self._make_room(name, estimate)
            self._reserved[name] = estimate
            assert self._loader is not None
            service = await asyncio.to_thread(self._loader, resolved)
            entry = Loaded(name, service, loaded_size(service), keep_alive=self.default_keep_alive)
            del self._reserved[name]
            try:  # the estimate was the file's size: with its KV cache, more may have to make room
                await self._make_room(name, entry.size)
            except BaseException:
                await asyncio.to_thread(_close, service)
                raise
            self.loaded[name] = entry
            log.info("loaded %s", name)
            return entry
        except ApiError:
            raise
        except Exception as e:
            raise load_error(name, e) from None
        finally:
            self._reserved.pop(name, None)
            del self._loading[name]
            self._wake()

    async def _make_room(self, name: str, estimate: int) -> None:
        """Unload least recently used idle models until one more of `estimate` bytes fits; else 503."""
        while not self._fits(estimate):
            idle = sorted((e for e in self.loaded.values() if self._idle(e)), key=lambda e: e.last_used)
            if not idle:
                busy = ", ".join(e.name for e in self.loaded.values()) or "none"
                raise ApiError(503, f"no room to load {name} ({estimate:,} bytes): {self._budget_text()} is taken by "
                               f"the resident model {self.resident.name} ({self.resident.size:,} bytes) and models "
                               f"with requests running ({busy}); retry later", code="model_budget_full",
                               headers={"Retry-After": RETRY_SECONDS})  # fmt: skip
            await self.unload(idle[0].name)

    def _fits(self, estimate: int) -> bool:
        count = 1 + len(self.loaded) + len(self._reserved)
        used = sum(e.size for e in self.all_loaded()) + sum(self._reserved.values())
        if self.max_loaded is not None and count + 1 > self.max_loaded:
            return False
        return self.memory is None or used + estimate <= self.memory

    def _budget_text(self) -> str:
        parts = []
        if self.max_loaded is not None:
            parts.append(f"--max-loaded {self.max_loaded}")
        if self.memory is not None:
            parts.append(f"--memory {self.memory:,} bytes")
        return " and ".join(parts)

    # -- listing --------------------------------------------------------------------------------------------

    def available(self) -> list[Available]:
        """The resident model, then every stored model (when serving the store), by name (blocking: call it on a
        thread)."""
        svc = self.resident.service
        out = [served_entry(m) for m in svc.models]
        if not self.store:
            return out
        seen = {a.name for a in out} | {m.id for m in svc.models}
        for a in _stored():
            if a.name not in seen:
                seen.add(a.name)
                out.append(a)
        return out


SHOWN_NAMES = 8  # available models a 404 lists at most


def not_found(name: str, ollama: bool, available: list[str] | None = None) -> ApiError:
    """Ollama's words for an unknown model on its routes, OpenAI's on theirs; then the models available (the
    first SHOWN_NAMES) and how to serve any name."""
    listed = ""
    if available is not None:
        more = f" and {len(available) - SHOWN_NAMES} more" if len(available) > SHOWN_NAMES else ""
        listed = (f"; available: {', '.join(available[:SHOWN_NAMES])}{more} (llamay serve --any-model-name serves "
                  "any other name with the resident model)")  # fmt: skip
    if ollama:
        return ApiError(404, f"model '{name}' not found, try pulling it first{listed}", param="model",
                        code="model_not_found")  # fmt: skip
    return ApiError(404, f"The model `{name}` does not exist: it is neither loaded nor in a model store (`llamay "
                    f"list` shows them){listed}", param="model", code="model_not_found")  # fmt: skip


def load_error(name: str, e: BaseException) -> ApiError:
    why = str(e) if isinstance(e, LlamayError | OSError) else f"{type(e).__name__}: {e}"
    if not isinstance(e, LlamayError | OSError):
        log.error("loading %s failed", name, exc_info=e)
    return ApiError(500, f"{name} could not be loaded: {why}", param="model", code="model_load_failed")


def _close(service: Service) -> None:
    service.stop()
    for m in service.models:
        m.model.close()


def _find(name: str) -> Any:
    """The stored model `name` names (llamay's store, then Ollama's), or None."""
    from llamay.native.store.resolve import find_stored

    try:
        return find_stored(name)
    except LlamayError as e:  # a damaged manifest: the model cannot be served
        raise ApiError(500, f"{name}: {e}", param="model", code="model_load_failed") from None


def served_entry(m: ServedModel) -> Available:
    d = m.details
    return Available(m.id, d["size"], m.digest.removeprefix("sha256:"), d["modified_at"],
                     {k: d[k] for k in ("parent_model", "format", "family", "families", "parameter_size",
                                        "quantization_level")})  # fmt: skip


def _stored() -> list[Available]:
    from llamay.native.store import listing

    from .store_show import config_details

    return [Available(x.name.short, x.size, x.digest, x.modified, config_details(x.store, x.manifest))
            for x in listing() if not x.problems]  # fmt: skip


def stored_loader(backend: str | None = None, threads: int = 0, **service_kw: Any) -> Loader:
    """A Loader of stored models as `llamay serve` loads its resident one: the blob held while it is opened,
    the model's TEMPLATE, SYSTEM, MESSAGE and PARAMETER layers applied, its model thread started. A failure
    anywhere releases what was made (the model's mapping, the service's threads and folder)."""

    def load(resolved: Any) -> Service:
        opts = resolved.options
        kw = {**service_kw, "n_ctx": service_kw.get("n_ctx") or opts.num_ctx}
        with resolved.held() as path:
            service = Service.load(path, backend=backend, name=resolved.name, defaults=opts, **kw)
        try:
            resolved.apply(service.generator.model)
            be = service.generator.model.backend
            n = threads or opts.num_thread
            if n and hasattr(be, "set_threads"):
                be.set_threads(n)
            service.start()
        except BaseException:
            _close(service)
            raise
        return service

    return load
