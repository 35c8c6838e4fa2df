"""`llamay web`: serve the browser demo and the chat widget (Pyodide + WASM kernels) from this machine.

Serves the checkout's `web/` folder at `/` (the demo page, `src/`, `widget/`, `examples/` and the built `dist/`:
Pyodide, the wheels and the kernel modules) and a folder of models at `/models/` (default: the model store, so
`/models/SmolLM2-135M-Instruct.Q4_1.gguf` works after `llamay pull`), with `/models/index.json` listing them.
Every response carries the cross-origin-isolation headers (COOP `same-origin`, COEP `require-corp`), which give
the page SharedArrayBuffer (an abort interrupts Python mid-step) and keep anything from another origin out.
Nothing is fetched from anywhere else: the browser needs no network beyond this server.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

WEB_DIR = Path(__file__).resolve().parents[2] / "web"  # the checkout's web/ (an editable install)
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
ISOLATION = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
}
HIDDEN = ("node_modules",)  # under web/: never served


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("web", help="serve the browser demo and chat widget (the engine runs in the browser)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--models", help="folder served at /models/ (default: the model store, $LLAMAY_MODELS_DIR)")
    p.add_argument("--web-dir", help="the web/ folder to serve (default: this checkout's)")
    p.set_defaults(func=run)


def safe_join(root: Path, rel: str) -> Path | None:
    """`root/rel` when `rel` stays inside `root` (no `..`, no absolute part); symbolic links are followed."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if any(p == ".." or "\\" in p or p.startswith(".") for p in parts):
        return None
    return root.joinpath(*parts)


def model_index(models: Path) -> list[dict]:
    """The .gguf files directly in `models`: [{name, url, size}], by name."""
    if not models.is_dir():
        return []
    files = sorted(p for p in models.iterdir() if p.suffix == ".gguf" and p.is_file())
    return [{"name": p.name, "url": f"/models/{p.name}", "size": p.stat().st_size} for p in files]


class Handler(SimpleHTTPRequestHandler):
    """Static files of `web` and `models`, cross-origin isolated; `log` (a list) records (method, path)."""

    def __init__(self, *args, web: Path, models: Path, log: list | None, **kwargs) -> None:
        self.web, self.models, self.log = web, models, log
        super().__init__(*args, directory=str(web), **kwargs)

    def send_head(self):
        path = unquote(urlsplit(self.path).path)
        if self.log is not None:
            self.log.append((self.command, path))
        if path == "/models/index.json":
            body = json.dumps(model_index(self.models)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return _Bytes(body)
        return super().send_head()

    def translate_path(self, path: str) -> str:
        path = unquote(urlsplit(path).path)
        if path.startswith("/models/"):
            target = safe_join(self.models, path[len("/models/") :])
        else:
            rel = path.lstrip("/")
            target = None if rel.split("/")[0] in HIDDEN else safe_join(self.web, rel)
        return str(target) if target is not None else "/nonexistent"

    def guess_type(self, path) -> str:
        return TYPES.get(Path(path).suffix, "application/octet-stream")

    def end_headers(self) -> None:
        for k, v in ISOLATION.items():
            self.send_header(k, v)
        # revalidate every time (Last-Modified / If-Modified-Since): a rebuilt web/dist is picked up at once;
        # the models are kept by the page itself, in the Cache API
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, format, *args) -> None:
        pass


class _Bytes:
    """A file-like body for send_head's caller (copyfile) from bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, n: int = -1) -> bytes:
        out, self.data = (self.data, b"") if n < 0 else (self.data[:n], self.data[n:])
        return out

    def close(self) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # a browser that stops reading (a file found not to be a GGUF, a reload mid-download) is no error of ours
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class WebServer:
    """The web/ folder and a models folder over HTTP, in a background thread; `url` is its address."""

    def __init__(
        self, web: Path = WEB_DIR, models: Path | None = None, host: str = "127.0.0.1", port: int = 0, log=None
    ) -> None:
        from llamay.native.store import models_dir

        self.web = Path(web)
        self.models = Path(models) if models else models_dir()
        self.log = log
        handler = partial(Handler, web=self.web, models=self.models, log=log)
        self.httpd = _Server((host, port), handler)
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/"

    def start(self) -> WebServer:
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def check_web_dir(web: Path) -> str | None:
    """Why `web` cannot be served, or None."""
    if not (web / "index.html").is_file():
        return f"{web} has no index.html: run `llamay web` from a llamay checkout, or pass --web-dir"
    if not (web / "dist" / "manifest.json").is_file():
        return f"{web / 'dist'} is missing: build it with `(cd {web} && npm ci) && python {web / 'build.py'}`"
    return None


def run(args: argparse.Namespace) -> int:
    from llamay.errors import LlamayError

    web = Path(args.web_dir or os.environ.get("LLAMAY_WEB_DIR") or WEB_DIR)
    problem = check_web_dir(web)
    if problem:
        raise LlamayError(problem)
    try:
        server = WebServer(web, Path(args.models) if args.models else None, args.host, args.port)
    except OSError as e:
        raise LlamayError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    models = model_index(server.models)
    say = partial(print, file=sys.stderr, flush=True)
    say(f"llamay web: serving {web} at {server.url} (cross-origin isolated)")
    say(f"llamay web: {len(models)} model(s) from {server.models} at {server.url}models/")
    for m in models:
        say(f"  {server.url}?model={m['url']}")
    print(server.url, flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    return 0
