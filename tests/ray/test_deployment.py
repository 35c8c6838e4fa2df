"""Two llamay replicas behind Ray's HTTP proxy: both serve (each request on the replica the router names for its
key, or the one the client names), the OpenAI, llama-server and Ollama routes answer as `llamay serve` does,
streams (SSE, NDJSON) come through the proxy as they are written, and a replica that fails Ray's health check is
replaced."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("ray")

from llamay.native.ray.prefix_key import prefix_key
from llamay.native.ray.relay import REPLICA_HEADER
from llamay.native.ray.router import rendezvous
from tests.ray.cluster import MAIN, wait_for


@pytest.fixture
def ids(cluster) -> list[str]:
    return cluster.deploy(**MAIN)


def chat(i: int) -> dict:
    return {"messages": [{"role": "user", "content": f"Name a colour. ({i})"}], "max_tokens": 4, "temperature": 0}


def test_two_replicas_both_serve(cluster, ids):
    assert len(ids) == 2
    # a chat whose key the router gives to each replica (the first of its rendezvous order), and one naming each
    owned = {rid: next(i for i in range(64) if rendezvous(prefix_key("/v1/chat/completions", chat(i)), ids)[0] == rid)
             for rid in ids}  # fmt: skip
    with cluster.client() as c:
        for rid in ids:
            for r in (c.post("/v1/chat/completions", json=chat(owned[rid])),
                      c.post("/v1/chat/completions", json=chat(100), headers={REPLICA_HEADER: rid})):  # fmt: skip
                assert r.status_code == 200, r.text
                assert r.headers[REPLICA_HEADER] == rid
                assert r.json()["choices"][0]["message"]["content"]
        health = c.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert c.get("/v1/models").json()["data"][0]["id"]
        assert c.post("/tokenize", json={"content": "hello world"}).json()["tokens"]
        # a replica the client names that is not there: routed as any other request
        r = c.post("/v1/chat/completions", json=chat(1), headers={REPLICA_HEADER: "no-such-replica"})
        assert r.status_code == 200 and r.headers[REPLICA_HEADER] in ids


def test_sse_streams_through_the_proxy_as_written(cluster, ids):
    body = {**chat(1), "max_tokens": 48, "stream": True, "stream_options": {"include_usage": True}}
    arrivals, parts = [], []
    with cluster.client() as c:
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


def test_ndjson_streams_through_the_proxy(cluster, ids):
    body = {"model": "x", "messages": [{"role": "user", "content": "Say hello."}], "options": {"num_predict": 12,
            "temperature": 0}}  # fmt: skip
    with cluster.client() as c:
        whole = c.post("/api/chat", json={**body, "stream": False}).json()
        with c.stream("POST", "/api/chat", json=body) as s:
            assert s.status_code == 200 and s.headers["content-type"].startswith("application/x-ndjson")
            lines = [json.loads(line) for line in s.iter_lines() if line]
    assert lines[-1]["done"] is True and all(not x["done"] for x in lines[:-1])
    assert "".join(x["message"]["content"] for x in lines) == whole["message"]["content"]
    assert lines[-1]["eval_count"] == whole["eval_count"]


def test_a_replica_failing_its_health_check_is_replaced(cluster, ids):
    victim, survivor = ids
    with cluster.client() as c:  # its model thread runs (it starts with a replica's first request)
        assert c.post("/v1/chat/completions", json=chat(2), headers={REPLICA_HEADER: victim}).status_code == 200

    def stop(engine) -> tuple[int, str]:  # in the replica: its model thread stops, as if it had crashed
        engine.service.scheduler.stop()
        try:
            engine.check_health()
        except RuntimeError as e:
            return engine.service.health()[0], str(e)
        return engine.service.health()[0], "check_health passed"

    # llamay's /health says so (503), and so does Engine.check_health, Ray's health check
    assert cluster.on_replica(victim, stop) == (503, "llamay replica unhealthy: the model thread has stopped")
    wait_for("Ray replaces the unhealthy replica", lambda: victim not in cluster.replica_ids())
    now = cluster.wait_running(2)
    assert survivor in now and victim not in now
    with cluster.client() as c:  # the new replica serves, and so does the one that was there all along
        for rid in now:
            r = c.post("/v1/chat/completions", json=chat(3), headers={REPLICA_HEADER: rid})
            assert r.status_code == 200 and r.headers[REPLICA_HEADER] == rid, r.text
