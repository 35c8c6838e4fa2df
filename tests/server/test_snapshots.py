"""Snapshot files through the server: one checksum over everything read back (no sidecar), every field of a
file checked before anything is allocated (400 naming the field), a quota (507 naming the limit), listing and
DELETE, file work off the event loop and the model thread, leftovers of interrupted writes removed at start."""

from __future__ import annotations

import hashlib
import shutil
import struct
import threading
import time

import httpx
import pytest

from llamay.kv import snapshot_file as sf
from tests.paths import stories
from tests.server.conftest import STORIES_ID, start_server
from tests.server.test_scheduling import STORY

pytestmark = pytest.mark.native_only

BASE = "/llamay/contexts"
SNAPS = "/llamay/snapshots"
FORGED = "f0f0f0f0f0f0f0f0"


def greedy(n: int, **kw) -> dict:
    return {"max_tokens": n, "temperature": 0, **kw}


@pytest.fixture
def saved(server, client):
    """A context's snapshot: (its id, what the context continues with, the file's bytes)."""
    assert client.post(BASE, json={"name": "orig", "prompt": STORY}).status_code == 200
    snap = client.post(f"{BASE}/orig/snapshot").json()
    want = client.post(f"{BASE}/orig/completions", json={"prompt": "", "update": False, **greedy(8)}).json()
    path = server.service.snapshots.path(snap["snapshot"])
    yield snap, want["choices"][0]["text"], path.read_bytes()
    for ctx in client.get(BASE).json()["data"]:
        client.delete(f"{BASE}/{ctx['name']}")
    for s in client.get(SNAPS).json()["data"]:
        client.delete(f"{SNAPS}/{s['snapshot']}")


def plant(server, data: bytes, sid: str = FORGED) -> str:
    server.service.snapshots.path(sid).write_bytes(data)
    return sid


def forge(data: bytes, offset: int, fmt: str, value) -> bytes:
    body = bytearray(data[: -sf.DIGEST_BYTES])
    struct.pack_into(fmt, body, offset, value)
    return bytes(body) + hashlib.sha256(body).digest()


def refused(server, client, sid: str, match: str) -> None:
    r = client.post(f"{BASE}/back/restore", json={"snapshot": sid})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "snapshot" and err["code"] == "invalid_snapshot"
    assert match in err["message"] and str(server.service.snapshot_dir) not in err["message"]
    assert client.get(f"{BASE}/back").status_code == 404  # nothing was made of it


def test_round_trip_listing_and_one(server, client, saved):
    snap, want, data = saved
    assert snap["context"] == "orig" and snap["bytes"] == len(data)
    listing = client.get(SNAPS).json()
    entry = next(s for s in listing["data"] if s["snapshot"] == snap["snapshot"])
    assert entry == {**snap, "error": None}
    assert listing["count"] >= 1 and listing["bytes"] >= len(data) and listing["max_count"] >= 1
    assert client.get(f"{SNAPS}/{snap['snapshot']}").json() == entry
    assert not list(server.service.snapshot_dir.glob("*.json"))  # no sidecar: the file holds everything
    r = client.post(f"{BASE}/back/restore", json={"snapshot": snap["snapshot"]})
    assert r.status_code == 200 and r.json()["n_tokens"] == snap["n_tokens"]
    got = client.post(f"{BASE}/back/completions", json={"prompt": "", "update": False, **greedy(8)}).json()
    assert got["choices"][0]["text"] == want


