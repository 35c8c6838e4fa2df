"""The prefix router's ranking: a key's replica first, the rest least loaded first; full replicas and the replica a
429 came from are passed over; rendezvous hashing moves only a leaving replica's keys."""

import pytest

pytest.importorskip("ray")

from llamay.native.ray.router import full, rank, rendezvous

IDLE = {"running": 0, "queued": 0, "queue": 4}


def test_a_key_always_ranks_the_same_replica_first():
    replicas = [(r, IDLE) for r in ("a", "b", "c")]
    firsts = {rank("k1", replicas)[0][0] for _ in range(5)}
    assert len(firsts) == 1
    spread = {rank(f"key{i}", replicas)[0][0] for i in range(64)}
    assert spread == {"a", "b", "c"}  # 64 keys over 3 replicas: each gets some


def test_the_rest_come_least_loaded_first():
    replicas = [("a", {"running": 3, "queued": 2, "queue": 4}), ("b", {"running": 1, "queued": 0, "queue": 4}),
                ("c", {"running": 2, "queued": 0, "queue": 4})]  # fmt: skip
    for i in range(20):
        first, rest = rank(f"key{i}", replicas)
        assert len(first) == 1
        loads = [s["running"] + s["queued"] for rid, s in replicas if rid in rest]
        assert [dict(replicas)[r]["running"] + dict(replicas)[r]["queued"] for r in rest] == sorted(loads)


def test_a_full_replica_is_passed_over_and_a_429s_replica_goes_last():
    stuffed = {"running": 4, "queued": 4, "queue": 4}
    assert full(stuffed) and not full(IDLE) and not full({})
    for i in range(20):
        key = f"key{i}"
        owner = rendezvous(key, ["a", "b"])[0]
        ranks = rank(key, [("a", stuffed if owner == "a" else IDLE), ("b", stuffed if owner == "b" else IDLE)])
        assert ranks[0] != [owner]  # its owner is full: the other one first
        avoided = rank(key, [("a", IDLE), ("b", IDLE)], avoid=owner)
        assert owner not in [r for rank_ in avoided for r in rank_]


def test_no_key_is_one_rank_for_ray_to_pick_the_least_queued():
    assert rank(None, [("a", IDLE), ("b", IDLE)]) == [["a", "b"]]


def test_removing_a_replica_moves_only_its_keys():
    keys = [f"key{i}" for i in range(200)]
    before = {k: rendezvous(k, ["a", "b", "c"])[0] for k in keys}
    after = {k: rendezvous(k, ["a", "b"])[0] for k in keys}
    assert all(after[k] == before[k] for k in keys if before[k] != "c")
    assert sum(before[k] == "c" for k in keys) > 30
