"""A local Ray cluster over loopback for the Ray tests (started by the first test that needs it, stopped at the
end of the session), and llamay applications deployed on it. Skipped where the `[ray]` extra is not installed.

The machine is small and shared: the cluster gets 2 logical CPUs, each replica half of one and one kernel
thread; every wait is bounded."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.paths import SMOLLM2, registry_model

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
httpx = pytest.importorskip("httpx")

APP = "llamay"
DEPLOY_TIMEOUT_S = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    url: str

    def deploy(self, **options) -> None:
        """The llamay application with these build_app options, replacing the one before; returns when it serves."""
        from llamay.native.ray.deployment import build_app

        options = {"model": str(registry_model(SMOLLM2)), "replicas": 2, "num_cpus": 0.5, "threads": 1,
                   "ctx_size": 1024, "stats_period_s": 0.5, **options}  # fmt: skip
        app = build_app(options)
        failed: list[BaseException] = []

        def run() -> None:
            try:
                serve.run(app, name=APP, route_prefix="/")  # waits until the application runs, or raises
            except BaseException as e:
                failed.append(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(DEPLOY_TIMEOUT_S)
        if failed:
            raise failed[0]
        if t.is_alive():
            raise AssertionError(f"the application did not start in {DEPLOY_TIMEOUT_S} s: {serve.status()}")

    def client(self, timeout: float = 120) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def engine_status(self):
        return serve.status().applications[APP].deployments["Engine"]

    def wait_running(self, n: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while (st := self.engine_status()).replica_states.get("RUNNING", 0) != n or len(st.replica_states) != 1:
            if time.monotonic() > deadline:
                raise AssertionError(f"Engine replicas did not come back to {n} RUNNING: {st.replica_states}")
            time.sleep(1)

    def replica_pid(self, replica_id: str) -> int:
        import os

        actor = ray.get_actor(f"SERVE_REPLICA::{APP}#Engine#{replica_id}", namespace="serve")
        return ray.get(actor.__ray_call__.remote(lambda _self: os.getpid()), timeout=30)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    registry_model(SMOLLM2)  # skips before a cluster is started when the model is absent
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        yield Cluster(f"http://127.0.0.1:{port}")
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
