"""A local static server for the browser tests: 127.0.0.1 only, cross-origin isolated (COOP/COEP), no caching.

Routes: `/web/...` (the web/ folder: pages, JS modules, web/dist), `/fixtures/...` (the shared fixtures) and
`/bundle.zip` (the repository's tests and the fixtures they need, unpacked inside Pyodide's file system).
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests import paths

TYPES = {
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".wasm": "application/wasm",
    ".json": "application/json",
    ".html": "text/html",
    ".zip": "application/zip",
    ".whl": "application/zip",
}
ISOLATION = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class Handler(SimpleHTTPRequestHandler):
    def __init__(self, *args, routes: dict[str, Path], **kwargs) -> None:
        self.routes = routes
        super().__init__(*args, **kwargs)

    def translate_path(self, path: str) -> str:
        path = unquote(urlsplit(path).path)
        for prefix, root in self.routes.items():
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                rest = path[len(prefix) :].lstrip("/")
                target = (root / rest).resolve() if rest else root.resolve()
                base = root.resolve() if root.is_dir() else root.resolve().parent
                if target == base or base in target.parents:
                    return str(target)
        return "/nonexistent"

    def guess_type(self, path) -> str:
        return TYPES.get(Path(path).suffix, "application/octet-stream")

    def end_headers(self) -> None:
        for k, v in ISOLATION.items():
            self.send_header(k, v)
        super().end_headers()

    def log_message(self, format, *args) -> None:  # quiet: the tests print what matters
        pass


class Server:
    """A running server; `url(path)` gives an address on it."""

    def __init__(self, routes: dict[str, Path]) -> None:
        handler = functools.partial(Handler, routes=routes)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/{path.lstrip('/')}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def place(src: Path, folder: Path, name: str | None = None) -> Path:
    """`src` as `folder/name` (default: its own name) for `llamay web` to serve: a hard link where the file system
    allows, else a copy (it serves no symbolic link that leads out of its folder)."""
    dst = folder / (name or src.name)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
    return dst


BUNDLED_FIXTURES = ("models/stories260K", "models/all-minilm-l6-v2", "vocab")


def write_bundle(out: Path, fixture_dirs: tuple[str, ...] = BUNDLED_FIXTURES) -> Path:
    """A zip of the repository's tests, docs and README (the tests run the docs' examples and check the README's
    architecture table) as repo/, and the given fixture folders as shared/fixtures/."""
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.write(paths.REPO / "pyproject.toml", "repo/pyproject.toml")
        z.write(paths.REPO / "README.md", "repo/README.md")
        for p in sorted((paths.REPO / "docs").glob("*.md")):
            z.write(p, f"repo/docs/{p.name}")
        for p in sorted((paths.REPO / "tests").rglob("*")):
            rel = p.relative_to(paths.REPO)
            if p.is_file() and "__pycache__" not in rel.parts and rel.parts[1] != "browser":
                z.write(p, f"repo/{rel.as_posix()}")
        for d in fixture_dirs:
            for p in sorted((paths.FIXTURES / d).rglob("*")):
                if p.is_file():
                    z.write(p, f"shared/fixtures/{p.relative_to(paths.FIXTURES).as_posix()}")
    return out
