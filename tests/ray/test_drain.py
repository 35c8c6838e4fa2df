"""Scaling down drains: a replica being removed finishes the streams it is serving before it stops."""

from __future__ import annotations

import json
import threading
import time

from llamay.native.ray.relay import REPLICA_HEADER


def test_scale_down_lets_running_streams_finish(cluster):
    cluster.deploy(replicas=2, parallel=2, graceful_shutdown_timeout_s=120)
    results: list[dict] = []

    def stream(i: int) -> None:
        out: dict = {"events": []}
        results.append(out)
        req = {"messages": [{"role": "user", "content": f"Tell a long tale, number {i}."}], "max_tokens": 160,
               "stream": True}  # fmt: skip
        with cluster.client() as c, c.stream("POST", "/v1/chat/completions", json=req) as s:
            out["replica"] = s.headers[REPLICA_HEADER]
            out["events"] += [line[6:] for line in s.iter_lines() if line.startswith("data: ")]

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len({r.get("replica") for r in results} - {None}) < 2 or len(results) < 6:
        assert time.monotonic() < deadline, results
        time.sleep(0.2)
    cluster.deploy(replicas=1, parallel=2, graceful_shutdown_timeout_s=120)  # returns once the app runs again
    for t in threads:
        t.join(300)
    assert len({r["replica"] for r in results}) == 2
    for r in results:
        assert r["events"][-1] == "[DONE]", r["events"][-2:]
        assert json.loads(r["events"][-2])["choices"][0]["finish_reason"] in ("length", "stop")
    cluster.wait_running(1, timeout=60)  # the removed replica is gone once its streams ended
