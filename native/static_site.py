"""The site `llamay web` serves: a web/ folder at `/` and a models folder at `/models/`, as a Starlette app.

Every path is resolved inside its root after following links (a link that stays inside is fine, one that leads
out is not found), and no name that starts with a dot or marks a partial or temporary file is served on either
side of a link. A folder answers with its index.html or not at all: no listings. Every response carries the
cross-origin-isolation headers, `nosniff` and `no-cache`; a request whose Host the rule of `host_rule` does not
answer is refused, so a DNS-rebinding page cannot read the models.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from email.utils import parsedate
from functools import partial
from pathlib import Path
from typing import NamedTuple

import anyio.to_thread
from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .host_rule import host_allowed, host_name
from .model_facts import model_facts

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".whl": "application/zip",
    ".zip": "application/zip",
    ".py": "text/x-python; charset=utf-8",
    ".gguf": "application/octet-stream",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".md": "text/markdown; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}
HEADERS = {  # on every response, errors included
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    # revalidate every time (ETag / Last-Modified): a rebuilt web/dist is picked up at once; the page keeps the
    # models itself, in the Cache API
    "Cache-Control": "no-cache",
}
HIDDEN = ("node_modules",)  # first folders under web/ that are never served
UNSERVED_SUFFIXES = (".partial", ".tmp")  # files still being written (a pull, a copy)
MODELS = "/models"


def servable_name(name: str) -> bool:
    """Whether a path component may be served: not a dotfile, not a partial or temporary file."""
    return not name.startswith(".") and not name.endswith(UNSERVED_SUFFIXES) and not {"\\", "\0"} & set(name)


def resolve(root: Path, rel: str, hidden: Iterable[str] = ()) -> Path | None:
    """The real path of `rel` under `root` when it exists, stays inside `root` once every link is followed, and
    names nothing unservable (in the request or in what the links lead to); else None."""
    hidden = tuple(hidden)
    parts = [p for p in rel.split("/") if p]
    if not all(map(servable_name, parts)) or (parts and parts[0] in hidden):
        return None
    try:
        base = Path(os.path.realpath(root, strict=True))
        real = Path(os.path.realpath(base.joinpath(*parts), strict=True))
    except (OSError, ValueError, RuntimeError):  # missing, a NUL, a link loop
        return None
    if real != base and base not in real.parents:
        return None
    inside = real.relative_to(base).parts
    if not all(map(servable_name, inside)) or (inside and inside[0] in hidden):
        return None
    return real


def model_index(models: Path) -> list[dict]:
    """The servable .gguf files directly in `models`, by name: [{name, url, size, architecture, parameters,
    quantization, kind, ...}] (`model_facts`: what each is, or the error that names why it cannot be used)."""
    if not models.is_dir():
        return []
    out = []
    for p in sorted(models.iterdir()):
        real = resolve(models, p.name) if p.suffix == ".gguf" else None
        if real is not None and real.is_file():
            entry = {"name": p.name, "url": f"{MODELS}/{p.name}", "size": real.stat().st_size}
            out.append(entry | model_facts(real, p.name))
    return out


def not_modified(request: Headers, response: MutableHeaders) -> bool:
    """Whether the client's copy (If-None-Match, else If-Modified-Since) is the file's current version."""
    if tags := request.get("if-none-match"):
        return tags.strip() == "*" or response["etag"] in [t.strip().removeprefix("W/") for t in tags.split(",")]
    since, modified = parsedate(request.get("if-modified-since", "")), parsedate(response["last-modified"])
    return since is not None and modified is not None and since >= modified


class StoredModels:
    """The model stores at /models/: each stored model as `/models/<name:tag>.gguf` (its blob; only names the
    listing has are answered, so a request names no path), and the files of a plain folder beside them."""

    def __init__(self, listing: Callable[[], dict[str, Path]], folder: Path | None = None) -> None:
        self.listing, self.folder = listing, folder

    def index(self) -> list[dict]:
        named = [
            {"name": n, "url": f"{MODELS}/{n}.gguf", "size": p.stat().st_size} | model_facts(p, f"{n}.gguf")
            for n, p in self.listing().items()
        ]
        return named + (model_index(self.folder) if self.folder else [])

    def find(self, rel: str) -> Found | None:
        blob = self.listing().get(rel.strip("/").removesuffix(".gguf"))
        if blob is not None and blob.is_file():
            return Found(blob, TYPES[".gguf"], blob.stat(), False)
        return find(self.folder, rel, ()) if self.folder else None


class Site:
    """The endpoint: `web` at `/`, `models` at `/models/`, `/models/index.json` listing the models."""

    def __init__(self, web: Path, models: Path | StoredModels) -> None:
        self.web, self.models = Path(web), models if isinstance(models, StoredModels) else Path(models)

    async def respond(self, request: Request) -> Response:
        path = request.scope["path"]  # decoded: %2e%2e is `..`, refused like it
        stored = self.models if isinstance(self.models, StoredModels) else None
        if path == f"{MODELS}/index.json":
            index = stored.index if stored else partial(model_index, self.models)
            return JSONResponse(await anyio.to_thread.run_sync(index))
        if stored and path.startswith(f"{MODELS}/"):
            found = await anyio.to_thread.run_sync(stored.find, path[len(MODELS) :])
        elif path == MODELS or path.startswith(f"{MODELS}/"):
            found = await anyio.to_thread.run_sync(find, self.models, path[len(MODELS) :], ())
        else:
            found = await anyio.to_thread.run_sync(find, self.web, path, HIDDEN)
        if found is None:
            return PlainTextResponse("not found", status_code=404)
        if found.folder and not path.endswith("/"):
            # relative links in a folder's page need the slash
            query = f"?{request.url.query}" if request.url.query else ""
            return RedirectResponse(path + "/" + query, status_code=301)
        response = FileResponse(found.path, media_type=found.media_type, stat_result=found.stat)
        if not_modified(request.headers, response.headers):
            return Response(status_code=304, headers={"ETag": response.headers["etag"]})
        return response


class Found(NamedTuple):
    path: Path  # the file to send (real: every link followed)
    media_type: str  # from the requested name (a link's target may be named otherwise)
    stat: os.stat_result
    folder: bool  # a folder was asked for: this is its index.html


def find(root: Path, rel: str, hidden: tuple[str, ...]) -> Found | None:
    """What answers `rel` under `root`: a file, or a folder's index.html, else None."""
    name = rel.rstrip("/").rsplit("/", 1)[-1]
    real = resolve(root, rel, hidden)
    folder = real is not None and real.is_dir()
    if folder:
        name, real = "index.html", resolve(root, f"{rel.rstrip('/')}/index.html", hidden)
    if real is None or not real.is_file():
        return None
    return Found(real, TYPES.get(Path(name).suffix, "application/octet-stream"), real.stat(), folder)


class Guard:
    """Around the app: the Host check, the headers on every response, and the request log."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str] = (), log: list | None = None) -> None:
        self.app, self.allowed, self.log = app, tuple(allowed_hosts), log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.log is not None:
            self.log.append((scope["method"], scope["path"]))

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for k, v in HEADERS.items():
                    headers[k] = v
            await send(message)

        host = Headers(scope=scope).get("host")
        if not host_allowed(host, self.allowed):
            refusal = PlainTextResponse(
                f"host {host_name(host or '') or '(none)'!r} is not served: llamay web answers IP addresses, "
                "loopback names (localhost) and the address it is bound to; start it with --allowed-host NAME to "
                "be reached by another name",
                status_code=403,
            )
            return await refusal(scope, receive, with_headers)
        await self.app(scope, receive, with_headers)


def create_site(
    web: Path, models: Path | StoredModels, allowed_hosts: Iterable[str] = (), log: list | None = None
) -> ASGIApp:
    """The ASGI app of `llamay web`; `log` (a list) records the (method, path) of every request."""
    app = Starlette(routes=[Route("/{path:path}", Site(web, models).respond, methods=["GET", "HEAD"])])
    return Guard(app, allowed_hosts, log)
