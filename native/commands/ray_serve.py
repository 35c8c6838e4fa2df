"""`llamay ray`: llamay replicas on Ray Serve behind Ray's HTTP proxy, routed by prompt prefix (docs/scale-out.md).

It joins a Ray cluster (`--address auto`, or a ray:// address) or starts one on this machine, deploys the
application of llamay.native.ray.deployment and waits; Ctrl-C or SIGTERM takes the application down (replicas
drain their requests first, `--drain-timeout`). Needs the `[ray]` extra.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from llamay.native.commands import MODEL_HELP_DEFAULT


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ray", help="serve a model on Ray Serve: N replicas routed by prompt prefix")
    p.add_argument("-m", "--model", help=MODEL_HELP_DEFAULT + " (each Ray node resolves it in its own store)")
    p.add_argument("--replicas", type=int, default=2, help="engine replicas, each a whole llamay server (default 2)")
    p.add_argument("--min-replicas", type=int, help="autoscale: fewest replicas (Ray's autoscaling_config)")
    p.add_argument("--max-replicas", type=int, help="autoscale: most replicas")
    p.add_argument("--routing", choices=("prefix", "random", "default"), default="prefix",
                   help="prefix: the prompt's start picks its replica; random: any; default: Ray's own")  # fmt: skip
    p.add_argument("--prefix-chars", type=int, default=512, help="characters of the prompt's start keyed (512)")
    p.add_argument("--address", help="the Ray cluster to join (auto, ray://HOST:10001; default: start one here)")
    p.add_argument("--host", default="127.0.0.1", help="address Ray's HTTP proxy binds (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port of Ray's HTTP proxy (default 8000)")
    p.add_argument("--api-key", help="require `Authorization: Bearer KEY` (default: $LLAMAY_API_KEY, else none)")
    p.add_argument("--parallel", type=int, default=4, help="sequences decoded together per replica (default 4)")
    p.add_argument("--queue", type=int, default=64, help="requests waiting per replica; more get 429 (default 64)")
    p.add_argument("-c", "--ctx-size", type=int, help="context per sequence (default: min(train context, 2048))")
    p.add_argument("-t", "--threads", type=int, default=1, help="kernel threads per replica (default 1)")
    p.add_argument("--num-cpus", type=float, default=1.0, help="Ray CPUs reserved per replica (default 1)")
    p.add_argument("--backend", help="kernel backend: numba, wasm, portable (default: the fastest)")
    p.add_argument("--drain-timeout", type=float, default=30.0,
                   help="seconds a replica being removed has to finish its requests (default 30)")  # fmt: skip
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="also answer requests for this Host name (as `llamay serve --allowed-host`)")  # fmt: skip
    p.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                   help="allow web pages of this origin to call the API (as `llamay serve --cors-origin`)")  # fmt: skip
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> dict:
    """What build_app takes, from the command line."""
    import os

    return {"model": args.model, "replicas": args.replicas, "min_replicas": args.min_replicas,
            "max_replicas": args.max_replicas, "routing": args.routing, "prefix_chars": args.prefix_chars,
            "parallel": args.parallel, "queue": args.queue, "ctx_size": args.ctx_size, "threads": args.threads,
            "num_cpus": args.num_cpus, "backend": args.backend, "graceful_shutdown_timeout_s": args.drain_timeout,
            "api_key": args.api_key or os.environ.get("LLAMAY_API_KEY") or None, "host": args.host,
            "allowed_hosts": tuple(args.allowed_host), "cors_origins": tuple(args.cors_origin)}  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from llamay.errors import LlamayError

    if args.replicas < 1 or args.parallel < 1 or args.queue < 1 or args.prefix_chars < 1:
        raise LlamayError("--replicas, --parallel, --queue and --prefix-chars must be at least 1")
    if args.num_cpus < 0:
        raise LlamayError(f"--num-cpus must be 0 or more, not {args.num_cpus}")
    try:
        import ray
        from ray import serve

        from llamay.native.ray.deployment import build_app
    except ImportError as e:
        raise LlamayError(f"`llamay ray` needs the ray extra: pip install 'llamay[ray]' ({e})") from None
    try:
        app = build_app(options(args))
    except ValueError as e:
        raise LlamayError(str(e)) from None

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
    stopped_by = [signal.SIGINT]

    def on_term(signum: int, _frame: object) -> None:  # a service manager's stop is Ctrl-C's (not Ray's stack dump)
        stopped_by[0] = signum
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        serve.start(http_options={"host": args.host, "port": args.port})
        say(f"llamay ray: deploying {args.replicas} replica(s) of {args.model or 'the default model'} "
            f"({args.routing} routing)")  # fmt: skip
        serve.run(app, name="llamay", route_prefix="/")
        say(f"llamay ray: serving on http://{args.host}:{args.port} (Ctrl-C to stop)")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        say("llamay ray: stopping (replicas finish their requests first)")
        return 128 + stopped_by[0]  # 130 after Ctrl-C, 143 after SIGTERM: the shell's convention
    finally:
        serve.delete("llamay")
        if args.address is None:  # the cluster this command started goes with it
            serve.shutdown()
        ray.shutdown()
