"""A replica's process killed mid-stream: its streams end with an error event saying so (SSE) or an error line
(NDJSON), a request it had not answered yet is answered by the other replica, the other replica's streams go on,
and Ray starts a new replica in its place."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

pytest.importorskip("ray")

from llamay.native.ray.relay import REPLICA_HEADER, RETRY_HEADER
from tests.ray.cluster import MAIN, WAIT_S, Streamed, wait_for

LONG = 400  # tokens: every stream is still generating when the victim is killed
LATE = 16  # tokens of the request the victim holds but has not answered (queued behind its paused thread)
AFTER = 8  # events the survivor's streams are read for after the kill (then their clients leave)
SSE, NDJSON = "/v1/chat/completions", "/api/chat"


def body(path: str, tag: str, n: int) -> dict:
    msgs = [{"role": "user", "content": f"Tell me a long story about the river {tag}."}]
    if path == NDJSON:
        return {"model": "x", "messages": msgs, "options": {"num_predict": n}}
    return {"messages": msgs, "max_tokens": n, "stream": True}


def test_killing_a_replica_mid_stream_fails_only_its_requests(cluster):
    victim, survivor = cluster.deploy(**MAIN)
    pid = cluster.pid(victim)
    killed_at: list[float] = []

    def gone_on(s: Streamed) -> bool:  # a survivor's stream read long enough after the kill: its client leaves
        return s.replica == survivor and bool(killed_at) and s.after(killed_at[0]) >= AFTER

    streams = {(path, rid): Streamed(cluster, path, body(path, rid, LONG), replica=rid, leave=gone_on)
               for path in (SSE, NDJSON) for rid in (victim, survivor)}  # fmt: skip
    wait_for("every stream's first tokens", lambda: all(len(s.events) >= 3 for s in streams.values()))
    # the victim's model thread paused: its streams are mid-way when it dies, and a request sent to it now waits in
    # its queue, not answered (a whole answer is sent at its end)
    cluster.on_replica(victim, lambda engine: engine.service.scheduler.pause())
    late: dict = {}

    def whole() -> None:
        with cluster.client() as c:
            r = c.post(SSE, json={**body(SSE, "late", LATE), "stream": False}, headers={REPLICA_HEADER: victim})
        late.update(status=r.status_code, replica=r.headers.get(REPLICA_HEADER), retried=r.headers.get(RETRY_HEADER),
                    text=r.text)  # fmt: skip

    t = threading.Thread(target=whole)
    t.start()
    cluster.wait_health(victim, "the late request queued on the victim", lambda h: h["queue_depth"] == 1)
    killed_at.append(time.monotonic())
    os.kill(pid, signal.SIGKILL)
    for s in streams.values():
        s.join()
    t.join(WAIT_S)
    assert not t.is_alive()

    assert all(s.replica == rid for (_, rid), s in streams.items())
    # the victim's streams: an error saying the replica stopped, then their end, and no finish
    events = streams[(SSE, victim)].events
    assert events[-1] == "[DONE]" and events[-2]["error"]["code"] == "replica_died", events[-2:]
    assert not any(e["choices"][0]["finish_reason"] for e in events[:-2])
    lines = streams[(NDJSON, victim)].events
    assert "stopped mid-stream" in lines[-1]["error"] and not any(x.get("done") for x in lines[:-1])
    # the survivor's went on after the kill, token after token without an error, until their clients left
    for path in (SSE, NDJSON):
        s = streams[(path, survivor)]
        assert s.after(killed_at[0]) >= AFTER, f"{path} did not go on after the kill"
    assert all(e["choices"][0]["finish_reason"] is None for e in streams[(SSE, survivor)].events)
    assert not any("error" in x or x["done"] for x in streams[(NDJSON, survivor)].events)
    # nothing of the unanswered request had been sent: it was answered by the survivor
    assert (late["status"], late["replica"], late["retried"]) == (200, survivor, "replica-died"), late

    now = cluster.wait_running(2)  # Ray replaces the replica
    assert survivor in now and victim not in now, (now, victim, survivor)
    with cluster.client() as c:
        for rid in now:
            r = c.post(SSE, json={**body(SSE, "after", 1), "stream": False}, headers={REPLICA_HEADER: rid})
            assert r.status_code == 200 and r.headers[REPLICA_HEADER] == rid, r.text
