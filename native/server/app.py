"""The ASGI app: routers, OpenAPI metadata, the optional API key, and OpenAI-style error bodies for every 4xx and
5xx (validation errors and malformed JSON included), so that a bad request never takes the server down."""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llamay import __version__
from llamay.errors import LlamayError

from . import contexts, ollama_routes, openai_routes
from .deps import ServiceDep
from .errors import ApiError, bad_request, error_body, error_type
from .schemas import (
    DetokenizeRequest,
    DetokenizeResponse,
    ErrorResponse,
    Health,
    TokenizeRequest,
    TokenizeResponse,
)
from .service import Service

log = logging.getLogger("llamay.server")

DESCRIPTION = """\
A GGUF language model served with continuous batching: OpenAI- and Ollama-compatible routes, named contexts
(KV snapshots you can fork, save, restore and continue), tokenization and Prometheus metrics.

Every error is answered with an OpenAI-style body: `{"error": {"message", "type", "param", "code"}}`.
A full queue answers 429 with `Retry-After`. Streaming uses SSE (`data: ...`, ending in `data: [DONE]`) on the
OpenAI routes and NDJSON on the Ollama routes.
"""
TAGS = [
    {"name": "OpenAI", "description": "OpenAI-compatible API (`/v1`)."},
    {"name": "Ollama", "description": "Ollama-compatible API (`/api`)."},
    {"name": "Contexts", "description": "Named KV contexts: create, fork, snapshot, restore, continue, delete."},
    {"name": "Server", "description": "Health, metrics, tokenization."},
]
ERRORS = {code: {"model": ErrorResponse} for code in (400, 401, 404, 408, 409, 429, 500, 503)}


def create_app(service: Service, api_key: str | None = None) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if not service.scheduler.alive:
            service.start()
        yield
        service.stop()

    app = FastAPI(title="llamay", version=__version__, description=DESCRIPTION, openapi_tags=TAGS,
                  lifespan=lifespan, responses=ERRORS)  # fmt: skip
    app.state.service = service
    guard = [Depends(_bearer(api_key))] if api_key else []
    for module in (openai_routes, ollama_routes, contexts):
        app.include_router(module.router, dependencies=guard)
    app.include_router(_server_router(), dependencies=guard)
    app.add_api_route("/health", health, methods=["GET"], response_model=Health, tags=["Server"],
                      summary="200 ok while the model thread runs and the KV accounting is exact; else 503 degraded",
                      responses={503: {"model": Health}})  # fmt: skip
    _add_error_handlers(app)
    app.add_middleware(JsonBodies)
    app.add_middleware(CountRequests, service=service)
    app.openapi = lambda: _openapi(app, service)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI, service: Service) -> dict[str, Any]:
    """The description, made exact for this server: `model` lists the models each route serves, and the token
    limits (`max_tokens`, `max_completion_tokens`, `num_predict`) are bounded by the context."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes,
                          tags=app.openapi_tags)  # fmt: skip

        def names(kinds: tuple[str, ...]) -> list[str]:
            return sorted({n for m in service.models if m.kind in kinds for n in (m.id, *m.aliases)})

        for name, schema in doc.get("components", {}).get("schemas", {}).items():
            props = schema.get("properties", {})
            kinds = ("embed",) if "Embed" in name else ("generate", "embed") if "Show" in name else ("generate",)
            for key in ("model", "name") if "Show" in name else ("model",):
                _enum(props.get(key), names(kinds))
            for key in ("max_tokens", "max_completion_tokens", "num_predict"):
                _bound(props.get(key), service.n_ctx)
        app.openapi_schema = doc
    return app.openapi_schema


def _enum(prop: dict[str, Any] | None, values: list[str]) -> None:
    for variant in (prop or {}).get("anyOf", [prop] if prop else []):
        if variant.get("type") == "string" and values:
            variant["enum"] = values


def _bound(prop: dict[str, Any] | None, limit: int) -> None:
    for variant in (prop or {}).get("anyOf", [prop] if prop else []):
        if variant.get("type") == "integer":
            variant["maximum"] = limit


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

    router = APIRouter(tags=["Server"])

    @router.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics (text format)")
    async def metrics(service: ServiceDep) -> str:
        return service.metrics.render()

    @router.post("/tokenize", response_model=TokenizeResponse, summary="Text to token ids (the generative model)")
    async def tokenize(body: TokenizeRequest, service: ServiceDep) -> Any:
        if body.model is not None:
            service.generative(body.model)
        ids = service.tokenizer.encode(body.content, add_special=body.add_special, parse_special=body.parse_special)
        if not body.with_pieces:
            return {"tokens": ids}
        tok = service.tokenizer
        return {"tokens": [{"id": i, "piece": tok.token_bytes(i).decode("utf-8", "replace")} for i in ids]}

    @router.post("/detokenize", response_model=DetokenizeResponse, summary="Token ids to text")
    async def detokenize(body: DetokenizeRequest, service: ServiceDep) -> Any:
        if body.model is not None:
            service.generative(body.model)
        try:
            return {"content": service.tokenizer.decode(body.tokens)}
        except LlamayError as e:
            raise bad_request(str(e), "tokens") from None

    return router


# -- errors ---------------------------------------------------------------------------------------------------


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_req: Request, e: ApiError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_req: Request, e: RequestValidationError) -> JSONResponse:
        errors = e.errors()
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":
            msg = f"the body is not valid JSON: {first.get('ctx', {}).get('error', 'malformed')}"
            return JSONResponse(error_body(msg, "invalid_request_error", None, "invalid_json"), status_code=400)
        parts = []
        for err in errors[:5]:
            loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
            parts.append(f"{loc or 'body'}: {err.get('msg', 'invalid')}")
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        param = ".".join(str(x) for x in first.get("loc", ()) if x != "body") or None
        body = error_body("; ".join(parts) + more, "invalid_request_error", param, "invalid_value")
        return JSONResponse(body, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_req: Request, e: StarletteHTTPException) -> JSONResponse:
        msg = e.detail if isinstance(e.detail, str) else str(e.detail)
        body = error_body(msg, error_type(e.status_code), None, None)
        return JSONResponse(body, status_code=e.status_code, headers=getattr(e, "headers", None))

    @app.exception_handler(LlamayError)
    async def engine_error(_req: Request, e: LlamayError) -> JSONResponse:
        return JSONResponse(error_body(str(e), "invalid_request_error"), status_code=400)

    @app.exception_handler(Exception)
    async def crash(_req: Request, e: Exception) -> JSONResponse:
        log.exception("unhandled error")
        body = error_body(f"internal error: {type(e).__name__}: {e}", "server_error", None, "internal_error")
        return JSONResponse(body, status_code=500)


# -- middlewares -----------------------------------------------------------------------------------------


class CountRequests:
    """Counts answered requests by method, route template and status (a pure ASGI middleware, so streaming
    responses and disconnects pass through untouched)."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.metrics = service.metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.metrics.requests[(scope.get("method", ""), path, status)] += 1


class JsonBodies:
    """Every request body here is JSON: one labelled otherwise (`curl -d` sends form encoding, some Ollama
    clients send no type at all) is read as JSON, as Ollama itself does."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") in ("POST", "PUT", "PATCH"):
            headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
            kind = dict(scope["headers"]).get(b"content-type", b"")
            if b"json" not in kind:
                scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        await self.app(scope, receive, send)
