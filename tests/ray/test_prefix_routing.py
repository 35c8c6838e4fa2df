"""20 multi-turn chats sharing system prompts: with prefix routing every turn of a chat goes to the replica the
router names for the chat's key, and finds the whole chat so far in that replica's prefix cache (`cached_tokens`).
The same chats with each turn sent to a replica picked at random (named by x-llamay-replica, what a random router
does) scatter, and their turns sent elsewhere than the turn before do not find the chat so far there."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("ray")

from llamay.kv.cache import DEFAULT_PAGE_SIZE as PAGE
from llamay.native.ray.prefix_key import prefix_key
from llamay.native.ray.relay import REPLICA_HEADER
from llamay.native.ray.router import rendezvous
from tests.ray import chats
from tests.ray.cluster import MAIN

N_CHATS, N_TURNS = 20, 3
ROUTE = "/v1/chat/completions"


def workload(cluster, salt: str, pick=None) -> list[chats.Turn]:
    """The chats' turns; `pick(body)`: a replica to name for each request instead of letting the router choose."""
    with cluster.client() as c:

        def post(body: dict) -> tuple[dict, str]:
            r = c.post(ROUTE, json=body, headers={REPLICA_HEADER: pick(body)} if pick else {})
            assert r.status_code == 200, r.text
            return r.json(), r.headers[REPLICA_HEADER]

        return chats.run(post, N_CHATS, N_TURNS, salt)


def owners(salt: str, ids: list[str]) -> dict[int, str]:
    """Each chat's replica by the router's rule: the first of its key's rendezvous order (the key is the chat's
    leading messages, the same at every turn)."""
    return {c.index: rendezvous(prefix_key(ROUTE, {"messages": c.messages}), ids)[0]
            for c in chats.chats(N_CHATS, salt)}  # fmt: skip


def whole_pages(n: int) -> int:
    return n // PAGE * PAGE


def test_prefix_routing_keeps_each_chat_on_its_replica_where_random_routing_does_not(cluster):
    ids = cluster.deploy(**MAIN)
    routed = workload(cluster, "prefix")

    def pick(body: dict) -> str:  # a replica at random, seeded by the chat and its turn (not by thread timing)
        return random.Random(f"{body['messages'][1]['content']}/{len(body['messages'])}").choice(ids)

    scattered = workload(cluster, "random", pick=pick)  # another salt: nothing cached

    # every turn on the replica the router's rule names for its chat, and the chats spread over both replicas
    owner = owners("prefix", ids)
    assert all(t.replica == owner[t.chat] for t in routed), [(t.chat, t.turn, t.replica, owner[t.chat]) for t in routed]
    assert set(owner.values()) == set(ids)
    prev = {(t.chat, t.turn): t for t in routed}
    for t in routed:
        if t.turn:  # everything the previous turn read (its prompt) is found again, but a partly filled last page
            before = prev[(t.chat, t.turn - 1)]
            assert t.cached_tokens >= whole_pages(before.prompt_tokens), (t, before)

    prev = {(t.chat, t.turn): t for t in scattered}
    moved = [t for t in scattered if t.turn and t.replica != prev[(t.chat, t.turn - 1)].replica]
    assert moved, "no turn was sent to another replica than the turn before"
    # a turn sent elsewhere finds the system prompt there at best, not the chat so far
    missed = [t for t in moved if t.cached_tokens < whole_pages(prev[(t.chat, t.turn - 1)].prompt_tokens)]
    assert len(missed) >= len(moved) // 2, (len(missed), len(moved))
    share_routed, share_scattered = chats.cached_share(routed), chats.cached_share(scattered)
    assert share_routed > share_scattered, (share_routed, share_scattered)
    print(f"cached prompt-token share: prefix routing {share_routed:.3f}, random replicas {share_scattered:.3f}; "
          f"turns moved: {len(moved)}/{N_CHATS * (N_TURNS - 1)}, {len(missed)} of them missed")  # fmt: skip
