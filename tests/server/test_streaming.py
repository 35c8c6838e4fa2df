"""Streams whose client is gone before their first byte (`streaming.Stream`): the body is never iterated, so no
`finally` of its generators runs, yet every job is cancelled, a kept snapshot dropped, a context's pin and the
model's lease given back. The app is driven as ASGI on the server's own event loop, with a client that leaves
at the response's start: ASGI 2.4 (`send` raises OSError, as uvicorn's does for a closed socket) and 2.3
(`http.disconnect`, while the start is still being sent)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.server.conftest import STORIES_ID, idle, settled_problems, wait_for

pytestmark = pytest.mark.native_only

CONTEXT = "abandoned"
MSGS = [{"role": "user", "content": "Once upon a time"}]
ROUTES = {
    "openai.chat": ("/v1/chat/completions", {"messages": MSGS, "max_tokens": 24, "stream": True}),
    "openai.completions": ("/v1/completions", {"prompt": "Once", "max_tokens": 24, "stream": True}),
    "openai.responses": ("/v1/responses", {"input": "Once", "max_output_tokens": 24, "stream": True}),
    "ollama.generate": ("/api/generate", {"model": STORIES_ID, "prompt": "Once", "options": {"num_predict": 24}}),
    "ollama.chat": ("/api/chat", {"model": STORIES_ID, "messages": MSGS, "options": {"num_predict": 24}}),
    "llama.completion": ("/completion", {"prompt": "Once", "n_predict": 24, "stream": True, "id_slot": 3}),
    "context": (f"/llamay/contexts/{CONTEXT}/completions", {"prompt": " there", "max_tokens": 24, "stream": True}),
}


class ClientGone(Exception):
    pass


async def _abandon(app, path: str, body: dict, spec: str, ready) -> int:
    """POST `body` to `path` with a client that leaves when the response starts, once `ready()` holds; the
    status the app began to send."""
    data = json.dumps(body).encode()
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": spec}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(data)).encode())]}  # fmt: skip
    sent = {"body": False, "status": 0}
    forever = asyncio.Event()

    async def until_ready() -> None:
        while not ready():
            await asyncio.sleep(0.01)

    async def receive() -> dict:
        if not sent["body"]:
            sent["body"] = True
            return {"type": "http.request", "body": data, "more_body": False}
        if spec == "2.4":  # nobody listens for the disconnect: it shows in `send`
            await forever.wait()
        await until_ready()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            sent["status"] = message["status"]
            if spec == "2.4":
                await until_ready()
                raise OSError("the client closed the connection")
            await forever.wait()  # 2.3: cancelled by the disconnect, the body never begun
        elif message["type"] == "http.response.body" and message.get("body"):
            raise AssertionError(f"a byte of the body was sent: {message['body'][:80]!r}")

    try:
        await app(scope, receive, send)
    except Exception as e:  # Starlette's ClientDisconnect (2.4), or what wraps it
        if "ClientDisconnect" not in type(e).__name__ and not isinstance(e, OSError):
            raise
    return sent["status"]


@pytest.fixture
def context(server, client):
    r = client.post("/llamay/contexts", json={"name": CONTEXT, "prompt": "Once upon a time"})
    assert r.status_code == 200, r.text
    yield server.service.contexts.items[CONTEXT]
    client.delete(f"/llamay/contexts/{CONTEXT}")
    client.post("/slots/3?action=erase")


@pytest.mark.parametrize("spec", ["2.4", "2.3"])
@pytest.mark.parametrize("when", ["queued", "finished"])
@pytest.mark.parametrize("route", list(ROUTES))
def test_a_client_gone_before_the_first_byte_gives_everything_back(server, context, route, when, spec):
    app = server.server.config.app
    pool = app.state.pool
    service = server.service
    sched = service.scheduler
    loop = pool._reaper.get_loop()  # the server's event loop: the app runs where uvicorn runs it
    path, body = ROUTES[route]
    ctx_tokens, finished = list(context.tokens), sched.metrics.finished["cancelled"]
    if when == "queued":  # the job waits in the queue while the client goes: it must be taken out of it
        sched.pause()
        ready = lambda: sched.queue_depth == 1  # noqa: E731
    else:  # the job has run to its end (a keep job has kept its snapshot) when the client goes
        ready = lambda: idle(service)  # noqa: E731
    try:
        status = asyncio.run_coroutine_threadsafe(_abandon(app, path, body, spec, ready), loop).result(60)
        assert status == 200
        assert pool.resident.leases == 0  # the model's lease went with the stream
        if when == "queued":
            wait_for(lambda: sched.queue_depth == 0, 10, "the abandoned job's cancel (the scheduler is paused)")
            assert sched.metrics.finished["cancelled"] == finished + 1
    finally:
        sched.resume()
    assert settled_problems(service) == []  # strict: no snapshot is live without a context holding it
    assert context.pin.holders == 1  # the continuation's hold on the context's snapshot was let go
    assert service.contexts.items[CONTEXT] is context and context.tokens == ctx_tokens  # the context stays
    assert "slot-3" not in service.contexts.items  # the slot's cache never took the unsent reply


FULL = {
    "openai.chat": ("/v1/chat/completions", {"model": STORIES_ID, "messages": MSGS, "max_tokens": 2}),
    "openai.completions": ("/v1/completions", {"model": STORIES_ID, "prompt": "Once", "max_tokens": 2}),
    "openai.responses": ("/v1/responses", {"input": "Once", "max_output_tokens": 2}),
    "ollama.generate": ("/api/generate", {"model": STORIES_ID, "prompt": "Once", "stream": False}),
    "ollama.chat": ("/api/chat", {"model": STORIES_ID, "messages": MSGS, "stream": False}),
    "llama.completion": ("/completion", {"prompt": "Once", "n_predict": 2}),
    "llama.infill": ("/infill", {"input_prefix": "def f(", "input_suffix": "):", "n_predict": 2}),
    "contexts.create": ("/llamay/contexts", {"name": "never", "prompt": "Once"}),
}


def test_a_full_queue_is_refused_before_any_preparation(slow_server, monkeypatch):
    """With the queue full, every generating route answers 429 (Retry-After, its API's error shape) without
    rendering, tokenizing or compiling anything: nothing reaches the preparation threads."""
    import concurrent.futures

    service, sched = slow_server.service, slow_server.service.scheduler
    held = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 2}
    sched.pause()
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as threads:
            waiting = [threads.submit(lambda: slow_server.client().post("/v1/completions", json=held))
                       for _ in range(sched.cfg.queue)]  # fmt: skip
            wait_for(lambda: sched.queue_depth == sched.cfg.queue, what="a full queue")
            prepared = []
            offload = service.offload

            async def counted(fn, *args):
                prepared.append(fn)
                return await offload(fn, *args)

            monkeypatch.setattr(service, "offload", counted)
            with slow_server.client() as c:
                for route, (path, body) in FULL.items():
                    r = c.post(path, json=body)
                    assert r.status_code == 429, (route, r.text)
                    assert int(r.headers["Retry-After"]) >= 1
                    error = r.json()["error"]
                    if path.startswith("/api/"):  # Ollama's shape: the message alone
                        assert isinstance(error, str) and "queue is full" in error, route
                    else:
                        assert error["type"] == "rate_limit_error" and error["code"] == "queue_full", route
                    assert prepared == [], (route, prepared)
            monkeypatch.undo()
            sched.resume()
            # the queued ones answer (408 once they waited past the server's --timeout of 3 s)
            assert all(f.result(timeout=60).status_code in (200, 408) for f in waiting)
    finally:
        sched.resume()
    wait_for(lambda: idle(service), what="the queue to drain")
