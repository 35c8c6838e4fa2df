"""What every request passes before any route sees it: its Host, its Origin, its body's type and size.

A server with no key on 127.0.0.1 is still reachable from every web page the user opens: a page may send any
"simple" cross-origin request (GET, or POST with a `text/plain`, form or no content type, all without a CORS
preflight), and a DNS-rebinding name (evil.example resolving to 127.0.0.1) even makes its requests
same-origin. So, like Ollama:

- **Host** must pass the rule `llamay web` uses too (`native/host_rule.py`): an IP address (an address cannot
  be rebound), a loopback name (`localhost`, `*.localhost`), the address the server is bound to, or a name
  given with `--allowed-host` (`.example.com` for a domain and its subdomains, `*` for any). Else 403.
- **Origin**, when a browser sends one, must be the server's own (the same host and port as `Host`: its own
  /docs page) or one of `--cors-origin`. Else 403, whatever the method: browsers send `Origin` on every
  cross-origin request and on every POST, so a foreign page is refused before any work is done.
- **CORS**: for the `--cors-origin` origins only, preflights (OPTIONS) are answered and responses carry
  `Access-Control-Allow-*` (starlette's CORSMiddleware, inside this guard).
- **Content type**: a body is JSON only if labelled `application/json` or `application/*+json`; any other
  label (`text/plain`, forms: what a page can send without a preflight) is 415. A body with no label is read
  as JSON (non-browser clients such as raw `requests.post(data=...)` send none) only when the request has no
  foreign Origin: a browser can send an unlabelled body without preflight (a `Blob` with no type), but always
  with its page's Origin, which the Origin rule has then already refused.
- **Uploads** (`/api/blobs/...`) are raw bytes (`application/octet-stream`, no label, or `application/json`, the
  label the official `ollama` client puts on every request), streamed to the route
  unread, which bounds them by --max-blob-bytes; the Host and Origin rules apply to them as to every request.
- **Size**: a body over `--max-body-bytes` is 413, refused from its Content-Length before it is read, or as
  soon as a chunked body passes the limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..host_rule import host_allowed
from .errors import error_body, error_type

DEFAULT_PORTS = {"http": 80, "https": 443}
BODY_METHODS = ("POST", "PUT", "PATCH")
RAW_PREFIX = "/api/blobs/"  # uploads: raw bytes streamed to the route, which bounds them (--max-blob-bytes)
RAW_TYPES = ("application/octet-stream", "application/json")  # the official ollama client labels uploads JSON


@dataclass(frozen=True)
class GuardConfig:
    bound: str = "127.0.0.1"  # the address the server listens on
    allowed_hosts: tuple[str, ...] = ()  # --allowed-host
    cors_origins: tuple[str, ...] = ()  # --cors-origin
    max_body_bytes: int = 8 << 20  # --max-body-bytes

    def host_allowed(self, host_header: str | None) -> bool:
        return host_allowed(host_header, (self.bound, *self.allowed_hosts))

    def cross_origin_allowed(self, origin: str) -> bool:
        return "*" in self.cors_origins or origin.rstrip("/").lower() in {
            o.rstrip("/").lower() for o in self.cors_origins
        }


def split_host(value: str) -> tuple[str, int | None]:
    """`Host` header → (host, port): `[::1]:8080` → ("::1", 8080), `localhost` → ("localhost", None)."""
    try:
        parts = urlsplit(f"//{value}")
        return (parts.hostname or ""), parts.port
    except ValueError:  # an unclosed bracket, a port that is no number: matches nothing
        return "", -1


def same_origin(origin: str, host_header: str) -> bool:
    """The Origin names the host and port the request was sent to (the default port of its scheme omitted
    on either side): the server's own pages, served on that address."""
    try:
        o = urlsplit(origin)
        if o.scheme not in DEFAULT_PORTS or not o.hostname:
            return False
        o_port = o.port or DEFAULT_PORTS[o.scheme]
    except ValueError:  # an unclosed bracket, a port that is no number: not this server's page
        return False
    host, port = split_host(host_header)
    default = DEFAULT_PORTS[o.scheme]
    return bool(host) and o.hostname.lower() == host.lower() and o_port == (port or default)


