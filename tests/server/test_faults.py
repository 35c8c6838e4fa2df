"""Faults against the real server: what a request takes it gives back on every error, one request's failure is
its own, waiting for a sequence is bounded, and `/health` says when something is wrong.

Failures are planted through the modules' own seams (`monkeypatch` of the sampler factory the routes call and of
the forward pass the Batcher calls), never through a test-only switch in the server.
"""

from __future__ import annotations

import concurrent.futures
import json
import re

import pytest

import llamay.batcher
import llamay.native.server.streaming as streaming
from llamay.model.forward import begin
from llamay.native.server.scheduler import Job
from llamay.sampling import Sampler, SamplerConfig
from tests.paths import stories
from tests.server.conftest import STORIES_ID, start_server, wait_for

pytestmark = pytest.mark.native_only

BASE = "/llamay/contexts"
FAULT_SEED = 424242  # requests with this seed get a sampler that raises after a few tokens
SENTINEL = 499  # a prompt holding this token id makes the forward pass raise
WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "cat", "dog", "sun", "moon"]
OPENINGS = ["Once upon a time", "The little dog", "One day, Lily", "Tom had a red ball"]


def long_prompt(i: int, n: int = 120) -> str:
    """~450 distinct tokens: prompts that share no page with each other."""
    return " ".join(f"{WORDS[(i + j) % len(WORDS)]}{i}" for j in range(n))


def greedy(n: int, **kw) -> dict:
    """A greedy request; model=None leaves `model` out (the context routes take none: it is refused there)."""
    body = {"model": STORIES_ID, "max_tokens": n, "temperature": 0, **kw}
    return {k: v for k, v in body.items() if not (k == "model" and v is None)}


def stream_text(client, body: dict) -> tuple[str, dict | None]:
    """(text, error event or None) of a streamed completion."""
    text, error = [], None
    with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if "error" in event:
                error = event["error"]
            else:
                text += [c["text"] for c in event["choices"]]
    return "".join(text), error


# -- what a failed operation took, it gives back ---------------------------------------------------------------


def test_failed_restores_give_back_what_they_took(server, client):
    """A restore into a full KV pool is refused (503, naming who holds the pages) and takes nothing with it:
    after more failures than there are sequences, generation and a later restore still work."""
    names: list[str] = []
    try:
        for i in range(12):
            r = client.post(BASE, json={"name": f"full{i}", "prompt": long_prompt(i)})
            if r.status_code != 200:
                break
            names.append(f"full{i}")
            if i == 0:
                want = client.post(f"{BASE}/full0/completions", json={**greedy(8, model=None), "update": False}).json()
                snap = client.post(f"{BASE}/full0/snapshot").json()
        assert r.status_code == 503, r.text
        held = re.search(r"(\d+) are held by (\d+) snapshots \(named contexts", r.json()["error"]["message"])
        assert held and int(held[2]) >= len(names), r.text  # the true holders, counted
        for _ in range(server.service.scheduler.cfg.n_seq + 2):
            r = client.post(f"{BASE}/back/restore", json={"snapshot": snap["snapshot"]}, timeout=30)
            assert r.status_code == 503, r.text
            err = r.json()["error"]
            assert err["code"] == "kv_cache_full" and "snapshots" in err["message"]
        r = client.post("/v1/completions", json=greedy(4, prompt="Once upon a time"), timeout=30)
        assert r.status_code == 200, r.text
        assert client.get("/health").json()["status"] == "ok"
    finally:
        for name in names:
            client.delete(f"{BASE}/{name}")
    r = client.post(f"{BASE}/back/restore", json={"snapshot": snap["snapshot"]}, timeout=30)
    assert r.status_code == 200, r.text
    got = client.post(f"{BASE}/back/completions", json={**greedy(8, model=None), "update": False}).json()
    assert got["choices"][0]["text"] == want["choices"][0]["text"]
    client.delete(f"{BASE}/back")
    client.delete(f"/llamay/snapshots/{snap['snapshot']}")


def test_sequences_held_by_no_request_degrade_health_and_nothing_waits_for_them(server, client):
    """Every sequence taken by no request (planted on the model thread): /health says degraded and names them;
    a restore, which waits for a sequence, fails at once instead of waiting forever; a generation says why."""
    sched = server.service.scheduler
    client.post(BASE, json={"name": "w", "prompt": "Once upon a time"})
    sid = client.post(f"{BASE}/w/snapshot").json()["snapshot"]
    client.delete(f"{BASE}/w")
    held = sched.call(lambda st: [st.kv.acquire() for _ in range(st.n_seq)]).result(10)
    try:
        wait_for(lambda: client.get("/health").status_code == 503, 10, "/health to degrade")
        health = client.get("/health").json()
        assert health["status"] == "degraded"
        assert "sequence 0 is in use but no running request owns it" in health["problems"]
        gauge = re.search(r"^llamay_kv_accounting_problems (\S+)$", client.get("/metrics").text, re.M)
        assert gauge and float(gauge[1]) == len(health["problems"])
        r = client.post(f"{BASE}/back/restore", json={"snapshot": sid}, timeout=10)
        assert r.status_code == 503 and "no sequence is free" in r.json()["error"]["message"]
        r = client.post("/v1/completions", json=greedy(2, prompt="Once"), timeout=10)
        assert r.status_code == 503 and "held by no request" in r.json()["error"]["message"]
    finally:
        sched.call(lambda st: [st.kv.release(i) for i in held]).result(10)
    wait_for(lambda: client.get("/health").json()["status"] == "ok", 10, "/health to recover")
    client.delete(f"/llamay/snapshots/{sid}")


