"""Scaling down drains: a replica being removed finishes the streams it is serving before it stops."""

from __future__ import annotations

import threading
import time

from ray import serve

from tests.ray.cluster import APP, MAIN, Streamed, wait_for


def test_scale_down_lets_running_streams_finish(cluster):
    ids = cluster.deploy(**MAIN)

    def body(i: int) -> dict:
        return {"messages": [{"role": "user", "content": f"Tell a tale ({i})."}], "max_tokens": 128, "stream": True}

    streams = [Streamed(cluster, "/v1/chat/completions", body(i), replica=ids[i % 2]) for i in range(4)]
    wait_for("every stream's first tokens", lambda: all(len(s.events) >= 3 for s in streams))
    stopping: list[float] = []  # when Ray first had a replica stopping
    done = threading.Event()

    def watch() -> None:
        while not done.is_set() and not stopping:
            if serve.status().applications[APP].deployments["Engine"].replica_states.get("STOPPING"):
                stopping.append(time.monotonic())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        cluster.deploy(**{**MAIN, "replicas": 1})  # returns once the application runs with one replica
        for s in streams:
            s.join()
    finally:
        done.set()
        watcher.join(60)
    assert sorted(s.replica for s in streams) == sorted(ids * 2)  # two on each replica
    # a replica was stopping while every stream was still running: whichever it was, it had two of them to finish
    assert stopping and stopping[0] < min(s.at[-1] for s in streams), (stopping, [s.at[-1] for s in streams])
    for s in streams:  # every stream to its end: a finish reason, then [DONE]
        assert s.events[-1] == "[DONE]", s.events[-2:]
        assert s.events[-2]["choices"][0]["finish_reason"] in ("length", "stop")
    cluster.wait_running(1)  # the removed replicas are gone once their streams ended
