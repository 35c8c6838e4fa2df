"""Named contexts: create from a prompt, continue (reusing its KV), fork, snapshot to a file, restore, delete."""

from __future__ import annotations

import pytest

from tests.server.conftest import STORIES_ID, idle, wait_for
from tests.server.test_scheduling import STORY

pytestmark = pytest.mark.native_only

BASE = "/llamay/contexts"


def greedy(n: int, **kw) -> dict:
    return {"max_tokens": n, "temperature": 0, **kw}


@pytest.fixture
def clean(server, client):
    yield
    for ctx in client.get(BASE).json()["data"]:
        client.delete(f"{BASE}/{ctx['name']}")


def test_create_continue_update(server, client, clean):
    r = client.post(BASE, json={"name": "tale", "prompt": STORY})
    assert r.status_code == 200, r.text
    info = r.json()
    n0 = info["n_tokens"]
    assert n0 > 100 and info["text"] is None

    plain = client.post("/v1/completions", json={"model": STORIES_ID, "prompt": STORY, **greedy(12)}).json()
    r = client.post(f"{BASE}/tale/completions", json={"prompt": "", **greedy(12)})
    cont = r.json()
    assert r.status_code == 200, r.text
    assert cont["choices"][0]["text"] == plain["choices"][0]["text"]
    assert cont["usage"]["prompt_tokens_details"]["cached_tokens"] >= (n0 - 1) // 16 * 16
    assert cont["context"]["n_tokens"] == n0 + 12  # update (the default) grew the context

    r = client.post(f"{BASE}/tale/completions", json={"prompt": " The next day", "update": False, **greedy(5)})
    assert r.json()["context"]["n_tokens"] == n0 + 12
    assert client.get(f"{BASE}/tale").json()["n_tokens"] == n0 + 12


def test_create_from_messages_with_generation(client, clean):
    r = client.post(BASE, json={"name": "chat-1", "messages": [{"role": "user", "content": "hi"}], **greedy(6)})
    info = r.json()
    assert r.status_code == 200 and info["text"] is not None
    assert info["usage"]["completion_tokens"] <= 6


def test_fork_is_independent(client, clean):
    client.post(BASE, json={"name": "root", "prompt": "Once upon a time"})
    r = client.post(f"{BASE}/root/fork", json={"name": "branch"})
    assert r.status_code == 200 and r.json()["n_tokens"] == client.get(f"{BASE}/root").json()["n_tokens"]
    a = client.post(f"{BASE}/root/completions", json={"prompt": " there was a dog", **greedy(6)}).json()
    b = client.post(f"{BASE}/branch/completions", json={"prompt": " there was a cat", **greedy(6)}).json()
    assert a["choices"][0]["text"] != b["choices"][0]["text"]
    again = client.post(f"{BASE}/branch/completions", json={"prompt": "", **greedy(3), "update": False}).json()
    assert again["context"]["n_tokens"] == b["context"]["n_tokens"]
    names = {c["name"] for c in client.get(BASE).json()["data"]}
    assert names == {"root", "branch"}


def test_snapshot_restore_round_trip(client, clean):
    client.post(BASE, json={"name": "saved", "prompt": STORY})
    snap = client.post(f"{BASE}/saved/snapshot").json()
    assert snap["bytes"] > 0 and snap["context"] == "saved"
    expected = client.post(f"{BASE}/saved/completions", json={"prompt": "", "update": False, **greedy(8)}).json()
    assert client.delete(f"{BASE}/saved").json() == {"name": "saved", "deleted": True}
    assert client.get(f"{BASE}/saved").status_code == 404
    r = client.post(f"{BASE}/back/restore", json={"snapshot": snap["snapshot"]})
    assert r.status_code == 200, r.text
    assert r.json()["n_tokens"] == snap["n_tokens"]
    got = client.post(f"{BASE}/back/completions", json={"prompt": "", "update": False, **greedy(8)}).json()
    assert got["choices"][0]["text"] == expected["choices"][0]["text"]
    assert got["usage"]["prompt_tokens_details"]["cached_tokens"] >= (snap["n_tokens"] - 1) // 16 * 16
    r = client.post(f"{BASE}/saved/restore", json={"snapshot": snap["snapshot"]})  # made again under its old name
    assert r.status_code == 200 and client.get(f"{BASE}/saved").status_code == 200


