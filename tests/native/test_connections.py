"""Connection limits (llamay.native.connections) on `llamay web`'s server over loopback: many connections that
never finish their request head neither hold the server nor keep a real request out, and are closed by the
deadline; a download in progress is never closed to make room."""

from __future__ import annotations

import http.client
import socket
import time
from urllib.parse import urlsplit

import pytest

pytest.importorskip("uvicorn")  # the native server's extra (absent under Pyodide)

from llamay.native.commands.web import WebServer
from llamay.native.connections import Limits

pytestmark = pytest.mark.native_only

LIMITS = Limits(head_timeout=1.0, keep_alive=1, connections=32)
HALF_OPEN = 200  # connections that send part of a request head, or nothing, and wait
BIG = 8 << 20  # a download that cannot fit in the socket buffers: its response stays in progress while unread


@pytest.fixture
def server(tmp_path):
    web, models = tmp_path / "web", tmp_path / "models"
    web.mkdir()
    models.mkdir()
    (web / "index.html").write_text("<!doctype html><title>ok</title>")
    (models / "big.gguf").write_bytes(bytes(range(256)) * (BIG // 256))
    srv = WebServer(web, models, limits=LIMITS).start()
    yield srv
    srv.close()


def address(server) -> tuple[str, int]:
    u = urlsplit(server.url)
    return u.hostname, u.port


def half_open(server, n: int) -> list[socket.socket]:
    socks = []
    for i in range(n):
        s = socket.create_connection(address(server), timeout=10)
        if i % 2:
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the head never ends
        socks.append(s)
    return socks


def closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def normal_request(server) -> int:
    conn = http.client.HTTPConnection(*address(server), timeout=5)
    try:
        conn.request("GET", "/")
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


def test_half_open_connections_do_not_keep_a_request_out_and_are_closed(server):
    socks = half_open(server, HALF_OPEN)
    try:
        t0 = time.monotonic()
        assert normal_request(server) == 200
        assert time.monotonic() - t0 < LIMITS.head_timeout  # served at once, not after the deadline freed room
        deadline = time.monotonic() + LIMITS.head_timeout + 10
        still_open = [s for s in socks if not closed_by_server(s, max(0.01, deadline - time.monotonic()))]
        assert not still_open, f"{len(still_open)} of {HALF_OPEN} half-open connections still open"
        assert normal_request(server) == 200
    finally:
        for s in socks:
            s.close()


def test_a_trickled_head_does_not_extend_the_deadline(server):
    s = socket.create_connection(address(server), timeout=10)
    try:
        t0 = time.monotonic()
        for byte in b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n":
            try:
                s.send(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            if closed_by_server(s, 0.2):
                break
        assert time.monotonic() - t0 < LIMITS.head_timeout + 3, "the server kept waiting for the head"
    finally:
        s.close()


def test_a_download_in_progress_is_not_closed_to_make_room(server):
    s = socket.create_connection(address(server), timeout=30)
    try:
        s.sendall(b"GET /models/big.gguf HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        got = s.recv(65536)
        assert got.startswith(b"HTTP/1.1 200")
        others = half_open(server, LIMITS.connections * 2)  # more than the bound: idle ones make room
        try:
            time.sleep(LIMITS.head_timeout + 0.5)
            while chunk := s.recv(1 << 20):
                got += chunk
        finally:
            for o in others:
                o.close()
        body = got.split(b"\r\n\r\n", 1)[1]
        assert len(body) == BIG and body == bytes(range(256)) * (BIG // 256)
    finally:
        s.close()
