"""Prefix-aware routing on Ray Serve's request-router extension point (`ray.serve.request_router`): a request's
prefix key picks a replica by rendezvous hashing (the same key always ranks the replicas the same way, and a
replica joining or leaving moves only its own share of keys); Ray probes the first rank and, when that replica is
full (at `max_ongoing_requests`, or reporting a full llamay queue), the next ranks, least loaded first."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

from ray.serve.request_router import PendingRequest, RequestRouter, RunningReplica

KEY_KWARG = "prefix_key"  # what the ingress passes to Engine.handle
AVOID_KWARG = "avoid"  # the replica a 429 came from: its retry goes elsewhere


def rendezvous(key: str, replica_ids: Sequence[str]) -> list[str]:
    """`replica_ids` ordered by the highest-random-weight of (key, id): stable for a key, even across keys."""

    def weight(rid: str) -> bytes:
        return hashlib.blake2b(f"{key}\x00{rid}".encode(), digest_size=8).digest()

    return sorted(replica_ids, key=weight, reverse=True)


def full(stats: dict[str, Any]) -> bool:
    """A replica whose llamay queue (from its `record_routing_stats`) has no room left."""
    return bool(stats) and stats.get("queued", 0) >= stats.get("queue", 1 << 30)


def load(stats: dict[str, Any]) -> int:
    return int(stats.get("running", 0)) + int(stats.get("queued", 0)) if stats else 0


def rank(key: str | None, replicas: list[tuple[str, dict[str, Any]]], avoid: str | None = None) -> list[list[str]]:
    """The ranks of replica ids for a request: [[the key's replica], [the rest, least loaded first]]; with no key
    (nothing to route by) all of them in one rank (Ray takes the least queued); `avoid` goes last."""
    ids = [rid for rid, _ in replicas]
    stats = dict(replicas)
    usable = [rid for rid in ids if rid != avoid] or ids
    if key is None:
        return [usable]
    order = rendezvous(key, usable)
    first = [rid for rid in order if not full(stats[rid])][:1]
    rest = sorted((rid for rid in usable if rid not in first), key=lambda rid: load(stats[rid]))
    return [r for r in (first, rest) if r]


class PrefixRouter(RequestRouter):
    """Ray Serve's router for the Engine deployment: `request_router_class=llamay.native.ray.router:PrefixRouter`."""

    # a replica decoding on every core answers Ray's queue-length probe late; at Ray's 0.1 s the request would go
    # to the next rank and lose its cached prefix
    queue_len_response_deadline_s = 0.5

    async def choose_replicas(
        self, candidate_replicas: list[RunningReplica], pending_request: PendingRequest | None = None
    ) -> list[list[RunningReplica]]:
        kwargs = pending_request.kwargs if pending_request is not None else {}
        by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
        ranks = rank(kwargs.get(KEY_KWARG), [(rid, r.routing_stats or {}) for rid, r in by_id.items()],
                     kwargs.get(AVOID_KWARG))  # fmt: skip
        return [[by_id[rid] for rid in ids] for ids in ranks]


class RandomRouter(RequestRouter):
    """A baseline for tests and benchmarks (`routing=random`): any replica, uniformly, whatever its prompt."""

    async def choose_replicas(
        self, candidate_replicas: list[RunningReplica], pending_request: PendingRequest | None = None
    ) -> list[list[RunningReplica]]:
        order = list(candidate_replicas)
        random.shuffle(order)
        return [[r] for r in order]
