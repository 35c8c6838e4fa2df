"""`llamay web`: serve the browser demo and the chat widget (Pyodide + WASM kernels) from this machine.

Serves the checkout's `web/` folder at `/` (the demo page, `src/`, `widget/`, `examples/` and the built `dist/`:
Pyodide, the wheels and the kernel modules) and a folder of models at `/models/` (default: the model store, so
`/models/SmolLM2-135M-Instruct.Q4_1.gguf` works after `llamay pull`), with `/models/index.json` listing them.
Every response carries the cross-origin-isolation headers (COOP `same-origin`, COEP `require-corp`), which give
the page SharedArrayBuffer (an abort interrupts Python mid-step) and keep anything from another origin out.
Nothing is fetched from anywhere else: the browser needs no network beyond this server. What is served and how
is `llamay.native.static_site`; the server is uvicorn with the limits of `llamay.native.connections`.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: `llamay --help` stays fast
    from llamay.native.connections import Limits

WEB_DIR = Path(__file__).resolve().parents[2] / "web"  # the checkout's web/ (an editable install)
STARTUP_SECONDS = 30.0  # WebServer.start waits this long for uvicorn to answer


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("web", help="serve the browser demo and chat widget (the engine runs in the browser)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--models", help="folder served at /models/ (default: the model store, $LLAMAY_MODELS_DIR)")
    p.add_argument("--web-dir", help="the web/ folder to serve (default: this checkout's)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a host name the server may be reached by, besides IP addresses and localhost (e.g. "
                   "behind a proxy; repeatable; .example.com: the domain and its subdomains; *: any)")  # fmt: skip
    p.set_defaults(func=run)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (IPv4 or IPv6, as the host resolves)."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family)


class WebServer:
    """The web/ folder and a models folder over HTTP (uvicorn); `url` is its address. `start()` runs it in a
    background thread, `serve()` in this one (until Ctrl-C); `log` (a list) records (method, path) of every
    request."""

    def __init__(
        self,
        web: Path = WEB_DIR,
        models: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        log: list | None = None,
        allowed_hosts: tuple[str, ...] = (),
        limits: Limits | None = None,
    ) -> None:
        import uvicorn

        from llamay.native.connections import Limits
        from llamay.native.static_site import create_site
        from llamay.native.store import models_dir

        self.web = Path(web)
        self.models = Path(models) if models else models_dir()
        self.log = log
        self.sock = bind(host, port)
        app = create_site(self.web, self.models, (host, *allowed_hosts), log)
        config = uvicorn.Config(
            app, lifespan="off", ws="none", server_header=False, log_config=None, access_log=False,
            log_level="warning", timeout_graceful_shutdown=1, **(limits or Limits()).uvicorn_options(),
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.sock.getsockname()[:2]
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"

    def serve(self) -> None:
        self.server.run(sockets=[self.sock])

    def start(self) -> WebServer:
        self.thread = threading.Thread(target=self.serve, name="llamay-web", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"llamay web's server did not start on {self.url}")
            time.sleep(0.01)
        return self

    def close(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join()
        self.sock.close()


def check_web_dir(web: Path) -> str | None:
    """Why `web` cannot be served, or None."""
    if not (web / "index.html").is_file():
        return f"{web} has no index.html: run `llamay web` from a llamay checkout, or pass --web-dir"
    if not (web / "dist" / "manifest.json").is_file():
        return f"{web / 'dist'} is missing: build it with `(cd {web} && npm ci) && python {web / 'build.py'}`"
    return None


def run(args: argparse.Namespace) -> int:
    from llamay.errors import LlamayError
    from llamay.native.static_site import model_index

    web = Path(args.web_dir or os.environ.get("LLAMAY_WEB_DIR") or WEB_DIR)
    problem = check_web_dir(web)
    if problem:
        raise LlamayError(problem)
    try:
        server = WebServer(web, Path(args.models) if args.models else None, args.host, args.port,
                           allowed_hosts=tuple(args.allowed_host))  # fmt: skip
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
        server.serve()
    except KeyboardInterrupt:  # uvicorn stops on Ctrl-C, then raises it again
        pass
    finally:
        server.sock.close()
    return 0
