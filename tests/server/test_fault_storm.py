"""Issue 13's fault test: 64 concurrent streams against the real server, half of them disconnecting mid-way,
with failing restores, failing requests (a sampler and a forward pass that raise) and bad requests mixed in.
It ends with the KV pool back to idle accounting and every complete request correct: the same greedy text as the
same request run alone before the storm.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import struct

import httpx
import pytest

from llamay.kv import snapshot_file as sf
from tests.paths import stories
from tests.server.conftest import STORIES_ID, settled_problems, start_server
from tests.server.test_faults import FAULT_SEED, OPENINGS, SENTINEL, plant_forward_fault, plant_sampler_fault

pytestmark = pytest.mark.native_only

BASE = "/llamay/contexts"
N_STREAMS = 64
CUT_AFTER = 3  # events a disconnecting client reads before it goes away
SHORT, LONG = 32, 200  # tokens of a complete stream; of one cut mid-way (still running when it is cut)
PROMPTS = [p + tail for p in OPENINGS for tail in ("", " and then")]
N_CTX = 256
FAULTY_PROMPTS = [[1, 403, SENTINEL, 261], [1, SENTINEL]]  # token ids: their forward pass raises
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def live():
    server = start_server(stories("f32"), backend=os.environ.get("LLAMAY_BACKEND"), n_ctx=N_CTX, parallel=4,
                          queue=128, timeout=120.0)  # fmt: skip
    yield server
    server.stop()


def body(prompt, n: int, **kw) -> dict:
    return {"model": STORIES_ID, "prompt": prompt, "max_tokens": n, "temperature": 0, **kw}


async def stream(c: httpx.AsyncClient, req: dict, cut: int | None = None) -> dict:
    """A streamed completion: its status, text, error event, and events read (it stops after `cut`)."""
    out = {"status": 0, "text": "", "error": None, "events": 0}
    async with c.stream("POST", "/v1/completions", json={**req, "stream": True}) as r:
        out["status"] = r.status_code
        if r.status_code != 200:
            out["error"] = json.loads(await r.aread())["error"]
            return out
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if "error" in event:
                out["error"] = event["error"]
                continue
            out["text"] += "".join(ch["text"] for ch in event["choices"])
            out["events"] += 1
            if cut is not None and out["events"] >= cut:
                break  # leaving the block closes the connection mid-stream
    return out


async def post(c: httpx.AsyncClient, path: str, **kw) -> httpx.Response:
    return await c.post(path, **kw)


def forged_files(live, data: bytes, label: str) -> dict[str, str]:
    """Snapshot files that must fail to restore, planted in the server's folder: id -> what the 400 names."""
    store = live.service.snapshots
    n_vocab = live.service.snapshot_layout.n_vocab
    files = {}
    for i in range(4):
        damaged = bytearray(data)
        damaged[len(data) // 2 + i] ^= 0x10
        files[f"dead{i:012x}"] = (bytes(damaged), "checksum mismatch")
        body_ = bytearray(data[: -sf.DIGEST_BYTES])
        struct.pack_into("<i", body_, sf.HEADER_BYTES + len(label) + 4 * i, n_vocab + i)
        files[f"bad0{i:012x}"] = (bytes(body_) + hashlib.sha256(body_).digest(), f"tokens[{i}] is {n_vocab + i}")
    for sid, (blob, _) in files.items():
        store.path(sid).write_bytes(blob)
    return {sid: why for sid, (_, why) in files.items()}


def test_64_streams_with_disconnects_failing_restores_and_bad_requests(live, monkeypatch):
    service = live.service
    sched = service.scheduler
    with live.client() as c:  # the references, each request alone; and a context to snapshot and restore
        alone = {p: c.post("/v1/completions", json=body(p, SHORT)).json()["choices"][0]["text"] for p in PROMPTS}
        assert c.post(BASE, json={"name": "src", "prompt": PROMPTS[0]}).status_code == 200
        cont = {"prompt": " The end.", "max_tokens": 8, "temperature": 0, "update": False}
        want_cont = c.post(f"{BASE}/src/completions", json=cont).json()["choices"][0]["text"]
        snap = c.post(f"{BASE}/src/snapshot").json()["snapshot"]
        data = service.snapshots.path(snap).read_bytes()
        c.delete(f"{BASE}/src")
    forged = forged_files(live, data, "src")
    plant_sampler_fault(monkeypatch, sched)
    plant_forward_fault(monkeypatch)
    cancelled_before = service.metrics.finished["cancelled"]

    async def storm() -> dict[str, list]:
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
        async with httpx.AsyncClient(base_url=live.url, timeout=120, limits=limits) as c:
            tasks: dict[str, list] = {
                "complete": [stream(c, body(PROMPTS[i % 8], SHORT)) for i in range(0, N_STREAMS, 2)],
                "cut": [stream(c, body(PROMPTS[i % 8], LONG), cut=CUT_AFTER) for i in range(1, N_STREAMS, 2)],
                "sampler_fault": [stream(c, body(PROMPTS[i], SHORT, seed=FAULT_SEED)) for i in range(2)],
                "forward_fault": [post(c, "/v1/completions", json=body(ids, SHORT)) for ids in FAULTY_PROMPTS],
                "forged": [post(c, f"{BASE}/x{sid}/restore", json={"snapshot": sid}) for sid in forged],
                "missing": [post(c, f"{BASE}/m{i}/restore", json={"snapshot": f"{i:016x}"}) for i in range(2)],
                "restored": [post(c, f"{BASE}/r{i}/restore", json={"snapshot": snap}) for i in range(4)],
                "malformed": [post(c, "/v1/completions", content=b"{not json", headers=JSON) for _ in range(4)],
                "too_long": [post(c, "/v1/completions", json=body([1] + [403] * N_CTX, 4)) for _ in range(2)],
                "out_of_vocab": [post(c, "/v1/completions", json=body([1, 10**6], 4)) for _ in range(2)],
                "unknown_model": [c.get("/v1/models/nope") for _ in range(2)],  # any name serves: a lookup
                "repeat_penalty_0": [stream(c, body(PROMPTS[i], SHORT, repeat_penalty=0)) for i in range(2)],
            }
            flat = [(k, t) for k, ts in tasks.items() for t in ts]
            done = await asyncio.wait_for(asyncio.gather(*(t for _, t in flat)), timeout=240)
            out: dict[str, list] = {k: [] for k in tasks}
            for (k, _), result in zip(flat, done, strict=True):
                out[k].append(result)
            return out

    out = asyncio.run(storm())

    for i, r in enumerate(out["complete"]):  # every complete request is correct
        assert r["status"] == 200 and r["error"] is None, r
        assert r["text"] == alone[PROMPTS[(2 * i) % 8]], f"stream {2 * i}"
    for r in out["cut"]:
        assert r["status"] == 200 and r["events"] == CUT_AFTER and r["error"] is None
    for r in out["sampler_fault"]:
        assert r["status"] == 200 and "planted in the sampler" in r["error"]["message"]
    for r in out["forward_fault"]:
        assert r.status_code == 500 and "planted in the forward pass" in r.json()["error"]["message"]
    for r, (sid, why) in zip(out["forged"], forged.items(), strict=True):
        assert r.status_code == 400 and why in r.json()["error"]["message"], (sid, r.text)
    assert all(r.status_code == 404 for r in out["missing"] + out["unknown_model"])
    assert all(r.status_code == 400 for r in out["malformed"] + out["too_long"] + out["out_of_vocab"])
    assert all(r.status_code == 200 for r in out["restored"]), [r.text for r in out["restored"]]
    for r in out["repeat_penalty_0"]:  # refused by validation, or failing alone once it samples
        assert r["status"] == 400 or (r["status"] == 200 and r["error"] is not None), r

    assert service.metrics.finished["cancelled"] - cancelled_before >= N_STREAMS // 4  # cut ones were stopped
    assert settled_problems(service) == []  # idle accounting: every page's count equals its owners
    with live.client() as c:
        for i in range(4):  # what was restored under load continues exactly
            got = c.post(f"{BASE}/r{i}/completions", json=cont).json()
            assert got["choices"][0]["text"] == want_cont
            c.delete(f"{BASE}/r{i}")
        for sid in [snap, *forged]:
            assert c.delete(f"/llamay/snapshots/{sid}").status_code == 200
        assert c.get("/health").json()["status"] == "ok"
    assert settled_problems(service) == []
    use = sched.call(lambda st: (st.kv.prefix_cache.clear(), st.kv.page_use())[1]).result(10)
    assert use == {"free": sum(g.pages.n_pages for g in sched.state.kv.groups), "sequences": 0, "snapshots": 0,
                   "prefix_cache": 0}  # fmt: skip
