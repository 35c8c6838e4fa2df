"""`llamay serve`'s connections (its uvicorn config, native/commands/serve.py): sockets that connect and never
finish a request head are closed by the deadline and never keep a real request out (the limits themselves are
tested on `llamay web` in tests/native/test_connections.py; this checks the API server has them too)."""

from __future__ import annotations

import socket
import time

import pytest

from llamay.native.connections import Limits
from tests.native.test_connections import closed_by_server
from tests.paths import stories
from tests.server.conftest import start_server

pytestmark = pytest.mark.native_only

LIMITS = Limits(head_timeout=1.0, keep_alive=1, connections=16)
HALF_OPEN = 64


@pytest.fixture(scope="module")
def guarded():
    live = start_server(stories("f32"), n_ctx=256, parallel=2, queue=4, limits=LIMITS)
    yield live
    live.stop()


def test_half_open_connections_are_closed_and_a_request_still_gets_in(guarded):
    host, port = guarded.url.removeprefix("http://").split(":")
    socks = []
    try:
        for i in range(HALF_OPEN):
            s = socket.create_connection((host, int(port)), timeout=10)
            if i % 2:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the head never ends
            socks.append(s)
        with guarded.client(timeout=10) as c:
            assert c.get("/health").status_code == 200  # more half-open sockets than the bound: idle ones gave way
        deadline = time.monotonic() + LIMITS.head_timeout + 10
        still_open = [s for s in socks if not closed_by_server(s, max(0.01, deadline - time.monotonic()))]
        assert not still_open, f"{len(still_open)} of {HALF_OPEN} half-open connections still open"
    finally:
        for s in socks:
            s.close()
