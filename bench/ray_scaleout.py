"""llamay on Ray Serve, on this machine, in one run: completion tokens per second of 1 vs 2 engine replicas, and
the share of prompt tokens found in a replica's prefix cache with prefix-aware routing vs Ray's default routing
(power of two choices), on a multi-session chat workload (tests/ray/chats.py: chats sharing system prompts, sent
turn by turn, each turn resending the chat so far).

    python bench/ray_scaleout.py [-m MODEL] [--chats 16] [--turns 3] [--max-tokens 32] [--concurrency 8]

It starts a local Ray cluster (2 logical CPUs, loopback) and stops it at the end. Runs, each with its own salt so
that no run finds another's prompts cached: 1 replica (prefix routing; with one replica routing is moot),
2 replicas with prefix routing, 2 replicas with Ray's default routing. Each replica decodes with one kernel
thread; on a 2-core machine shared with other work, 2 replicas can at best double the rate: say the load
(`uptime`) with the numbers.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from tests.ray.chats import Turn, cached_share, run


def kept(turns: list[Turn]) -> float:
    """Of the turns after a chat's first, the share sent to the replica that answered the turn before."""
    by = {(t.chat, t.turn): t.replica for t in turns}
    later = [t for t in turns if t.turn]
    return sum(t.replica == by[(t.chat, t.turn - 1)] for t in later) / max(1, len(later))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default=None, help="a model name or GGUF path (default: the default model)")
    ap.add_argument("--chats", type=int, default=16)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8, help="chats in flight at once")
    ap.add_argument("--parallel", type=int, default=4, help="sequences decoded together per replica")
    args = ap.parse_args()

    import ray
    from ray import serve

    from llamay.native.ray.deployment import build_app
    from llamay.native.ray.relay import REPLICA_HEADER

    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          f"on {os.cpu_count()} cores", flush=True)  # fmt: skip
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    rows = []
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600)

        def post(body: dict) -> tuple[dict, str]:
            r = client.post("/v1/chat/completions", json=body)
            r.raise_for_status()
            return r.json(), r.headers[REPLICA_HEADER]

        for name, replicas, routing in (("1 replica", 1, "prefix"), ("2 replicas, prefix routing", 2, "prefix"),
                                        ("2 replicas, Ray's default routing", 2, "default")):  # fmt: skip
            app = build_app({"model": args.model, "replicas": replicas, "routing": routing, "num_cpus": 1.0,
                             "threads": 1, "parallel": args.parallel, "ctx_size": 1024})  # fmt: skip
            serve.run(app, name="llamay", route_prefix="/")
            warm: set[str] = set()  # every replica has answered once: its kernels compiled, the model resident
            for i in range(64):
                warm.add(post({"messages": [{"role": "user", "content": f"warm up {i}"}], "max_tokens": 2})[1])
                if len(warm) == replicas:
                    break
            t0 = time.perf_counter()
            turns = run(post, args.chats, args.turns, salt=f"{name}-{time.time()}", max_tokens=args.max_tokens,
                        concurrency=args.concurrency)  # fmt: skip
            wall = time.perf_counter() - t0
            tokens = sum(t.completion_tokens for t in turns)
            split = sorted(Counter(t.replica for t in turns).values(), reverse=True)
            rows.append((name, tokens / wall, cached_share(turns), wall))
            print(
                f"{name:36s} {tokens / wall:7.1f} tok/s  cached prompt share {cached_share(turns):.3f}  "
                f"({len(turns)} requests, {tokens} tokens, {wall:.1f} s; requests per replica {split}, "
                f"later turns on their chat's previous replica {kept(turns):.0%})",
                flush=True,
            )
            serve.delete("llamay")
    finally:
        serve.shutdown()
        ray.shutdown()
    one, prefix, default = rows
    print(f"tokens/s, 2 replicas (prefix routing) / 1 replica: {prefix[1] / one[1]:.2f}x")
    print(
        f"cached prompt-token share, prefix-aware / Ray's default routing: {prefix[2]:.3f} / {default[2]:.3f} "
        f"= {prefix[2] / max(default[2], 1e-9):.2f}x"
    )
    print(f"load after: {os.getloadavg()[0]:.2f} (1-minute average)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
