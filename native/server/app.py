"""The ASGI app: routers, OpenAPI metadata, the optional API key, the request guard (Host, Origin, CORS, body
type and size: `guard.py`), the offline docs, and OpenAI-style error bodies for every 4xx and 5xx (validation
errors and malformed JSON included), so that a bad request never takes the server down."""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from llamay import __version__
from llamay.errors import LlamayError

from . import contexts, llamacpp_routes, llamacpp_slots, ollama_routes, openai_routes, store_routes
from .bodies import StrictJsonRoute
from .deps import PoolDep, ServiceDep
from .docs_page import docs_router
from .errors import STATUSES, ApiError, bad_request, error_body, error_type, validation_errors
from .guard import Guard, GuardConfig
from .openapi import openapi
from .pool import ModelPool
from .request_log import RequestLog
from .schemas import (
    DetokenizeRequest,
    DetokenizeResponse,
    ErrorResponse,
    Health,
    TokenizeRequest,
    TokenizeResponse,
)
from .service import Service
from .store_routes import DEFAULT_MAX_BLOB_BYTES

log = logging.getLogger("llamay.server")

DESCRIPTION = """\
A GGUF language model served with continuous batching: OpenAI- and Ollama-compatible routes, named contexts
(KV snapshots you can fork, save, restore and continue), tokenization and Prometheus metrics.

Every error is answered with an OpenAI-style body, `{"error": {"message", "type", "param", "code"}}`, but on the
Ollama routes (`/api/...`), which answer as Ollama does: `{"error": "message"}`.
A full queue answers 429 with `Retry-After`. Streaming uses SSE (`data: ...`, ending in `data: [DONE]`) on the
OpenAI routes and NDJSON on the Ollama routes.
"""
TAGS = [
    {"name": "OpenAI", "description": "OpenAI-compatible API (`/v1`)."},
    {"name": "Ollama", "description": "Ollama-compatible API (`/api`)."},
    {"name": "llama.cpp", "description": "llama-server's own routes (`/completion`, `/props`, `/slots`...)."},
    {"name": "Contexts", "description": "Named KV contexts: create, fork, snapshot, restore, continue, delete."},
    {"name": "Server", "description": "Health, metrics, tokenization."},
]
ERRORS = {code: {"model": ErrorResponse} for code in STATUSES}
CORS_METHODS = ("GET", "POST", "DELETE", "OPTIONS")
CORS_HEADERS = ("Authorization", "Content-Type", "OpenAI-Organization", "OpenAI-Project")  # what clients send
CORS_EXPOSE = ("Retry-After", "WWW-Authenticate")


def create_app(service: Service, api_key: str | None = None, *, bound: str = "127.0.0.1",
               allowed_hosts: tuple[str, ...] = (), cors_origins: tuple[str, ...] = (),
               pool: ModelPool | None = None, max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES) -> FastAPI:  # fmt: skip
    """The app for `service` (the resident model); `bound` is the address the server listens on (the Host check
    admits it), `allowed_hosts` and `cors_origins` are --allowed-host and --cors-origin; `pool` the models it
    answers for by name (default: `service`'s alone, under any name); `max_blob_bytes` is --max-blob-bytes."""
    pool = pool or ModelPool(service)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if not service.scheduler.alive:
            service.start()
        pool.start()
        yield
        await pool.stop()
        service.stop()

    app = FastAPI(title="llamay", version=__version__, description=DESCRIPTION, openapi_tags=TAGS,
                  lifespan=lifespan, responses=ERRORS, docs_url=None, redoc_url=None,
                  openapi_url=None)  # fmt: skip
    app.state.service = service
    app.state.pool = pool
    app.state.max_blob_bytes = max_blob_bytes
    key = [Depends(_bearer(api_key))] if api_key else []
    # the management routes write the store: only a server serving it has them (one of `-m FILE` has no store)
    stored = [store_routes] if pool.store else []
    for module in (openai_routes, ollama_routes, contexts, llamacpp_routes, llamacpp_slots, *stored):
        app.include_router(module.router, dependencies=key)
    app.include_router(_server_router(), dependencies=key)
    app.add_api_route("/health", health, methods=["GET"], response_model=Health, tags=["Server"],
                      summary="200 ok while the model thread runs and the KV accounting is exact; else 503 degraded",
                      responses={503: {"model": Health}})  # fmt: skip
    app.include_router(docs_router(lambda: openapi(app, service), api_key, app.title))
    _add_error_handlers(app)
    if cors_origins:  # inside the guard: only origins it let through get here
        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=CORS_METHODS,
                           allow_headers=CORS_HEADERS, expose_headers=CORS_EXPOSE,
                           allow_private_network=True)  # fmt: skip
    config = GuardConfig(bound=bound, allowed_hosts=tuple(allowed_hosts), cors_origins=tuple(cors_origins),
                         max_body_bytes=service.limits.max_body_bytes)  # fmt: skip
    app.add_middleware(Guard, config=config)
    app.add_middleware(RequestLog, metrics=service.metrics)  # outermost: every request, the guard's refusals too
    app.openapi = lambda: openapi(app, service)  # type: ignore[method-assign]
    return app


