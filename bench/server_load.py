"""Load on `llamay serve` over loopback: 1, 4 and 16 concurrent clients, each sending a few streaming chat
requests one after another; the single-client run is the reference of the same invocation.

    python bench/server_load.py [-m MODEL] [--clients 1 4 16] [--requests 2] [--max-tokens 64] [-t THREADS]
    python bench/server_load.py --url http://127.0.0.1:8080 ...      (a server already running, loopback only)

Unless --url is given, the server is started here as a subprocess (`llamay serve --port 0`) with as many sequences
as the largest client count, on the default model (SmolLM2-135M-Instruct) unless -m says otherwise, and stopped
at the end. Every request is bounded by --timeout; nothing leaves the machine.

For each level it prints: requests done and lost (an error, a non-200, or a stream without `[DONE]` and usage;
must be 0), aggregate completion tokens per second (tokens from the streams' usage over the level's wall time),
time to first token and request latency at p50/p95/p99, the server's mean batch width (from /metrics), and the
CPU this load generator itself burnt (% of one core): it shares the machine's cores with the server, so a client
that parsed expensively would slow what it measures.
Then the ratio of the largest level's token rate to the single client's (target: at least 3x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

import httpx

TOPICS = ("a lighthouse keeper", "a lost robot", "the first snow", "a dragon who bakes", "two rival chess players",
          "a city under the sea", "a clockmaker's apprentice", "a cat that learns to fly", "an old map",
          "the last train home", "a garden on Mars", "a musician without a voice", "a tiny island library",
          "a storm at the harvest festival", "a friendly ghost", "the moon's day off")  # fmt: skip
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
TARGET_RATIO = 3.0


@dataclass
class Outcome:
    ok: bool
    tokens: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    error: str = ""


@dataclass
class Level:
    clients: int
    wall: float = 0.0
    outcomes: list[Outcome] = field(default_factory=list)
    batch_width: float = 0.0
    client_cpu: float = 0.0  # CPU seconds of this process during the level

    @property
    def done(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.ok]

    @property
    def lost(self) -> int:
        return sum(not o.ok for o in self.outcomes)

    @property
    def tokens_per_s(self) -> float:
        return sum(o.tokens for o in self.done) / self.wall if self.wall else 0.0

    @property
    def client_cpu_pct(self) -> float:
        return 100 * self.client_cpu / self.wall if self.wall else 0.0


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (q in [0, 100])."""
    if not values:
        return float("nan")
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


async def one_request(client: httpx.AsyncClient, model: str, prompt: str, max_tokens: int, seed: int,
                      timeout: float) -> Outcome:  # fmt: skip
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0.8, "seed": seed, "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
    t0 = time.perf_counter()
    ttft, usage, done = 0.0, None, False
    try:
        async with asyncio.timeout(timeout), client.stream("POST", "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                return Outcome(False, error=f"HTTP {r.status_code}: {(await r.aread())[:200]!r}")
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    break
                event = json.loads(data)
                if "error" in event:
                    return Outcome(False, error=event["error"]["message"])
                if event.get("usage"):
                    usage = event["usage"]
                if not ttft and any(c["delta"].get("content") for c in event["choices"]):
                    ttft = time.perf_counter() - t0
    except (httpx.HTTPError, TimeoutError) as e:
        return Outcome(False, error=f"{type(e).__name__}: {e}")
    if not done or usage is None:
        return Outcome(False, error="the stream ended without usage and [DONE]")
    latency = time.perf_counter() - t0
    return Outcome(True, usage["completion_tokens"], ttft or latency, latency)


async def metric(client: httpx.AsyncClient, name: str) -> float:
    text = (await client.get("/metrics")).text
    for line in text.splitlines():
        if line.startswith(f"llamay_{name} "):
            return float(line.split()[1])
    return 0.0


async def run_level(url: str, model: str, clients: int, requests: int, max_tokens: int, timeout: float) -> Level:
    level = Level(clients)
    limits = httpx.Limits(max_connections=clients + 2)
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:
        steps0, seqs0 = await metric(client, "batch_steps_total"), await metric(client, "batch_sequences_total")

        async def worker(w: int) -> None:
            for i in range(requests):
                n = w * requests + i
                prompt = f"Write a short story about {TOPICS[n % len(TOPICS)]}."
                level.outcomes.append(await one_request(client, model, prompt, max_tokens, 1000 + n, timeout))

        t0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(w) for w in range(clients)))
        level.wall = time.perf_counter() - t0
        level.client_cpu = time.process_time() - cpu0
        steps, seqs = await metric(client, "batch_steps_total") - steps0, await metric(client, "batch_sequences_total")
        level.batch_width = (seqs - seqs0) / steps if steps else 0.0
    return level


