"""Hostile requests through Ray's proxy get what plain `llamay serve` answers them (the reference: a llamay server
on loopback with the replicas' model and limits, in this process): the same status and the same error body, for
the same reason first (a foreign Origin with an oversized body is refused for its Origin, on both). A client that
leaves mid-stream frees what its request held on the replica, and the replica serves the next request."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("ray")

from llamay.native.ray.relay import MAX_BODY, REPLICA_HEADER
from tests.paths import SMOLLM2, registry_model
from tests.ray.cluster import MAIN, Streamed
from tests.server.conftest import start_server

CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
JSON = {"content-type": "application/json"}
EVIL = "http://evil.example"


def chunked(total: int) -> Iterator[bytes]:  # a body without Content-Length: refused as it passes the limit
    for _ in range(total // (1 << 20) + 1):
        yield b"x" * (1 << 20)


def sent(content: bytes | Callable[[], Iterator[bytes]], **headers: str) -> dict:
    """A raw body labelled JSON (a function: a body made anew for each server, sent chunked)."""
    return {"content": content, "headers": {**JSON, **headers}}


LARGE = b"x" * (MAX_BODY + 1)
# name -> (method, path, the request's httpx arguments)
CASES: dict[str, tuple[str, str, dict]] = {
    "bad JSON": ("POST", "/v1/chat/completions", sent(b'{"messages": [')),
    "bad JSON, Ollama": ("POST", "/api/chat", sent(b'{"model": "x", ')),
    "not UTF-8": ("POST", "/v1/chat/completions", sent(b'{"messages": "\xff"}')),
    "nested too deep": ("POST", "/v1/chat/completions", sent(b"[" * 10**5 + b"]" * 10**5)),
    "not an object": ("POST", "/v1/chat/completions", sent(b"[1, 2]")),
    "no body": ("POST", "/v1/chat/completions", sent(b"")),
    "unknown field": ("POST", "/v1/chat/completions", {"json": {**CHAT, "bogus": 1}}),
    "unknown field, llama-server": ("POST", "/completion", {"json": {"prompt": "x", "bogus": 1}}),
    "unknown field, Ollama": ("POST", "/api/generate", {"json": {"model": "x", "prompt": "x", "bogus": 1}}),
    "max_tokens past the context": ("POST", "/v1/chat/completions", {"json": {**CHAT, "max_tokens": 1 << 20}}),
    "max_tokens past any limit": ("POST", "/v1/chat/completions", {"json": {**CHAT, "max_tokens": 10**30}}),
    "n_predict past any limit": ("POST", "/completion", {"json": {"prompt": "x", "n_predict": 1 << 40}}),
    "num_predict past any limit": (
        "POST",
        "/api/generate",
        {"json": {"model": "x", "prompt": "x", "stream": False, "options": {"num_predict": 1 << 40}}},
    ),
    "foreign Host": ("POST", "/v1/chat/completions", {"json": CHAT, "headers": {"Host": "evil.example"}}),
    "foreign Host, Ollama": ("POST", "/api/chat", {"json": CHAT, "headers": {"Host": "evil.example"}}),
    "rebinding Host": ("GET", "/v1/models", {"headers": {"Host": "127.0.0.1.nip.io"}}),
    "foreign Origin": ("POST", "/v1/chat/completions", {"json": CHAT, "headers": {"Origin": EVIL}}),
    "foreign Origin, GET": ("GET", "/health", {"headers": {"Origin": EVIL}}),
    "foreign preflight": (
        "OPTIONS",
        "/v1/chat/completions",
        {"headers": {"Origin": EVIL, "Access-Control-Request-Method": "POST"}},
    ),
    "text/plain body": (
        "POST",
        "/v1/chat/completions",
        sent(json.dumps(CHAT).encode(), **{"content-type": "text/plain"}),
    ),
    "too large": ("POST", "/v1/completions", sent(LARGE)),
    "too large, Ollama": ("POST", "/api/chat", sent(LARGE)),
    "too large, chunked": ("POST", "/v1/completions", sent(lambda: chunked(MAX_BODY))),
    "too large from a foreign Origin": ("POST", "/v1/completions", sent(LARGE, Origin=EVIL)),
    "no such route": ("GET", "/v1/nothing", {}),
    "wrong method": ("GET", "/v1/chat/completions", {}),
}


@pytest.fixture(scope="module")
def plain() -> Iterator:
    live = start_server(registry_model(SMOLLM2), n_ctx=1024, parallel=MAIN["parallel"], queue=MAIN["queue"])
    yield live
    live.stop()


@pytest.fixture
def ids(cluster) -> list[str]:
    return cluster.deploy(**MAIN)


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_request_gets_what_plain_llamay_serve_answers(cluster, ids, plain, case):
    method, path, kwargs = CASES[case]
    answers = []
    for url in (plain.url, cluster.url):
        content = kwargs.get("content")
        with cluster.client() as c:
            r = c.request(method, url + path, **{**kwargs, "content": content() if callable(content) else content})
        # (a chunked body is refused once past the limit: by how much depends on how the bytes came in)
        said = re.sub(r"has \d+ bytes", "has N bytes", json.dumps(r.json()))
        answers.append((r.status_code, said, r.headers.get_list("x-content-type-options")))
    assert 400 <= answers[0][0] < 500, answers[0]
    assert answers[1] == answers[0]


def test_a_client_leaving_mid_stream_frees_its_slot(cluster, ids):
    body = {**CHAT, "max_tokens": 300, "stream": True}
    for rid in ids:
        s = Streamed(cluster, "/v1/chat/completions", body, replica=rid, leave=lambda s: len(s.events) >= 5)
        assert s.join().events[-1] != "[DONE]"
        cluster.wait_health(rid, "the replica idle again", lambda h: h["running"] == h["queue_depth"] == 0)
        # every sequence given back (a lambda of no globals: Ray ships it by value to the replica's process)
        held = cluster.on_replica(rid, lambda engine: [s.active for s in engine.service.scheduler.state.kv.sequences])
        assert held and not any(held), held
        with cluster.client() as c:
            r = c.post("/v1/chat/completions", json=CHAT, headers={REPLICA_HEADER: rid})
        assert r.status_code == 200 and r.headers[REPLICA_HEADER] == rid, r.text
