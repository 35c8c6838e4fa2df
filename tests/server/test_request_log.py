"""The request log: one line per request (method, path, status, tokens in and out where known, milliseconds), the
tokens those of the reply's own usage."""

from __future__ import annotations

import json
import logging
import re
import socket

import pytest

from tests.server.conftest import STORIES_ID, wait_for

pytestmark = pytest.mark.native_only

LINE = re.compile(r"^(\S+) (\S+) (\d{3})(?: in=(\d+))?(?: out=(\d+))? (\d+) ms$")


def lines(caplog) -> list[tuple]:
    found = []
    for rec in caplog.records:
        if rec.name == "llamay.server.requests":
            m = LINE.match(rec.getMessage())
            assert m, rec.getMessage()
            found.append(m.groups())
    return found


def test_one_line_per_request_with_its_tokens(server, client, caplog):
    with caplog.at_level(logging.INFO, logger="llamay.server.requests"):
        body = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 5, "n": 2}
        usage = client.post("/v1/completions", json=body).json()["usage"]
        with client.stream(
            "POST",
            "/chat/completions",
            json={
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        ) as r:
            events = [x for x in r.iter_lines() if x.startswith("data: {")]
        streamed = json.loads(events[-1][6:])["usage"]
        emb = client.post("/v1/embeddings", json={"input": ["a cat", "a dog"]}).json()["usage"]
        ollama = client.post("/api/generate", json={"model": STORIES_ID, "prompt": "Once", "stream": False,
                                                    "options": {"num_predict": 3}}).json()  # fmt: skip
        client.get("/health")
        client.post("/api/chat", content=b"{}", headers={"content-type": "text/plain"})
        client.post("/v1/completions", json={"prompt": "x", "top_p": 7})
        # a line is written once the last byte is sent: the client may have it, and go on, a moment before
        wait_for(lambda: len(lines(caplog)) == 7, what="seven request lines")
    got = {(m, p, int(s)): (t_in and int(t_in), t_out and int(t_out)) for m, p, s, t_in, t_out, _ms in lines(caplog)}
    assert got == {
        ("POST", "/v1/completions", 200): (usage["prompt_tokens"], usage["completion_tokens"]),  # n=2: both choices
        ("POST", "/chat/completions", 200): (streamed["prompt_tokens"], streamed["completion_tokens"]),  # at its end
        ("POST", "/v1/embeddings", 200): (emb["prompt_tokens"], None),
        ("POST", "/api/generate", 200): (len(ollama["context"]) - 3, 3),  # its context: the prompt, then the reply
        ("GET", "/health", 200): (None, None),
        ("POST", "/api/chat", 415): (None, None),  # the guard's refusal
        ("POST", "/v1/completions", 400): (None, None),
    }


def test_no_lines_when_the_logger_is_off(server, client, caplog):
    with caplog.at_level(logging.WARNING, logger="llamay.server.requests"):
        client.get("/health")
    assert lines(caplog) == []


def test_a_client_gone_before_its_answer_is_not_a_server_error(server, client, caplog):
    """A client that hangs up in the middle of its body gets nothing; it is counted as nginx's 499 (client closed
    request), not the 500 it was counted as before (a dashboard alerting on 5xx saw a server failure)."""
    host, port = server.url.removeprefix("http://").split(":")
    errors_before = _count(client, "unmatched", "500")  # the session's server: other tests' 500s stay counted
    with caplog.at_level(logging.INFO, logger="llamay.server.requests"):
        with socket.create_connection((host, int(port))) as s:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{\"prompt\": ")  # fmt: skip
        wait_for(lambda: any(p == "/v1/completions" for _m, p, *_ in lines(caplog)), what="the request's line")
    assert [s for _m, p, s, *_ in lines(caplog) if p == "/v1/completions"] == ["499"]
    assert _count(client, "unmatched", "499") >= 1
    assert _count(client, "unmatched", "500") == errors_before


def _count(client, route: str, status: str) -> int:
    series = f'llamay_requests_total{{method="POST",route="{route}",status="{status}"}} '
    lines = [x for x in client.get("/metrics").text.splitlines() if x.startswith(series)]
    return int(float(lines[0].split()[-1])) if lines else 0
