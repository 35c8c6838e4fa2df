"""Work that grows with a request's content (tokenizing, templates, compiling a schema) runs on preparation
threads, not on the event loop: while one request is being prepared for seconds, every other client is answered
at once. And the preparation threads take a bounded number of requests."""

from __future__ import annotations

import gc
import random
import subprocess
import sys
import threading
import time
from urllib.parse import urlsplit

import pytest

from llamay.native.server.limits import MAX_TOKENIZE_CHARS
from tests.server.conftest import STORIES_ID

pytestmark = pytest.mark.native_only

MIN_SECONDS = 0.5  # a request this long shows whether /health waited for it (20 ms between polls: ~25 answers)


# Polls /health from its own process (the test's in-process clients would share the server's GIL and add their
# own thread handoffs to every answer): prints, per answer, when it was asked (CLOCK_MONOTONIC is system-wide), how
# long it took and its status, until its stdin closes.
_POLLER = r"""
import http.client, select, sys, time
conn = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=60)
while not select.select([sys.stdin], [], [], 0)[0]:
    t0 = time.monotonic()
    conn.request("GET", "/health")
    r = conn.getresponse()
    r.read()
    print(t0, time.monotonic() - t0, r.status, flush=True)
    time.sleep(0.02)
"""


def _health_while(server, post) -> tuple[float, float, int]:
    """(seconds the request took, the slowest /health asked meanwhile, /health answers asked meanwhile). No
    absolute time is asserted on (the machine is shared): only against the request's own duration.

    The server runs in the test process: its heap is the whole suite's, which the garbage collector's full
    passes walk, holding the GIL for a second or more. Frozen meanwhile, as `llamay serve` freezes what its load
    made, so that what is measured is the server's own pauses."""
    gc.collect()
    gc.freeze()
    try:
        return _measure(server, post)
    finally:
        gc.unfreeze()


def _measure(server, post) -> tuple[float, float, int]:
    url = urlsplit(server.url)
    poller = subprocess.Popen(
        [sys.executable, "-c", _POLLER, url.hostname, str(url.port)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert poller.stdout.readline(), "the /health poller did not start"
        t0 = time.monotonic()
        r = post()
        t1 = time.monotonic()
        assert r.status_code < 500, r.text
    finally:
        out, _ = poller.communicate(input="stop\n", timeout=60)
    answers = [line.split() for line in out.splitlines()]
    during = [(float(dt), status) for at, dt, status in answers if t0 <= float(at) < t1]
    assert all(status == "200" for _, status in during), during
    return t1 - t0, max((dt for dt, _ in during), default=0.0), len(during)


def _words(n_chars: int, seed: int) -> str:
    rng = random.Random(seed)  # fresh words: no tokenizer cache helps
    out: list[str] = []
    size = 0
    while size < n_chars:
        w = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n_chars]


def _long_enough(attempt, scales: tuple[int, ...]) -> tuple[float, float, int]:
    """attempt(scale) with the work scaled up until the request takes more than MIN_SECONDS: a fast machine
    prepares a fixed request too quickly to show whether /health waited for it."""
    for scale in scales:
        took, slowest, answers = attempt(scale)
        if took > MIN_SECONDS:
            return took, slowest, answers
    pytest.fail(f"even the largest request took only {took:.2f} s: too little to show anything")


def test_health_answers_while_a_huge_text_is_tokenized(server):
    seed = int(time.time())

    def attempt(scale: int) -> tuple[float, float, int]:
        text = _words(min(250_000 * scale, MAX_TOKENIZE_CHARS), seed=seed + scale)
        body = {"content": text, "with_pieces": scale > 4}  # past the longest text: each token's piece too
        with server.client(timeout=120) as c:
            return _health_while(server, lambda: c.post("/tokenize", json=body))

    took, slowest, answers = _long_enough(attempt, (1, 2, 4, 8))
    # on the event loop, one /health would have waited for all of it (slowest ~ took, one or two answers)
    assert answers >= 4 and slowest < took / 2, (took, slowest, answers)


def test_health_answers_while_a_heavy_schema_compiles(server):
    salt = random.randrange(1 << 30)  # a schema not in the compiled-constraint cache

    def attempt(scale: int) -> tuple[float, float, int]:
        # (short names: the largest, 100,000 properties listed in order, is about 6.5 MB, within max_body_bytes)
        props = {f"f{i}_{salt:x}_{scale}": {"type": "integer"} for i in range(2000 * scale)}
        schema = {"type": "object", "properties": props, "required": list(props)}
        fmt = {"type": "json_schema", "json_schema": {"name": "big", "schema": schema}}
        body = {"model": STORIES_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1,
                "response_format": fmt}  # fmt: skip
        with server.client(timeout=120) as c:
            return _health_while(server, lambda: c.post("/v1/chat/completions", json=body))

    took, slowest, answers = _long_enough(attempt, (1, 2, 4, 8, 16, 32, 50))
    assert answers >= 4 and slowest < took / 2, (took, slowest, answers)


def test_the_preparation_threads_take_a_bounded_number_of_requests(server):
    """Beyond `limits.max_preparing` requests being prepared at once, more are told to retry (429)."""
    import asyncio

    from llamay.native.server.errors import ApiError

    service = server.service
    gate = threading.Event()

    async def fill() -> list:
        limit = service.limits.max_preparing
        waiting = [asyncio.ensure_future(service.offload(gate.wait, 30)) for _ in range(limit)]
        await asyncio.sleep(0.05)
        try:
            await service.offload(time.sleep, 0)
        except ApiError as e:
            refused = e
        else:
            refused = None
        gate.set()
        await asyncio.gather(*waiting)
        return [refused]

    (refused,) = asyncio.run(fill())
    assert refused is not None and refused.status == 429 and refused.headers["Retry-After"] == "1"
    assert service._preparing == 0