# -- auth -----------------------------------------------------------------------------------------------------


def _bearer(api_key: str):
    scheme = HTTPBearer(auto_error=False, description="the server's --api-key")

    async def check(creds: HTTPAuthorizationCredentials | None = Depends(scheme)) -> None:  # noqa: B008
        if creds is None or not hmac.compare_digest(creds.credentials.encode(), api_key.encode()):
            raise ApiError(401, "a valid API key is needed: `Authorization: Bearer KEY`", code="invalid_api_key",
                           headers={"WWW-Authenticate": "Bearer"})  # fmt: skip

    return check


# -- server routes --------------------------------------------------------------------------------------------


async def health(service: ServiceDep) -> Any:
    status, body = service.health()
    return JSONResponse(body, status_code=status) if status != 200 else body


def _server_router():
    from fastapi import APIRouter

    router = APIRouter(tags=["Server"], route_class=StrictJsonRoute)

    @router.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics (text format)")
    async def metrics(service: ServiceDep) -> str:
        return service.metrics.render()

    @router.post("/tokenize", response_model=TokenizeResponse, summary="Text to token ids (the generative model)")
    async def tokenize(body: TokenizeRequest, pool: PoolDep) -> Any:
        lease = await pool.lease(body.model, "generate", ollama=False)
        try:  # built and serialized on a preparation thread: a long text has a long answer
            s = lease.service
            return Response(await s.offload(_tokenize, s.tokenizer, body), media_type="application/json")
        finally:
            lease.done()

    @router.post("/detokenize", response_model=DetokenizeResponse, summary="Token ids to text")
    async def detokenize(body: DetokenizeRequest, pool: PoolDep) -> Any:
        lease = await pool.lease(body.model, "generate", ollama=False)
        try:
            s = lease.service
            return {"content": await s.offload(s.tokenizer.decode, body.tokens)}
        except LlamayError as e:
            raise bad_request(str(e), "tokens") from None
        finally:
            lease.done()

    return router


JSON_SLICE = 4096  # items json.dumps writes at once: one call holds the GIL (and so the event loop) throughout


def _tokenize(tok: Any, body: TokenizeRequest) -> bytes:
    """/tokenize's answer as JSON (on a preparation thread, in slices: a quarter of a million pieces in one
    json.dumps held the GIL for a second)."""
    ids = tok.encode(body.content, add_special=body.add_special, parse_special=body.parse_special)
    items: list[Any] = ids
    if body.with_pieces:
        items = [{"id": i, "piece": _piece(tok.token_bytes(i))} for i in ids]
    parts = (json.dumps(items[k : k + JSON_SLICE], ensure_ascii=False)[1:-1] for k in range(0, len(items), JSON_SLICE))
    return ('{"tokens": [' + ", ".join(parts) + "]}").encode()


def _piece(data: bytes) -> str | list[int]:
    """A token's piece as llama-server writes it: its text, or its bytes where they are not UTF-8 by themselves."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return list(data)


# -- errors ---------------------------------------------------------------------------------------------------


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(req: Request, e: ApiError) -> JSONResponse:
        return JSONResponse(e.body(req.url.path), status_code=e.status, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(req: Request, e: RequestValidationError) -> JSONResponse:
        errors = e.errors()
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":
            msg = f"the body is not valid JSON: {first.get('ctx', {}).get('error', 'malformed')}"
            body = error_body(msg, "invalid_request_error", None, "invalid_json", req.url.path)
            return JSONResponse(body, status_code=400)
        found = validation_errors(errors, e.body)
        parts = [f"{path}: {msg}" for path, msg in found[:5]]
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        param = found[0][0] if found and found[0][0] != "body" else None
        body = error_body("; ".join(parts) + more, "invalid_request_error", param, "invalid_value", req.url.path)
        return JSONResponse(body, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(req: Request, e: StarletteHTTPException) -> JSONResponse:
        msg = e.detail if isinstance(e.detail, str) else str(e.detail)
        body = error_body(msg, error_type(e.status_code), None, None, req.url.path)
        return JSONResponse(body, status_code=e.status_code, headers=getattr(e, "headers", None))

    @app.exception_handler(LlamayError)
    async def engine_error(req: Request, e: LlamayError) -> JSONResponse:
        return JSONResponse(error_body(str(e), "invalid_request_error", path=req.url.path), status_code=400)

    @app.exception_handler(Exception)
    async def crash(req: Request, e: Exception) -> JSONResponse:
        log.exception("unhandled error")
        msg = f"internal error: {type(e).__name__}: {e}"
        body = error_body(msg, "server_error", None, "internal_error", req.url.path)
        return JSONResponse(body, status_code=500)