def is_json_type(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


class Guard:
    """A pure ASGI middleware (streaming responses pass through untouched) applying the rules above."""

    def __init__(self, app: ASGIApp, config: GuardConfig) -> None:
        self.app = app
        self.cfg = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        refusal = self._refusal(scope, headers)
        cors = self._cors(headers)  # the guard's own refusals too must be readable by an allowed page
        if refusal is not None:
            await _answer(send, scope["path"], *refusal, extra=cors)
            return
        if scope["path"].startswith(RAW_PREFIX):  # not JSON, not buffered here: the route reads and bounds it
            await self.app(scope, receive, _nosniff(send))
            return
        if scope["method"] in BODY_METHODS:
            body = await self._read_body(receive, headers, send, scope["path"], cors)
            if body is None:
                return
            receive = _replay(body, receive)
            if "content-type" not in headers:  # admitted unlabelled (see above): the routes read JSON
                # in place: the outer middlewares read what the router writes into this scope (the route)
                scope["headers"] = [*scope["headers"], (b"content-type", b"application/json")]
        await self.app(scope, receive, _nosniff(send))

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, str, str | None] | None:
        cfg = self.cfg
        host_header = headers.get("host")
        if not cfg.host_allowed(host_header):
            return (403, f"the Host {host_header!r} is not one this server answers to (IP addresses, loopback names "
                    "and the bound address); start it with --allowed-host NAME to serve that name",
                    "host_not_allowed", None)  # fmt: skip
        origin = headers.get("origin")
        foreign = origin is not None and not (host_header and same_origin(origin, host_header))
        if foreign and not cfg.cross_origin_allowed(origin):
            return (403, f"requests from the web origin {origin!r} are not allowed; start the server with "
                    f"--cors-origin {origin} to allow that page", "origin_not_allowed", None)  # fmt: skip
        if scope["method"] in BODY_METHODS:
            kind = headers.get("content-type")
            raw = scope["path"].startswith(RAW_PREFIX)
            if raw and kind is not None and kind.split(";", 1)[0].strip().lower() not in RAW_TYPES:
                return (415, f"a blob is uploaded as raw bytes: send Content-Type: application/octet-stream (or "
                        f"none, or the ollama client's application/json), not {kind!r}", "unsupported_media_type",
                        None)  # fmt: skip
            if not raw and kind is not None and not is_json_type(kind):
                return (415, f"request bodies are JSON: send Content-Type: application/json, not {kind!r}",
                        "unsupported_media_type", None)  # fmt: skip
        return None

    def _cors(self, headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
        """The CORS headers of an answer the guard gives itself (CORSMiddleware, inside, adds those of the rest)."""
        origin, host = headers.get("origin"), headers.get("host")
        if origin is None or (host and same_origin(origin, host)) or not self.cfg.cross_origin_allowed(origin):
            return []
        return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]

    async def _read_body(self, receive: Receive, headers: dict[str, str], send: Send, path: str,
                         cors: list[tuple[bytes, bytes]]) -> bytes | None:  # fmt: skip
        """The whole body, or None once a 413 (or nothing, for a client gone) has been answered."""
        limit = self.cfg.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _answer(send, path, *_too_large(int(declared), limit), extra=cors)
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None  # the client went away before sending it all
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _answer(send, path, *_too_large(size, limit), extra=cors)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _too_large(size: int, limit: int) -> tuple[int, str, str, str | None]:
    return (413, f"the request body has {'at least ' if size <= limit else ''}{size} bytes, more than the limit of "
            f"{limit} (--max-body-bytes)", "body_too_large", None)  # fmt: skip


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the app the body read here, then the client's own messages (its disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _nosniff(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), (b"x-content-type-options", b"nosniff")]}
        await send(message)

    return wrapped


async def _answer(send: Send, path: str, status: int, message: str, code: str, param: str | None,
                  extra: Iterable[tuple[bytes, bytes]] = ()) -> None:  # fmt: skip
    payload: Any = error_body(message, error_type(status), param, code, path)  # Ollama's shape on its routes
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"x-content-type-options", b"nosniff"), *extra]  # fmt: skip
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
