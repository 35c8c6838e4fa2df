"""A replica's process killed mid-stream: its streams end with an error event saying so (SSE) or an error line
(NDJSON), a request it had not answered yet is answered by the other replica, the other replica's streams go on
to their end, and Ray starts a new replica in its place."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

from llamay.native.ray.prefix_key import prefix_key
from llamay.native.ray.relay import REPLICA_HEADER, RETRY_HEADER
from llamay.native.ray.router import rendezvous

LONG = 400  # tokens: far longer than the test waits before the kill


def body(i: int) -> dict:
    return {"messages": [{"role": "user", "content": f"Tell me a long story about river number {i}."}]}


def owner(i: int, replicas: list[str], path: str = "/v1/chat/completions") -> str:
    return rendezvous(prefix_key(path, body(i)), replicas)[0]


def test_killing_a_replica_mid_stream_fails_only_its_requests(cluster):
    cluster.deploy(replicas=2, parallel=3, queue=4)
    with cluster.client() as c:
        ids = {c.post("/v1/chat/completions", json={**body(i), "max_tokens": 1}).headers[REPLICA_HEADER]
               for i in range(12)}  # fmt: skip
    assert len(ids) == 2, ids
    victim, survivor = sorted(ids)
    # requests whose prefix key the router sends to each replica (what test_router checks), found by their key
    pick = {rid: [i for i in range(64) if owner(i, [victim, survivor]) == rid][:2] for rid in (victim, survivor)}
    ollama = {rid: next(i for i in range(64, 128) if owner(i, [victim, survivor], "/api/chat") == rid)
              for rid in (victim, survivor)}  # fmt: skip
    results: dict[str, dict] = {}

    def sse(tag: str, i: int) -> None:
        events: list = []
        results[tag] = out = {"events": events}
        req = {**body(i), "max_tokens": LONG, "stream": True}
        with cluster.client() as c, c.stream("POST", "/v1/chat/completions", json=req) as s:
            out["replica"] = s.headers[REPLICA_HEADER]
            for line in s.iter_lines():
                if line.startswith("data: "):
                    events.append(line[6:])

    def ndjson(tag: str, i: int) -> None:
        lines: list = []
        results[tag] = out = {"events": lines}
        req = {**body(i), "model": "x", "options": {"num_predict": LONG}}
        with cluster.client() as c, c.stream("POST", "/api/chat", json=req) as s:
            out["replica"] = s.headers[REPLICA_HEADER]
            for line in s.iter_lines():
                if line:
                    lines.append(json.loads(line))

    def whole(tag: str, i: int) -> None:
        with cluster.client() as c:
            r = c.post("/v1/chat/completions", json={**body(i), "max_tokens": 48})
            results[tag] = {"status": r.status_code, "replica": r.headers.get(REPLICA_HEADER),
                            "retried": r.headers.get(RETRY_HEADER), "json": r.json()}  # fmt: skip

    pid = cluster.replica_pid(victim)
    jobs = [("v-sse", sse, pick[victim][0]), ("v-nd", ndjson, ollama[victim]), ("s-sse", sse, pick[survivor][0]),
            ("s-nd", ndjson, ollama[survivor])]  # fmt: skip
    threads = [threading.Thread(target=f, args=(tag, i)) for tag, f, i in jobs]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while not all(len(results.get(tag, {}).get("events", [])) >= 5 for tag, _, _ in jobs):
        assert time.monotonic() < deadline, {k: len(v.get("events", [])) for k, v in results.items()}
        time.sleep(0.1)
    late = threading.Thread(target=whole, args=("v-whole", pick[victim][1]))  # sent to the victim, not answered yet
    late.start()
    time.sleep(0.3)
    os.kill(pid, signal.SIGKILL)
    for t in [*threads, late]:
        t.join(300)
        assert not t.is_alive()

    assert {results[t]["replica"] for t in ("v-sse", "v-nd")} == {victim}
    assert {results[t]["replica"] for t in ("s-sse", "s-nd")} == {survivor}
    # the victim's streams: an error saying the replica stopped, then their end, and no finish
    events = results["v-sse"]["events"]
    assert events[-1] == "[DONE]" and json.loads(events[-2])["error"]["code"] == "replica_died"
    assert not any(json.loads(e)["choices"][0].get("finish_reason") for e in events[:-2] if "choices" in e)
    lines = results["v-nd"]["events"]
    assert "stopped mid-stream" in lines[-1]["error"] and not any(x.get("done") for x in lines)
    # the survivor's go on to their end
    events = results["s-sse"]["events"]
    assert events[-1] == "[DONE]" and json.loads(events[-2])["choices"][0]["finish_reason"] in ("length", "stop")
    assert not any("error" in e for e in events)
    lines = results["s-nd"]["events"]
    assert lines[-1]["done"] is True and not any("error" in x for x in lines)
    # nothing of the unanswered request had been sent: it was answered by the survivor
    late_result = results["v-whole"]
    assert late_result["status"] == 200 and late_result["replica"] == survivor, late_result
    assert late_result["retried"] == "replica-died"

    cluster.wait_running(2, timeout=180)  # Ray replaces the replica
    with cluster.client() as c:
        now = set()
        for i in range(12):
            r = c.post("/v1/chat/completions", json={**body(i), "max_tokens": 1})
            assert r.status_code == 200, r.text
            now.add(r.headers[REPLICA_HEADER])
    assert survivor in now and victim not in now and len(now) == 2, (now, victim, survivor)