def test_streaming_continuation(client, clean):
    client.post(BASE, json={"name": "s", "prompt": "Once upon a time"})
    r = client.post(f"{BASE}/s/completions", json={"prompt": "", "stream": True, **greedy(6)})
    assert r.status_code == 200 and r.text.rstrip().endswith("data: [DONE]")
    assert client.get(f"{BASE}/s").json()["n_tokens"] == 5 + 6


def test_context_errors(client, clean):
    assert client.post(BASE, json={"name": "dup", "prompt": "x"}).status_code == 200
    r = client.post(BASE, json={"name": "dup", "prompt": "x"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "context_exists"
    assert client.post(BASE, json={"name": "bad name!", "prompt": "x"}).status_code == 400
    assert client.post(BASE, json={"name": "none"}).status_code == 400
    assert client.post(BASE, json={"name": "both", "prompt": "x", "messages": [{"role": "user", "content": "x"}]}
                       ).status_code == 400  # fmt: skip
    assert client.post(f"{BASE}/missing/completions", json={"prompt": "x"}).status_code == 404
    assert client.post(f"{BASE}/dup/fork", json={"name": "dup"}).status_code == 409
    assert client.delete(f"{BASE}/missing").status_code == 404
    r = client.post(f"{BASE}/x/restore", json={"snapshot": "0123456789abcdef"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "snapshot_not_found"
    assert client.post(f"{BASE}/dup/completions", json={"prompt": "x" * 5000}).status_code == 400


def test_deleting_contexts_gives_their_pages_back(server, client):
    st = server.service.scheduler.state
    pool = st.kv.groups[0].pages
    for i in range(3):
        client.post(BASE, json={"name": f"p{i}", "prompt": STORY})
    client.post(f"{BASE}/p0/fork", json={"name": "p0b"})
    for name in ("p0", "p0b", "p1", "p2"):
        assert client.delete(f"{BASE}/{name}").status_code == 200
    wait_for(lambda: idle(server.service), what="idle")
    server.service.scheduler.call(lambda s: s.kv.prefix_cache.clear()).result(10)  # on the model thread
    # what is left is free, not held by snapshots
    wait_for(lambda: pool.n_free == pool.n_pages, what="every page to be free", timeout=5)


def test_contexts_being_created_count_toward_the_bound():
    """Creates that run at once (each waiting on its prefill) reserve their names first: together they cannot
    pass MAX_CONTEXTS."""
    import contextlib

    from llamay.native.server.context_store import MAX_CONTEXTS, ContextStore
    from llamay.native.server.errors import ApiError

    store = ContextStore()
    with contextlib.ExitStack() as creating:
        for i in range(MAX_CONTEXTS):
            creating.enter_context(store.reserve(f"c{i}"))
        with pytest.raises(ApiError, match=f"at most {MAX_CONTEXTS} contexts"), store.reserve("one-too-many"):
            pass
    with store.reserve("one-too-many"):  # the creates ended (here: failed), so their names count no more
        pass


def test_a_continuation_whose_client_went_away_leaves_the_context_as_it_was(slow_server):
    """Non-streaming, as streaming: a reply nobody received is not added to the context."""
    import httpx

    with slow_server.client(timeout=60) as c:
        r = c.post(BASE, json={"name": "gone", "prompt": STORY, **greedy(0)})
        assert r.status_code == 200, r.text
        before = r.json()["n_tokens"]
        try:
            with pytest.raises(httpx.ReadTimeout), slow_server.client(timeout=0.5) as quick:
                quick.post(f"{BASE}/gone/completions", json={"prompt": " and", **greedy(200)})
            wait_for(lambda: idle(slow_server.service), what="the cancelled continuation to end")
            assert c.get(f"{BASE}/gone").json()["n_tokens"] == before
            r = c.post(f"{BASE}/gone/completions", json={"prompt": " and", **greedy(3)})  # the context still works
            assert r.status_code == 200 and r.json()["context"]["n_tokens"] > before, r.text
        finally:
            c.delete(f"{BASE}/gone")
