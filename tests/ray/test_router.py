"""The prefix router's ranking: a key's replica alone while it can take the request; when it is full, unhealthy
or passed over (Ray found it full, or the request waited too long), the rest least loaded first, then it; the
replica a 429 came from goes last; a replica the client names comes first while it is live; rendezvous hashing
moves only a leaving replica's keys."""

import asyncio
import time
import types

import pytest

pytest.importorskip("ray")

from llamay.native.ray.router import KEY_KWARG, OWNER_PATIENCE_S, PrefixRouter, full, rank, rendezvous

IDLE = {"running": 0, "queued": 0, "queue": 4, "healthy": True}
STUFFED = {"running": 4, "queued": 4, "queue": 4, "healthy": True}
STOPPED = {"running": 0, "queued": 0, "queue": 4, "healthy": False}


def test_a_key_alone_ranks_its_replica_whatever_the_others_load():
    replicas = [("a", {**IDLE, "running": 3, "queued": 3}), ("b", IDLE), ("c", IDLE)]
    firsts = {}
    for i in range(64):
        key = f"key{i}"
        ranks = rank(key, replicas)
        assert ranks == [[rendezvous(key, ["a", "b", "c"])[0]]]  # busy but not full: still the one
        firsts[ranks[0][0]] = firsts.get(ranks[0][0], 0) + 1
    assert set(firsts) == {"a", "b", "c"}, firsts  # 64 keys over 3 replicas: each owns some


def test_a_full_or_unhealthy_replica_sends_its_keys_to_the_rest_least_loaded_first():
    assert full(STUFFED) and full(STOPPED) and not full(IDLE) and not full({})
    loads = {"a": {**IDLE, "running": 3}, "b": {**IDLE, "running": 1}, "c": {**IDLE, "running": 2}}
    for i in range(30):
        key = f"key{i}"
        owner = rendezvous(key, list(loads))[0]
        rest = sorted((r for r in loads if r != owner), key=lambda r: loads[r]["running"])
        for state in (STUFFED, STOPPED):
            assert rank(key, [(r, state if r == owner else s) for r, s in loads.items()]) == [rest, [owner]]
        # Ray's count found it full, or the request has waited its time for it: the same
        assert rank(key, list(loads.items()), passed_over=frozenset({owner})) == [rest, [owner]]


def test_a_429s_replica_goes_last_and_a_named_one_first():
    for i in range(20):
        key = f"key{i}"
        owner, other = rendezvous(key, ["a", "b"])
        assert rank(key, [("a", IDLE), ("b", IDLE)], avoid=owner) == [[other]]
        assert rank(key, [("a", IDLE), ("b", IDLE)], pin=other) == [[other]]
        assert rank(None, [("a", IDLE), ("b", IDLE)], pin=other) == [[other]]
        # named but not live (gone, or where its 429 came from): routed as any other request
        assert rank(key, [("a", IDLE), ("b", IDLE)], pin="gone") == [[owner]]
        assert rank(key, [("a", IDLE), ("b", IDLE)], avoid=other, pin=other) == [[owner]]


def test_no_key_is_one_rank_for_ray_to_pick_the_least_queued():
    assert rank(None, [("a", IDLE), ("b", IDLE)]) == [["a", "b"]]


def test_removing_a_replica_moves_only_its_keys():
    keys = [f"key{i}" for i in range(200)]
    before = {k: rendezvous(k, ["a", "b", "c"])[0] for k in keys}
    after = {k: rendezvous(k, ["a", "b"])[0] for k in keys}
    assert all(after[k] == before[k] for k in keys if before[k] != "c")
    assert sum(before[k] == "c" for k in keys) > 30


class Replica:  # what PrefixRouter reads of Ray's RunningReplica
    def __init__(self, rid: str, stats: dict, max_ongoing: int = 8) -> None:
        self.replica_id = types.SimpleNamespace(unique_id=rid)
        self.routing_stats = stats
        self.max_ongoing_requests = max_ongoing


class QueueLens:  # Ray's queue-length cache: what the last probe or send reported, None once stale or timed out
    def __init__(self, lens: dict) -> None:
        self.lens = lens

    def get(self, replica_id) -> int | None:
        return self.lens.get(replica_id.unique_id)


def choose(key: str, lens: dict, waited: float = 0.0) -> list[list[str]]:
    router = types.SimpleNamespace(replica_queue_len_cache=QueueLens(lens))
    pending = types.SimpleNamespace(kwargs={KEY_KWARG: key}, created_at=time.time() - waited)
    replicas = [Replica("a", IDLE), Replica("b", IDLE)]
    ranks = asyncio.run(PrefixRouter.choose_replicas(router, replicas, pending))
    return [[r.replica_id.unique_id for r in rank_] for rank_ in ranks]


def test_the_router_waits_for_a_key_replica_slow_to_answer_but_not_for_a_full_or_silent_one():
    owner, other = rendezvous("k", ["a", "b"])
    assert choose("k", {}) == [[owner]]  # no answer to Ray's probe yet (slow, or timed out): not full
    assert choose("k", {owner: 7, other: 0}) == [[owner]]  # busy, below max_ongoing_requests
    assert choose("k", {owner: 8}) == [[other], [owner]]  # Ray found it at max_ongoing_requests
    assert choose("k", {}, waited=OWNER_PATIENCE_S + 1) == [[other], [owner]]  # waited too long for it
