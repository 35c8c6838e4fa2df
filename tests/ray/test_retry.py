"""A full replica's 429 is retried once on another replica; clients leaving mid-stream through Ray's proxy free
what their requests held on the replica."""

from __future__ import annotations

import pytest

pytest.importorskip("ray")

from llamay.native.ray.prefix_key import prefix_key
from llamay.native.ray.relay import REPLICA_HEADER, RETRY_HEADER
from llamay.native.ray.router import rendezvous
from tests.ray.cluster import Streamed, wait_for

ROUTE = "/v1/chat/completions"
BODY = {"messages": [{"role": "user", "content": "Tell me a long story."}], "temperature": 0}


def content(s: Streamed) -> bool:
    return any(isinstance(e, dict) and e["choices"] and e["choices"][0]["delta"].get("content") for e in s.events)


def test_a_full_replicas_429_is_retried_on_the_other_once(cluster):
    # one sequence and one queued request per replica; Ray lets more through (max_ongoing_requests) and the
    # replicas' load reports are taken once, at their start (stats_period_s): the router cannot see the key's
    # replica fill up, only llamay's 429 says so
    ids = cluster.deploy(replicas=2, parallel=1, queue=1, max_ongoing_requests=8, stats_period_s=3600)
    owner = rendezvous(prefix_key(ROUTE, BODY), ids)[0]
    (other,) = set(ids) - {owner}
    long = {**BODY, "max_tokens": 400, "stream": True}  # far longer than the test keeps them
    running = Streamed(cluster, ROUTE, long)  # the key's replica's one sequence
    wait_for("the first stream's first token", lambda: content(running))
    queued = Streamed(cluster, ROUTE, long)  # its one queued request: a stream's first event is sent once queued
    wait_for("the second stream's first event", lambda: queued.events)
    cluster.on_replica(owner, lambda engine: engine.service.scheduler.pause())  # both stay where they are
    try:
        assert running.replica == owner and queued.replica == owner
        h = cluster.health(owner)
        assert (h["running"], h["queue_depth"]) == (1, 1), h

        with cluster.client() as c:
            r = c.post(ROUTE, json={**BODY, "max_tokens": 4})
        assert r.status_code == 200, r.text
        assert r.headers[RETRY_HEADER] == "429" and r.headers[REPLICA_HEADER] == other
        assert r.json()["choices"][0]["message"]["content"]
    finally:
        cluster.on_replica(owner, lambda engine: engine.service.scheduler.resume())
        running.release()
        queued.release()
    assert not any(e == "[DONE]" for e in running.events + queued.events)  # they left before their end
    # both clients left mid-stream: the replica cancelled their jobs and holds nothing for them
    cluster.wait_health(owner, "the owner idle again", lambda h: h["running"] == h["queue_depth"] == 0)
