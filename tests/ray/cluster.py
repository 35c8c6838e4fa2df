"""The Ray tests' handle on their local cluster: deploy the llamay application (kept when the next test asks for
the same options), name its live replicas, ask one replica by name (x-llamay-replica), and wait for a condition
with a deadline. Tests wait on what they need to see (a stream's first event, a replica's queue, a replica
coming back), never for a fixed time: on a loaded machine they get slower, not wrong."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import ray
from ray import serve

from llamay.native.ray.relay import REPLICA_HEADER
from tests.paths import SMOLLM2, registry_model

APP = "llamay"
DEPLOY_TIMEOUT_S = 300  # the application's replicas loaded and serving (the model mapped, its kernels cached)
WAIT_S = 180  # any other condition a test waits for
REPLICA_ACTOR = f"SERVE_REPLICA::{APP}#Engine#"  # Ray's name of an Engine replica's actor, then its id
ENGINE_CLASS = ("llamay.native.ray.deployment", "Engine")
# the deployment most tests share (deployed once, kept while the next test asks for the same): room for three
# sequences and eight queued requests per replica, more than any of them sends to one replica
MAIN = {"replicas": 2, "parallel": 3, "queue": 8, "graceful_shutdown_timeout_s": WAIT_S}


def wait_for(what: str, condition: Callable[[], Any], timeout: float = WAIT_S, every: float = 0.1) -> Any:
    """condition()'s first truthy value, polled; an AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(every)
    return value


@dataclass
class Cluster:
    url: str
    deployed: dict[str, Any] | None = field(default=None)

    def deploy(self, **options: Any) -> list[str]:
        """The llamay application with these build_app options (the tests' defaults under them), unless it already
        runs with them; returns when its replicas serve, with their ids."""
        return self.begin_deploy(**options)()

    def begin_deploy(self, **options: Any) -> Callable[[], list[str]]:
        """Start deploying (Ray's serve.run, on a thread); the function returned waits until it is done."""
        from llamay.native.ray.deployment import build_app

        options = {"model": str(registry_model(SMOLLM2)), "replicas": 2, "num_cpus": 0.5, "threads": 1,
                   "ctx_size": 1024, "stats_period_s": 0.5, "health_check_period_s": 1.0, **options}  # fmt: skip
        if options == self.deployed:
            return lambda: self.wait_running(options["replicas"])
        self.deployed = None
        app = build_app(options)
        failed: list[BaseException] = []

        def run() -> None:
            try:
                serve.run(app, name=APP, route_prefix="/")  # waits until the application runs, or raises
            except BaseException as e:
                failed.append(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()

        def done() -> list[str]:
            t.join(DEPLOY_TIMEOUT_S)
            if failed:
                raise failed[0]
            if t.is_alive():
                raise AssertionError(f"the application did not start in {DEPLOY_TIMEOUT_S} s: {serve.status()}")
            self.deployed = options
            return self.wait_running(options["replicas"])

        return done

    def client(self, timeout: float = WAIT_S) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def replica_ids(self) -> list[str]:
        """The ids of the Engine replicas whose actors are alive (running, starting or draining)."""
        names = ray.util.list_named_actors(all_namespaces=True)
        return sorted(a["name"].removeprefix(REPLICA_ACTOR) for a in names if a["name"].startswith(REPLICA_ACTOR))

    def wait_running(self, n: int, timeout: float = DEPLOY_TIMEOUT_S) -> list[str]:
        """Wait until exactly n Engine replicas exist and all are RUNNING; their ids."""

        def settled() -> list[str] | None:
            st = serve.status().applications[APP].deployments["Engine"]
            ids = self.replica_ids()
            return ids if st.replica_states == {"RUNNING": n} and len(ids) == n else None

        return wait_for(f"{n} Engine replicas RUNNING", settled, timeout, every=0.5)

    def health(self, replica: str) -> dict[str, Any]:
        """One replica's /health (its scheduler: running, queue_depth), asked by name."""
        with self.client(timeout=60) as c:
            r = c.get("/health", headers={REPLICA_HEADER: replica})
        assert r.headers[REPLICA_HEADER] == replica, (r.headers[REPLICA_HEADER], replica)
        return r.json()

    def wait_health(self, replica: str, what: str, condition: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Wait until the replica's /health satisfies condition; the last one seen is in the error."""
        seen: list[dict[str, Any]] = [{}]

        def ok() -> bool:
            seen[0] = self.health(replica)
            return condition(seen[0])

        try:
            wait_for(what, ok)
        except AssertionError as e:
            raise AssertionError(f"{e}; its /health: {seen[0]}") from None
        return seen[0]

    def on_replica(self, replica: str, fn: Callable[[Any], Any]) -> Any:
        """fn(the replica's Engine) run in the replica's process (for what no route does: its pid, stopping its
        model thread)."""
        actor = ray.get_actor(REPLICA_ACTOR + replica, namespace="serve")

        def call(_actor: Any) -> Any:
            import gc

            # Ray's workers freeze what they hold (gc.freeze): thawed to be seen. Ray ships the deployment's class by
            # value: found by its name, not as llamay's class object
            gc.unfreeze()
            try:
                (engine,) = [o for o in gc.get_objects() if (type(o).__module__, type(o).__name__) == ENGINE_CLASS]
            finally:
                gc.freeze()
            return fn(engine)

        return ray.get(actor.__ray_call__.remote(call), timeout=60)

    def pid(self, replica: str) -> int:
        return self.on_replica(replica, lambda _engine: os.getpid())


class Streamed:
    """A streamed request (SSE or NDJSON) read on a thread of its own: the replica that answered, its events as they
    come (JSON objects, and "[DONE]") with their arrival times. Its client leaves when `leave(self)` is true after
    an event, or after `release()`."""

    def __init__(self, cluster: Cluster, path: str, body: dict, replica: str | None = None,
                 leave: Callable[[Streamed], bool] = lambda _s: False) -> None:  # fmt: skip
        self.replica: str | None = None
        self.events: list[Any] = []
        self.at: list[float] = []
        self.error: BaseException | None = None
        self._leave = leave
        self._released = threading.Event()
        headers = {REPLICA_HEADER: replica} if replica else {}
        self._thread = threading.Thread(target=self._run, args=(cluster, path, body, headers), daemon=True)
        self._thread.start()

    def _run(self, cluster: Cluster, path: str, body: dict, headers: dict) -> None:
        try:
            with cluster.client() as c, c.stream("POST", path, json=body, headers=headers) as s:
                self.replica = s.headers[REPLICA_HEADER]
                for line in s.iter_lines():
                    data = line[6:] if line.startswith("data: ") else line if not line.startswith(":") else ""
                    if not data:
                        continue
                    self.events.append(data if data == "[DONE]" else json.loads(data))
                    self.at.append(time.monotonic())
                    if self._released.is_set() or self._leave(self):
                        return  # the client goes away mid-stream
        except BaseException as e:
            self.error = e

    def after(self, t: float) -> int:
        """Events that came after time t."""
        return sum(a > t for a in self.at)

    def join(self) -> Streamed:
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the stream did not end"
        assert self.error is None, self.error
        return self

    def release(self) -> Streamed:
        self._released.set()
        return self.join()