def start_server(args: argparse.Namespace, parallel: int) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "llamay.native.cli", "serve", "--port", "0", "--parallel", str(parallel),
           "--queue", str(max(64, parallel * 4)), "-c", str(args.ctx_size)]  # fmt: skip
    if args.model:
        cmd += ["-m", args.model]
    if args.backend:
        cmd += ["--backend", args.backend]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(args.timeout)
    if not first or not first[0].startswith("http://"):
        proc.kill()
        raise SystemExit(f"server_load: the server did not start ({first!r})")
    return proc, first[0].strip()


def report(levels: list[Level]) -> None:
    print(f"{'clients':>7} {'ok':>4} {'lost':>4} {'tok/s':>8} {'width':>6} "
          f"{'TTFT p50':>9} {'p95':>7} {'p99':>7} {'lat p50':>8} {'p95':>7} {'p99':>7} {'cli CPU':>8}")  # fmt: skip
    for lv in levels:
        ttft = [o.ttft for o in lv.done]
        lat = [o.latency for o in lv.done]
        print(f"{lv.clients:>7} {len(lv.done):>4} {lv.lost:>4} {lv.tokens_per_s:>8.1f} {lv.batch_width:>6.2f} "
              f"{percentile(ttft, 50):>8.2f}s {percentile(ttft, 95):>6.2f}s {percentile(ttft, 99):>6.2f}s "
              f"{percentile(lat, 50):>7.2f}s {percentile(lat, 95):>6.2f}s {percentile(lat, 99):>6.2f}s "
              f"{lv.client_cpu_pct:>7.1f}%")  # fmt: skip
        for o in lv.outcomes:
            if not o.ok:
                print(f"        lost: {o.error}")
    base, top = levels[0], levels[-1]
    if base.tokens_per_s and len(levels) > 1:
        ratio = top.tokens_per_s / base.tokens_per_s
        verdict = "meets" if ratio >= TARGET_RATIO else "below"
        print(f"\n{top.clients} clients vs {base.clients}: {ratio:.2f}x the token rate ({verdict} the "
              f"{TARGET_RATIO:g}x target); lost requests: {sum(lv.lost for lv in levels)}")  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-m", "--model", help="GGUF or catalogue name (default: the default model)")
    p.add_argument("--url", help="an already running server on this machine (loopback only)")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    p.add_argument("--requests", type=int, default=2, help="requests per client (default 2)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("-c", "--ctx-size", type=int, default=512, help="context per sequence of a started server")
    p.add_argument("--backend", help="kernel backend of a started server")
    p.add_argument("-t", "--threads", type=int, default=0, help="kernel threads of a started server (default: its own)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds any one request may take")
    args = p.parse_args()
    proc = None
    if args.url:
        if urlparse(args.url).hostname not in LOOPBACK:
            raise SystemExit("server_load: --url must be a loopback address (this is a local benchmark)")
        url = args.url.rstrip("/")
    else:
        proc, url = start_server(args, max(args.clients))
    try:
        model = httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"]
        print(f"server_load: {model} at {url}; {args.requests} request(s) per client, {args.max_tokens} tokens each")
        asyncio.run(run_level(url, model, max(args.clients), 1, 4, args.timeout))  # warm-up (kernel compilation)
        levels = []
        for n in args.clients:
            levels.append(asyncio.run(run_level(url, model, n, args.requests, args.max_tokens, args.timeout)))
            print(f"  {n} client(s): {levels[-1].tokens_per_s:.1f} tok/s, {levels[-1].lost} lost", flush=True)
        print()
        report(levels)
        return 1 if any(lv.lost for lv in levels) else 0
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    sys.exit(main())
