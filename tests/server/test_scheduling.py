"""What the scheduler promises, seen from a client: a full queue answers 429, a client that goes away frees its
sequence, a repeated long prompt is served from the prefix cache, a request past its deadline is stopped,
concurrent requests are batched."""

from __future__ import annotations

import concurrent.futures
import json
import threading

import httpx
import pytest

from tests.server.conftest import STORIES_ID, idle, wait_for

pytestmark = pytest.mark.native_only

STORY = (
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw "
    "a big red ball under a tree. She ran to get it and kicked it very high. The ball flew over the fence and "
    "landed in the garden of an old man. Lily was scared, but she went to the door and knocked. The old man smiled "
    "and gave her the ball back. They became good friends and played together every day after that. "
)


def test_full_queue_answers_429_with_retry_after(slow_server):
    service = slow_server.service
    sched = service.scheduler
    body = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 3, "temperature": 0}
    sched.pause()
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            waiting = [pool.submit(lambda: slow_server.client().post("/v1/completions", json=body)) for _ in range(2)]
            wait_for(lambda: sched.queue_depth == 2, what="two queued requests")
            with slow_server.client() as c:
                r = c.post("/v1/completions", json=body)
                assert r.status_code == 429
                assert int(r.headers["Retry-After"]) >= 1
                assert r.json()["error"]["type"] == "rate_limit_error"
                assert c.get("/health").status_code == 200
                assert 'llamay_rejected_requests_total{reason="queue_full"}' in c.get("/metrics").text
            sched.resume()
            for f in waiting:
                r = f.result(timeout=60)
                assert r.status_code == 200, r.text
    finally:
        sched.resume()
    wait_for(lambda: idle(service), what="the queue to drain")


def test_disconnect_mid_stream_releases_the_sequence(slow_server):
    service = slow_server.service
    sched = service.scheduler
    pool = sched.state.kv.groups[0].pages
    free_before = pool.n_free + sched.state.kv.prefix_cache.n_pages
    body = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 400, "stream": True, "temperature": 0}
    with slow_server.client() as c, c.stream("POST", "/v1/completions", json=body) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        assert json.loads(first[6:])["choices"][0]["text"]
        sched.pause()  # the generation now waits mid-stream: only a cancel can end it
        assert sched.running == 1
    try:  # leaving the block closed the connection
        wait_for(lambda: sched.running == 0, what="the cancelled job to leave the batcher")
        assert not any(s.active for s in sched.state.kv.sequences)
    finally:
        sched.resume()
    assert service.metrics.finished["cancelled"] >= 1
    # pages are back: free, or held by the prefix cache (which gives them up on demand)
    assert pool.n_free + sched.state.kv.prefix_cache.n_pages >= free_before


def test_disconnect_while_waiting_non_streaming(slow_server):
    sched = slow_server.service.scheduler
    body = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 400, "temperature": 0}
    sched.pause()
    try:
        with pytest.raises(httpx.ReadTimeout), slow_server.client(timeout=0.5) as c:
            c.post("/v1/completions", json=body)
        wait_for(lambda: sched.queue_depth == 0, what="the abandoned request to leave the queue")
    finally:
        sched.resume()
    wait_for(lambda: idle(slow_server.service), what="nothing to run")


def test_request_past_its_timeout_is_stopped(slow_server):
    with slow_server.client() as c:
        r = c.post("/v1/completions", json={"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 500,
                                            "temperature": 0})  # fmt: skip
        assert r.status_code == 408
        assert r.json()["error"]["code"] == "request_timeout"
        assert c.get("/health").status_code == 200
    wait_for(lambda: idle(slow_server.service), what="the timed-out sequence to be released")


def test_timeout_mid_stream_is_an_error_event(slow_server):
    body = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 500, "stream": True, "temperature": 0}
    with slow_server.client() as c:
        r = c.post("/v1/completions", json=body)
    events = [b[6:] for b in r.text.strip().split("\n\n")]
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["error"]["code"] == "request_timeout"


def test_repeated_long_prompt_reports_cached_tokens(server):
    oa = server.openai()
    prompt = STORY + "The end. " + STORY[:200]
    first = oa.completions.create(model=STORIES_ID, prompt=prompt, max_tokens=2, temperature=0)
    second = oa.completions.create(model=STORIES_ID, prompt=prompt, max_tokens=2, temperature=0)
    n = second.usage.prompt_tokens
    assert n > 200
    assert first.usage.prompt_tokens_details.cached_tokens < n // 2
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached >= (n - 1) // 16 * 16  # at least every whole page of the prompt
    assert second.usage.model_extra["llamay_cached_prompt_tokens"] == cached
    assert second.choices[0].text == first.choices[0].text


def test_concurrent_requests_are_batched_and_none_is_lost(server, client):
    steps_before = server.service.metrics.steps
    seqs_before = server.service.metrics.step_sequences
    body = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 32, "temperature": 0}

    def one(_):
        with server.client() as c:
            return c.post("/v1/completions", json=body)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8)))
    assert all(r.status_code == 200 for r in results)
    texts = {r.json()["choices"][0]["text"] for r in results}
    assert len(texts) == 1  # greedy: every sequence of the batch gives the single-sequence answer
    m = server.service.metrics
    width = (m.step_sequences - seqs_before) / max(m.steps - steps_before, 1)
    assert width > 1.0  # several sequences shared forward passes
    metrics = client.get("/metrics").text
    for name in ("llamay_queue_depth", "llamay_batch_width", "llamay_cached_prompt_tokens_total",
                 "llamay_generated_tokens_total", "llamay_requests_total"):  # fmt: skip
        assert name in metrics


def test_made_up_methods_and_paths_add_no_metric_series(client):
    def series() -> int:
        return sum(1 for line in client.get("/metrics").text.splitlines() if line.startswith("llamay_requests_total"))

    client.request("FROB", "/nothing/0")
    series()  # /metrics counts itself from its first answer on
    before = series()
    for i in range(20):
        client.request(f"FROB{i}", f"/nothing/{i}")
    assert series() == before  # every one counted under method "other", route "unmatched"
    assert 'method="other",route="unmatched"' in client.get("/metrics").text


def test_scheduler_survives_many_cancels(server):
    """Streams opened and dropped at once, over and over: the server keeps its sequences and stays healthy."""
    body = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 200, "stream": True}

    def drop(_):
        with server.client() as c, c.stream("POST", "/v1/completions", json=body) as r:
            next(r.iter_lines())

    threads = [threading.Thread(target=drop, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    wait_for(lambda: idle(server.service), what="every dropped stream to be released")
    with server.client() as c:
        assert c.get("/health").json()["status"] == "ok"
