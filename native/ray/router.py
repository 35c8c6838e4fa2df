"""Prefix-aware routing on Ray Serve's request-router extension point (`ray.serve.request_router`): a request's
prefix key picks a replica by rendezvous hashing (the same key always ranks the replicas the same way, and a
replica joining or leaving moves only its own share of keys). The key's replica is the only choice while it can
take the request; only when it is full (its llamay queue, or Ray's count of its requests, at the limit), unhealthy,
or has not taken the request for OWNER_PATIENCE_S do the others come in, least loaded first. A replica that is
merely slow to answer Ray's queue probe is waited for (Ray probes it again with a longer deadline), not passed
over: the decision does not depend on how busy the machine is."""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Sequence
from typing import Any

from ray.serve.request_router import PendingRequest, RequestRouter, RunningReplica

KEY_KWARG = "prefix_key"  # what the ingress passes to Engine.handle
AVOID_KWARG = "avoid"  # the replica a 429 came from: its retry goes elsewhere
PIN_KWARG = "replica"  # the replica a client asked for by name (x-llamay-replica): that one while it is live
# a key's replica that has not taken a request for this long (it never answers Ray's probe: hung, or its host
# overloaded) is passed over; Ray's health check replaces a hung replica
OWNER_PATIENCE_S = 10.0


def rendezvous(key: str, replica_ids: Sequence[str]) -> list[str]:
    """`replica_ids` ordered by the highest-random-weight of (key, id): stable for a key, even across keys."""

    def weight(rid: str) -> bytes:
        return hashlib.blake2b(f"{key}\x00{rid}".encode(), digest_size=8).digest()

    return sorted(replica_ids, key=weight, reverse=True)


def full(stats: dict[str, Any]) -> bool:
    """A replica that cannot take a request now, by its own report (`Engine.record_routing_stats`): its llamay
    queue has no room left, or its model thread has stopped (it answers 503 until Ray replaces it)."""
    if not stats:
        return False
    return stats.get("queued", 0) >= stats.get("queue", 1 << 30) or not stats.get("healthy", True)


def load(stats: dict[str, Any]) -> int:
    return int(stats.get("running", 0)) + int(stats.get("queued", 0)) if stats else 0


def rank(key: str | None, replicas: list[tuple[str, dict[str, Any]]], avoid: str | None = None,
         pin: str | None = None, passed_over: frozenset[str] = frozenset()) -> list[list[str]]:  # fmt: skip
    """The ranks of replica ids for a request. A live `pin` (not `avoid`): [[pin]]. No key (nothing to route by):
    every replica in one rank (Ray takes the least queued). Else [[the key's replica]] while it is usable; when it
    is full (its stats, or in `passed_over`): [the rest, least loaded first], then the key's replica, in case the
    rest are full too. `avoid` (where a 429 came from) goes last."""
    ids = [rid for rid, _ in replicas]
    stats = dict(replicas)
    usable = [rid for rid in ids if rid != avoid] or ids
    if pin is not None and pin in usable:
        return [[pin]]
    if key is None:
        return [usable]
    owner = rendezvous(key, usable)[0]
    if not full(stats[owner]) and owner not in passed_over:
        return [[owner]]
    rest = sorted((rid for rid in usable if rid != owner), key=lambda rid: load(stats[rid]))
    return [r for r in (rest, [owner]) if r]


class PrefixRouter(RequestRouter):
    """Ray Serve's router for the Engine deployment: `request_router_class=llamay.native.ray.router:PrefixRouter`."""

    async def choose_replicas(
        self, candidate_replicas: list[RunningReplica], pending_request: PendingRequest | None = None
    ) -> list[list[RunningReplica]]:
        kwargs = pending_request.kwargs if pending_request is not None else {}
        by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
        # full by Ray's count: the last probe or send found it at max_ongoing_requests (a probe that timed out
        # leaves no entry: a replica slow to answer is not full)
        cache = self.replica_queue_len_cache
        passed_over = {rid for rid, r in by_id.items() if (cache.get(r.replica_id) or 0) >= r.max_ongoing_requests}
        if pending_request is not None and time.time() - pending_request.created_at > OWNER_PATIENCE_S:
            passed_over = set(by_id)  # waited too long for its key's replica: the others first, then it
        ranks = rank(kwargs.get(KEY_KWARG), [(rid, r.routing_stats or {}) for rid, r in by_id.items()],
                     kwargs.get(AVOID_KWARG), kwargs.get(PIN_KWARG), frozenset(passed_over))  # fmt: skip
        return [[by_id[rid] for rid in ids] for ids in ranks]


class RandomRouter(RequestRouter):
    """A baseline for benchmarks (`routing=random`): any replica, uniformly, whatever its prompt."""

    async def choose_replicas(
        self, candidate_replicas: list[RunningReplica], pending_request: PendingRequest | None = None
    ) -> list[list[RunningReplica]]:
        order = list(candidate_replicas)
        random.shuffle(order)
        return [[r] for r in order]
