"""20 multi-turn chats sharing system prompts: with prefix routing every chat stays on one replica and its later
turns find the whole chat so far in that replica's prefix cache (`cached_tokens`); random routing scatters a
chat's turns, and the turns sent to another replica than the one before find less cached there."""

from __future__ import annotations

from llamay.kv.cache import DEFAULT_PAGE_SIZE as PAGE
from llamay.native.ray.relay import REPLICA_HEADER
from tests.ray import chats

N_CHATS, N_TURNS = 20, 3


def workload(cluster, salt: str) -> list[chats.Turn]:
    with cluster.client() as c:

        def post(body: dict) -> tuple[dict, str]:
            r = c.post("/v1/chat/completions", json=body)
            assert r.status_code == 200, r.text
            return r.json(), r.headers[REPLICA_HEADER]

        return chats.run(post, N_CHATS, N_TURNS, salt)


def replicas_of(turns: list[chats.Turn]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for t in turns:
        out.setdefault(t.chat, set()).add(t.replica)
    return out


def test_prefix_routing_keeps_each_chat_on_one_replica_where_random_routing_does_not(cluster):
    cluster.deploy(replicas=2, routing="prefix")
    prefix = workload(cluster, "prefix")
    cluster.deploy(replicas=2, routing="random")
    scattered_run = workload(cluster, "random")  # another salt: nothing of the first run is in any cache

    on = replicas_of(prefix)
    assert all(len(r) == 1 for r in on.values()), on
    assert len(set().union(*on.values())) == 2  # the chats themselves are spread over both replicas
    by = {(t.chat, t.turn): t for t in prefix}
    for t in prefix:
        if t.turn:  # everything the previous turn read (its prompt) is found again, but a partly filled last page
            before = by[(t.chat, t.turn - 1)]
            assert t.cached_tokens >= before.prompt_tokens // PAGE * PAGE, (t, before)

    scattered = [c for c, r in replicas_of(scattered_run).items() if len(r) > 1]
    assert scattered, "random routing kept every chat on one replica"  # (1/4)**20 by chance
    by = {(t.chat, t.turn): t for t in scattered_run}
    moved = [t for t in scattered_run if t.turn and t.replica != by[(t.chat, t.turn - 1)].replica]
    stayed = [t for t in scattered_run if t.turn and t.replica == by[(t.chat, t.turn - 1)].replica]

    def missed(turns: list[chats.Turn]) -> float:  # of what the turn before read, tokens not found cached
        return sum(by[(t.chat, t.turn - 1)].prompt_tokens - t.cached_tokens for t in turns) / max(1, len(turns))

    # a turn sent elsewhere finds its system prompt there at best, not the chat so far
    assert missed(moved) > missed(stayed) + PAGE, (missed(moved), missed(stayed))
    share_prefix, share_random = chats.cached_share(prefix), chats.cached_share(scattered_run)
    assert share_prefix > share_random, (share_prefix, share_random)
    print(f"cached prompt-token share: prefix routing {share_prefix:.3f}, random routing {share_random:.3f}; "
          f"chats scattered by random routing: {len(scattered)}/{N_CHATS}")  # fmt: skip
