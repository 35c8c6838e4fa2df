"""`/docs` (Swagger UI) and `/openapi.json`, working with no network and behind the API key when there is one.

FastAPI's own /docs loads Swagger UI from a CDN (a blank page offline) and, like /redoc and /openapi.json,
stays open with `--api-key`. Here Swagger UI's files come from the `swagger-ui-bundle-v2` package and are
served under /docs/assets; the page and its start-up script are written here; a Content-Security-Policy lets
the page load nothing from any other origin. /redoc is not served (its script exists only on a CDN).

With a key, every docs route asks for it: `Authorization: Bearer KEY`, or HTTP Basic with the key as the
password (any user name), which a browser asks for in its own dialog (`WWW-Authenticate: Basic`) and then
sends with the page's own requests for /openapi.json. The API routes themselves take the Bearer form only
(Swagger UI's "Authorize" button sets it), so a browser never sends the key to them on its own.
"""

from __future__ import annotations

import base64
import hmac
import html
import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from .errors import ApiError

ASSETS = ("swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png", "favicon-16x16.png")
CSP = "; ".join((
    "default-src 'none'", "script-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data:",
    "connect-src 'self'", "font-src 'self' data:", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'",
))  # fmt: skip
PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title} - API</title>
<link rel="stylesheet" href="docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="docs/assets/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/assets/swagger-ui-bundle.js"></script>
<script src="docs/init.js"></script>
</body>
</html>
"""
INIT = """window.ui = SwaggerUIBundle({
  url: "openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
"""
# without the package: a plain list of the operations, still offline
FALLBACK = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title} - API</title></head>
<body><h1>{title} {version}</h1>
<p>Install <code>swagger-ui-bundle-v2</code> (part of <code>llamay[native]</code>) for the interactive page;
the description is at <a href="openapi.json">openapi.json</a>.</p>
<table>{rows}</table></body></html>
"""


def _assets_dir() -> Path | None:
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        return None
    path = Path(str(swagger_ui_path))
    return path if (path / "swagger-ui-bundle.js").is_file() else None


def docs_key_check(api_key: str | None) -> Callable[[Request], None]:
    """A dependency: the key as a Bearer token or as HTTP Basic's password; 401 asking for Basic otherwise."""

    def check(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        secret = ""
        if scheme.lower() == "bearer":
            secret = value.strip()
        elif scheme.lower() == "basic":
            try:
                secret = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")[2]
            except (ValueError, UnicodeDecodeError):
                secret = ""
        if not secret or not hmac.compare_digest(secret.encode(), api_key.encode()):
            raise ApiError(401, "the API docs need the server's key: Authorization: Bearer KEY, or the key as the "
                           "password of HTTP Basic", code="invalid_api_key",
                           headers={"WWW-Authenticate": 'Basic realm="llamay", charset="UTF-8"'})  # fmt: skip

    return check


def docs_router(openapi: Callable[[], dict[str, Any]], api_key: str | None, title: str) -> APIRouter:
    router = APIRouter(include_in_schema=False, dependencies=[Depends(docs_key_check(api_key))])
    assets = _assets_dir()
    cache: dict[str, bytes] = {}
    headers = {"Content-Security-Policy": CSP, "Cache-Control": "no-cache"}

    @router.get("/openapi.json")
    async def openapi_json() -> JSONResponse:
        return JSONResponse(openapi())

    @router.get("/docs")
    async def docs() -> HTMLResponse:
        if assets is None:
            doc = openapi()
            rows = "".join(
                f"<tr><td>{m.upper()}</td><td><code>{html.escape(p)}</code></td>"
                f"<td>{html.escape(op.get('summary', ''))}</td></tr>"
                for p, ops in doc.get("paths", {}).items()
                for m, op in ops.items()
            )
            page = FALLBACK.format(title=html.escape(title), version=html.escape(doc["info"]["version"]), rows=rows)
            return HTMLResponse(page, headers=headers)
        return HTMLResponse(PAGE.format(title=html.escape(title)), headers=headers)

    @router.get("/docs/init.js")
    async def init_js() -> Response:
        return Response(INIT, media_type="text/javascript", headers=headers)

    @router.get("/docs/assets/{name}")
    async def asset(name: str) -> Response:
        if assets is None or name not in ASSETS:  # a fixed list: no path from the request reaches the disk
            raise ApiError(404, f"no docs asset {name!r}", code="not_found")
        if name not in cache:
            cache[name] = (assets / name).read_bytes()
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(cache[name], media_type=kind, headers={"Cache-Control": "max-age=86400"})

    return router
