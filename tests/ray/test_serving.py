"""Two llamay replicas behind Ray's HTTP proxy: both serve, the OpenAI, llama-server and Ollama routes answer
as `llamay serve` does, and streams (SSE, NDJSON) come through the proxy as they are written."""

from __future__ import annotations

import json
import threading
import time

import pytest

from llamay.native.ray.relay import REPLICA_HEADER, RETRY_HEADER


@pytest.fixture(scope="module")
def two(cluster):
    cluster.deploy(replicas=2, parallel=2, queue=8)
    return cluster


def chat(i: int) -> dict:
    return {"messages": [{"role": "user", "content": f"Name a colour. ({i})"}], "max_tokens": 4, "temperature": 0}


def test_two_replicas_both_serve(two):
    seen = {}
    with two.client() as c:
        for i in range(16):  # 16 chats with their own keys over 2 replicas: both get some (2**-15 that not)
            r = c.post("/v1/chat/completions", json=chat(i))
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["message"]["content"]
            seen.setdefault(r.headers[REPLICA_HEADER], 0)
            seen[r.headers[REPLICA_HEADER]] += 1
        assert len(seen) == 2, seen
        health = c.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert c.get("/v1/models").json()["data"][0]["id"]
        assert c.post("/tokenize", json={"content": "hello world"}).json()["tokens"]


def test_sse_streams_through_the_proxy_as_written(two):
    body = {**chat(1), "max_tokens": 48, "stream": True, "stream_options": {"include_usage": True}}
    arrivals, parts = [], []
    with two.client() as c:
        whole = c.post("/v1/chat/completions", json={**chat(1), "max_tokens": 48}).json()
        with c.stream("POST", "/v1/chat/completions", json=body) as s:
            assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
            for line in s.iter_lines():
                if line.startswith("data: "):
                    arrivals.append(time.monotonic())
                    parts.append(line[6:])
    assert parts[-1] == "[DONE]"
    events = [json.loads(p) for p in parts[:-1]]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    assert text == whole["choices"][0]["message"]["content"]  # greedy: the stream says what the answer said
    assert events[-1]["usage"]["completion_tokens"] == whole["usage"]["completion_tokens"]
    # written token by token, not buffered by the proxy: the events arrive spread over the generation
    assert len(events) > 10
    assert arrivals[len(arrivals) // 2] - arrivals[0] > 0.05 and arrivals[-1] - arrivals[len(arrivals) // 2] > 0.05


def test_ndjson_streams_through_the_proxy(two):
    body = {"model": "x", "messages": [{"role": "user", "content": "Say hello."}], "options": {"num_predict": 12,
            "temperature": 0}}  # fmt: skip
    with two.client() as c:
        whole = c.post("/api/chat", json={**body, "stream": False}).json()
        with c.stream("POST", "/api/chat", json=body) as s:
            assert s.status_code == 200 and s.headers["content-type"].startswith("application/x-ndjson")
            lines = [json.loads(line) for line in s.iter_lines() if line]
    assert lines[-1]["done"] is True and all(not x["done"] for x in lines[:-1])
    assert "".join(x["message"]["content"] for x in lines) == whole["message"]["content"]
    assert lines[-1]["eval_count"] == whole["eval_count"]


def test_a_full_replicas_429_is_retried_on_the_other_once(cluster):
    # one sequence and one queued request per replica, and Ray lets more through than that (max_ongoing_requests),
    # so a third request with the same key finds its replica full (llamay's 429) and goes to the other
    cluster.deploy(replicas=2, parallel=1, queue=1, max_ongoing_requests=8, stats_period_s=60)
    body = {"messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 160}
    out: list = []

    def one() -> None:
        with cluster.client() as c:
            r = c.post("/v1/chat/completions", json=body)
            out.append((r.status_code, r.headers.get(REPLICA_HEADER), r.headers.get(RETRY_HEADER)))

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
        time.sleep(0.5)  # in order: the first runs, the second queues, the third is refused and retried
    for t in threads:
        t.join(180)
    assert all(status == 200 for status, _, _ in out), out
    retried = [o for o in out if o[2] == "429"]
    assert len(retried) == 1, out
    others = {rid for _, rid, why in out if why is None}
    assert len(others) == 1 and retried[0][1] not in others  # the retry went to the other replica
