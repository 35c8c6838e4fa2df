"""Scaling down drains: the replicas being removed finish the streams they are serving before they stop."""

from __future__ import annotations

from tests.ray.cluster import MAIN, Streamed, wait_for


def test_scale_down_lets_running_streams_finish(cluster):
    ids = cluster.deploy(**MAIN)

    def body(i: int) -> dict:
        return {"messages": [{"role": "user", "content": f"Tell a tale ({i})."}], "max_tokens": 64, "stream": True}

    streams = [Streamed(cluster, "/v1/chat/completions", body(i), replica=ids[i % 2]) for i in range(4)]
    wait_for("every stream's first tokens", lambda: all(len(s.events) >= 3 for s in streams))
    cluster.deploy(**{**MAIN, "replicas": 1})  # returns once the application runs with one replica
    for s in streams:
        s.join()
    assert sorted(s.replica for s in streams) == sorted(ids * 2)  # two on each replica
    for s in streams:  # every stream to its end: a finish reason, then [DONE]
        assert s.events[-1] == "[DONE]", s.events[-2:]
        assert s.events[-2]["choices"][0]["finish_reason"] in ("length", "stop")
    cluster.wait_running(1)  # the removed replicas are gone once their streams ended