def test_waiting_for_a_sequence_ends_at_the_timeout(slow_server):
    """Both sequences busy with jobs that outlive the server's timeout (3 s): a restore waits that long, then
    fails with 503, instead of waiting for them."""
    sched = slow_server.service.scheduler
    tok = slow_server.service.tokenizer
    with slow_server.client(timeout=30) as c:
        c.post(BASE, json={"name": "w", "prompt": "Once upon a time"})
        sid = c.post(f"{BASE}/w/snapshot").json()["snapshot"]
        c.delete(f"{BASE}/w")
        jobs = [Job(tok.encode("Once upon a time"), 400, Sampler(SamplerConfig(temperature=0.0)),
                              timeout=120.0) for _ in range(2)]  # fmt: skip
        sched.submit(jobs)
        try:
            wait_for(lambda: sched.running == 2, 20, "both jobs to run")
            r = c.post(f"{BASE}/back/restore", json={"snapshot": sid}, timeout=20)
            assert r.status_code == 503, r.text
            assert "no sequence became free within 3 s" in r.json()["error"]["message"]
            assert sched.running == 2  # the jobs were not what ended the wait
        finally:
            for job in jobs:
                sched.cancel(job)
        c.delete(f"/llamay/snapshots/{sid}")


def test_health_is_degraded_when_the_model_thread_is_gone():
    live = start_server(stories("f32"), n_ctx=64, parallel=1, queue=1)
    try:
        live.service.scheduler.stop()
        with live.client() as c:
            r = c.get("/health")
        assert r.status_code == 503
        assert r.json()["status"] == "degraded" and r.json()["problems"] == ["the model thread has stopped"]
    finally:
        live.stop()


# -- one request's failure is its own --------------------------------------------------------------------------


class FailingSampler:
    """A sampler that raises after a few tokens, as a request-specific sampling bug would."""

    def __init__(self, inner, after: int, batch_sizes: list[int], sched) -> None:
        self.inner, self.after, self.calls = inner, after, 0
        self.batch_sizes, self.sched = batch_sizes, sched

    def sample(self, *args):
        self.calls += 1
        if self.calls > self.after:
            self.batch_sizes.append(self.sched.running)
            raise ZeroDivisionError("planted in the sampler")
        return self.inner.sample(*args)


def plant_sampler_fault(monkeypatch, sched) -> list[int]:
    """Requests seeded FAULT_SEED sample a few tokens, then their sampler raises; returns the running counts seen
    at each failure."""
    widths: list[int] = []
    real = streaming.sampler_for

    def sampler_for(p, choice=0, **kw):
        inner = real(p, choice, **kw)
        return FailingSampler(inner, 3, widths, sched) if p.seed == FAULT_SEED else inner

    monkeypatch.setattr(streaming, "sampler_for", sampler_for)
    return widths


def plant_forward_fault(monkeypatch) -> list[int]:
    """A forward pass over a batch holding SENTINEL places the batch (pages allocated), then raises; returns the
    number of sequences in each such batch."""
    widths: list[int] = []
    real = llamay.batcher.forward

    def forward(model, st, tokens, seqs=None, outputs=None):
        if SENTINEL in tokens:
            widths.append(len(set(seqs)))
            begin(model, st, tokens, seqs, outputs)
            raise RuntimeError("planted in the forward pass")
        return real(model, st, tokens, seqs, outputs)

    monkeypatch.setattr(llamay.batcher, "forward", forward)
    return widths


def alone(client, openings: list[str], n: int) -> list[str]:
    return [client.post("/v1/completions", json=greedy(n, prompt=p)).json()["choices"][0]["text"] for p in openings]


def beside_three_others(server, send):
    """Three greedy streams run; paused mid-way, `send()` (a request, on a thread) joins them. Returns the three
    results and send()'s."""
    sched = server.service.scheduler
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        sched.pause()
        try:
            runs = [pool.submit(stream_text, server.client(), greedy(160, prompt=p)) for p in OPENINGS[:3]]
            wait_for(lambda: sched.queue_depth == 3, 20, "the others to queue")
            sched.resume()
            wait_for(lambda: sched.running == 3, 20, "the others to run")
            sched.pause()  # mid-way: the newcomer joins a batch of three decoders
            odd = pool.submit(send)
            wait_for(lambda: sched.queue_depth == 1, 20, "the newcomer to queue")
        finally:
            sched.resume()
        return [f.result(60) for f in runs], odd.result(60)


def test_a_failing_sampler_fails_its_request_alone(server, client, monkeypatch):
    widths = plant_sampler_fault(monkeypatch, server.service.scheduler)
    expected = alone(client, OPENINGS[:3], 160)
    results, (text, error) = beside_three_others(
        server, lambda: stream_text(server.client(), greedy(48, prompt=OPENINGS[3], seed=FAULT_SEED))
    )
    assert [t for t, _ in results] == expected and all(e is None for _, e in results)
    assert error is not None and "ZeroDivisionError: planted in the sampler" in error["message"]
    assert text  # it had streamed its first tokens
    assert max(widths) == 4  # it failed inside the batch with the three others


def test_a_failing_forward_fails_only_the_culprit(server, client, monkeypatch):
    widths = plant_forward_fault(monkeypatch)
    expected = alone(client, OPENINGS[:3], 160)
    culprit = greedy(48, prompt=[1, 403, SENTINEL, 261, 378])
    results, bad = beside_three_others(server, lambda: server.client().post("/v1/completions", json=culprit))
    assert bad.status_code == 500 and "planted in the forward pass" in bad.json()["error"]["message"]
    assert [t for t, _ in results] == expected and all(e is None for _, e in results)
    assert widths == [4, 1]  # it broke a batch of four; alone it failed again; the three went on alone