def test_damaged_truncated_and_empty_files_are_refused(server, client, saved):
    _snap, _want, data = saved
    tokens_at = sf.HEADER_BYTES + len("orig")
    for offset in (tokens_at + 8, len(data) - 200):  # a token (the old sidecar's part) and the KV
        damaged = bytearray(data)
        damaged[offset] ^= 0x04
        refused(server, client, plant(server, bytes(damaged)), "checksum mismatch")
    refused(server, client, plant(server, data[: len(data) // 2]), "checksum mismatch")
    refused(server, client, plant(server, data[:50]), "truncated")
    refused(server, client, plant(server, b""), "empty file")
    refused(server, client, plant(server, b"{}"), "not a llamay KV snapshot")


def test_forged_fields_with_a_valid_checksum_are_refused_by_name(server, client, saved):
    _snap, _want, data = saved
    n_vocab = server.service.snapshot_layout.n_vocab
    n_tokens = struct.unpack_from("<I", data, sf.PREFIX.size)[0]
    tokens_at = sf.HEADER_BYTES + len("orig")
    context_at = tokens_at + 4 * n_tokens
    cases = [
        (tokens_at + 4 * 5, "<i", n_vocab + 3, f"tokens[5] is {n_vocab + 3}, outside the vocabulary of {n_vocab}"),
        (context_at + 4 * 2, "<i", -1, "context[2] is -1, outside the vocabulary"),
        (sf.PREFIX.size, "<I", 10**6, "n_tokens is 1000000; the context holds 512"),
        (sf.PREFIX.size + 8, "<I", 3, "n_groups is 3"),
    ]
    for offset, fmt, value, match in cases:
        refused(server, client, plant(server, forge(data, offset, fmt, value)), match)


def test_delete_and_what_follows(server, client, saved):
    snap, _want, _data = saved
    sid = snap["snapshot"]
    r = client.delete(f"{SNAPS}/{sid}")
    assert r.status_code == 200 and r.json() == {"snapshot": sid, "deleted": True}
    assert not server.service.snapshots.path(sid).exists()
    assert all(s["snapshot"] != sid for s in client.get(SNAPS).json()["data"])
    for r in (client.get(f"{SNAPS}/{sid}"), client.delete(f"{SNAPS}/{sid}"),
              client.post(f"{BASE}/back/restore", json={"snapshot": sid})):  # fmt: skip
        assert r.status_code == 404 and r.json()["error"]["code"] == "snapshot_not_found"
    assert client.delete(f"{SNAPS}/not-hex").status_code == 400


def test_the_quota_is_refused_with_507_naming_the_limit(server, client, saved, monkeypatch):

    snap, _want, _data = saved
    store = server.service.snapshots
    limits = store.max_count, store.max_bytes
    try:
        used = client.get(SNAPS).json()
        store.max_count = used["count"] + 1
        assert client.post(f"{BASE}/orig/snapshot").status_code == 200
        r = client.post(f"{BASE}/orig/snapshot")
        assert r.status_code == 507, r.text
        err = r.json()["error"]
        assert err["code"] == "snapshot_quota_full" and "--max-snapshots" in err["message"]
        store.max_count = limits[0]
        used = client.get(SNAPS).json()
        store.max_bytes = used["bytes"] + snap["bytes"] - 1
        encoded = []
        monkeypatch.setattr(sf, "encode", lambda *a, **k: encoded.append(1))
        r = client.post(f"{BASE}/orig/snapshot")
        assert r.status_code == 507 and "--max-snapshot-bytes" in r.json()["error"]["message"]
        assert not encoded  # refused from the size it would have, before the KV is read
        monkeypatch.undo()
        assert client.get(SNAPS).json()["count"] == used["count"]  # nothing written past the quota
    finally:
        store.max_count, store.max_bytes = limits
    assert not list(store.dir.glob("*.partial"))


def test_a_slow_disk_holds_neither_the_event_loop_nor_the_model_thread(server, client, saved, monkeypatch):
    writing, release = threading.Event(), threading.Event()
    real = sf.write

    def slow_write(path, data):
        writing.set()
        release.wait(30)
        real(path, data)

    monkeypatch.setattr(sf, "write", slow_write)
    result = {}
    t = threading.Thread(target=lambda: result.update(r=server.client().post(f"{BASE}/orig/snapshot")))
    t.start()
    try:
        assert writing.wait(20)
        t0 = time.monotonic()
        assert client.get("/health").status_code == 200
        r = client.post("/v1/completions", json={"model": STORIES_ID, "prompt": "Once", **greedy(4)})
        assert r.status_code == 200 and time.monotonic() - t0 < 20
        assert t.is_alive()  # the write is still under way
    finally:
        release.set()
        t.join(30)
    assert result["r"].status_code == 200


def test_leftovers_go_and_other_files_are_listed_at_start(server, saved, tmp_path):
    snap, want, _data = saved
    folder = tmp_path / "snaps"
    folder.mkdir()
    shutil.copy(server.service.snapshots.path(snap["snapshot"]), folder / "aaaaaaaaaaaaaaaa.llkv")
    (folder / "bbbbbbbbbbbbbbbb.llkv.partial").write_bytes(b"LLAMAYKV half a write")
    old = sf.PREFIX.pack(sf.MAGIC, 1, bytes(32)) + bytes(64)  # a version-1 file from an older llamay
    (folder / "cccccccccccccccc.llkv").write_bytes(old)
    live = start_server(stories("f32"), n_ctx=512, parallel=1, queue=2, snapshot_dir=folder)
    try:
        assert not (folder / "bbbbbbbbbbbbbbbb.llkv.partial").exists()
        with live.client() as c:
            listing = {s["snapshot"]: s for s in c.get(SNAPS).json()["data"]}
            assert set(listing) == {"aaaaaaaaaaaaaaaa", "cccccccccccccccc"}
            assert listing["aaaaaaaaaaaaaaaa"]["context"] == "orig" and listing["aaaaaaaaaaaaaaaa"]["error"] is None
            assert "format version 1" in listing["cccccccccccccccc"]["error"]
            r = c.post(f"{BASE}/again/restore", json={"snapshot": "aaaaaaaaaaaaaaaa"})
            assert r.status_code == 200, r.text
            got = c.post(f"{BASE}/again/completions", json={"prompt": "", "update": False, **greedy(8)}).json()
            assert got["choices"][0]["text"] == want
            r = c.post(f"{BASE}/again/restore", json={"snapshot": "cccccccccccccccc"})
            assert r.status_code == 400 and "format version 1; this llamay reads 2" in r.json()["error"]["message"]
    finally:
        live.stop()
    assert (folder / "aaaaaaaaaaaaaaaa.llkv").exists()  # a folder the user chose is kept at exit


def test_the_openapi_description_has_the_snapshot_routes(client):
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    assert set(paths[SNAPS]) == {"get"} and set(paths[SNAPS + "/{snapshot}"]) == {"get", "delete"}
    assert "507" in paths[BASE + "/{name}/snapshot"]["post"]["responses"]
    ref = paths[SNAPS]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.endswith("/SnapshotList")


def test_serve_takes_the_quota_options():
    import signal

    from tests.server.test_cli_serve import serve

    proc, url = serve("-m", str(stories("f32")), "--parallel", "1", "-c", "128", "--max-snapshots", "1",
                      "--max-snapshot-bytes", "512M")  # fmt: skip
    try:
        with httpx.Client(base_url=url, timeout=60) as c:
            listing = c.get(SNAPS).json()
            assert (listing["max_count"], listing["max_bytes"]) == (1, 512 << 20)
            assert c.post(BASE, json={"name": "a", "prompt": "Once upon a time"}).status_code == 200
            assert c.post(f"{BASE}/a/snapshot").status_code == 200
            r = c.post(f"{BASE}/a/snapshot")
            assert r.status_code == 507 and "at most 1 (--max-snapshots)" in r.json()["error"]["message"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def test_snapshots_made_at_once_cannot_pass_the_quota_together(tmp_path):
    """A reservation counts from the moment it is taken, before its file exists."""
    import asyncio

    from llamay.native.server.errors import ApiError
    from llamay.native.server.snapshot_store import FULL, SnapshotStore

    store = SnapshotStore(tmp_path, b"f" * 32, max_count=4, max_bytes=1000)

    async def run() -> list[int]:
        async with store.reserving(600):
            try:
                async with store.reserving(600):
                    return [200]
            except ApiError as e:
                return [e.status]

    assert asyncio.run(run()) == [FULL]  # 600 + 600 bytes > 1000, though no file was written yet
    assert store._reserved == {}  # given back, both
