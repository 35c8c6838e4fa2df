"""Real servers on loopback for the server tests: uvicorn in a thread of the test process (so that tests can also
look inside the scheduler), on a free port, serving the tiny stories260K model.

`server` uses the default (fastest) backend; `slow_server` uses the portable backend, whose pace (tens of
tokens per second) leaves room to act in the middle of a generation (disconnects, timeouts).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from llamay.native.connections import Limits
from tests.paths import MINILM, stories

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

STORIES_ID = "stories260K-f32"


@dataclass
class Live:
    service: object  # llamay.native.server.Service
    server: object  # uvicorn.Server
    thread: threading.Thread
    url: str
    api_key: str | None = None

    def client(self, **kw) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.Client(base_url=self.url, timeout=kw.pop("timeout", 120), headers=headers, **kw)

    def openai(self):
        openai = pytest.importorskip("openai")
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.api_key or "none", max_retries=0, timeout=120)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def start_server(model_path, *, api_key: str | None = None, backend: str | None = None, app_kw: dict | None = None,
                 limits: Limits | None = None, **kw) -> Live:  # fmt: skip
    """A server on 127.0.0.1 configured as `llamay serve` configures it (`limits`: its connection limits);
    `app_kw` goes to create_app (allowed_hosts, cors_origins), the rest to Service."""
    import uvicorn

    from llamay.native.commands.serve import server_config
    from llamay.native.server import Service, create_app

    service = Service.load(model_path, backend=backend, **kw)
    app = create_app(service, api_key=api_key, **(app_kw or {}))
    server = uvicorn.Server(server_config(app, host="127.0.0.1", port=0, limits=limits or Limits()))
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    return Live(service, server, thread, f"http://127.0.0.1:{port}", api_key)


def wait_for(predicate, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def idle(service) -> bool:
    """No job queued or running, and every sequence given back."""
    sched = service.scheduler
    return sched.queue_depth == 0 and sched.running == 0 and not any(s.active for s in sched.state.kv.sequences)


def settled_problems(service, timeout: float = 20.0) -> list[str]:
    """Once nothing runs, what the strict KV audit finds (every page's count equals its owners, every sequence
    and snapshot owned). Asked again while not empty, up to `timeout`: a gone client's clean-up may still be on
    its way to the model thread; a real leak stays."""
    sched = service.scheduler
    deadline = time.monotonic() + timeout
    wait_for(lambda: sched.queue_depth == 0 and sched.running == 0, timeout, "nothing to run")
    while True:
        problems = sched.audit(strict=True).result(timeout)
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def accounting_exact(request):
    """After every test on a server fixture (the shared ones and each module's own): it is idle and its KV
    accounting is exact (nothing leaked)."""
    yield
    for name, live in request.node.funcargs.items():  # every fixture the test had (torn down or not)
        if isinstance(live, Live) and live.thread.is_alive() and live.service.scheduler.alive:
            problems = settled_problems(live.service)
            assert problems == [], f"{request.node.name} left the {name}'s KV accounting broken: {problems}"


@pytest.fixture(scope="session")
def server() -> Iterator[Live]:
    live = start_server(stories("f32"), backend=os.environ.get("LLAMAY_BACKEND"), n_ctx=512, parallel=4, queue=16,
                        embedding_model=MINILM)  # fmt: skip
    with live.client() as c:  # compile the kernels once, before any test is timed
        r = c.post("/v1/completions", json={"model": STORIES_ID, "prompt": "Once", "max_tokens": 2})
        assert r.status_code == 200, r.text
    yield live
    live.stop()


@pytest.fixture(scope="session")
def slow_server() -> Iterator[Live]:
    live = start_server(stories("f32"), backend="portable", n_ctx=512, parallel=2, queue=2, timeout=3.0)
    yield live
    live.stop()


@pytest.fixture
def client(server: Live) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c
