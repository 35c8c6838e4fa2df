"""Scaling down drains: a replica being removed finishes the streams it is serving before it stops. The replicas'
model threads are paused with their streams half done while Ray scales down, so that the streams are surely still
running when Ray starts stopping a replica, and resumed once it has."""

from __future__ import annotations

import pytest

pytest.importorskip("ray")

from ray import serve

from llamay.model import load_model
from tests.paths import SMOLLM2, registry_model
from tests.ray.cluster import APP, MAIN, Streamed, wait_for


def stopping() -> int:
    return serve.status().applications[APP].deployments["Engine"].replica_states.get("STOPPING", 0)


def never_ending() -> dict[str, int]:
    """logit_bias that keeps SmolLM2 from ending a reply: its end-of-generation tokens at -100 (a sampled tale
    that ended by itself before the replicas paused failed the test now and then)."""
    with load_model(registry_model(SMOLLM2)) as m:
        return {str(t): -100 for t in sorted(m.tokenizer.eos_ids)}


def test_scale_down_lets_running_streams_finish(cluster):
    ids = cluster.deploy(**MAIN)
    bias = never_ending()

    def body(i: int) -> dict:
        return {"messages": [{"role": "user", "content": f"Tell a tale ({i})."}], "max_tokens": 200, "stream": True,
                "logit_bias": bias}  # fmt: skip

    streams = [Streamed(cluster, "/v1/chat/completions", body(i), replica=ids[i % 2]) for i in range(4)]
    wait_for("every stream's first tokens", lambda: all(len(s.events) >= 3 for s in streams))
    for rid in ids:  # (a round trip to each replica: far shorter than 200 tokens)
        cluster.on_replica(rid, lambda engine: engine.service.scheduler.pause())
    try:
        assert not any(s.events[-1] == "[DONE]" for s in streams), "a stream ended before its replica paused"
        deployed = cluster.begin_deploy(**{**MAIN, "replicas": 1})  # Ray waits for the drain to finish it
        wait_for("a replica stopping", stopping)
    finally:
        for rid in ids:
            cluster.on_replica(rid, lambda engine: engine.service.scheduler.resume())
    for s in streams:
        s.join()
    assert len(deployed()) == 1  # the removed replicas are gone once their streams ended
    assert sorted(s.replica for s in streams) == sorted(ids * 2)  # two on each replica
    for s in streams:  # every stream to its end: a finish reason, then [DONE]
        assert s.events[-1] == "[DONE]", s.events[-2:]
        assert s.events[-2]["choices"][0]["finish_reason"] == "length"
