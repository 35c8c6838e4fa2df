"""A local Ray cluster over loopback for the Ray tests: started by the first test that needs it, stopped at the end
of the session, shared by every test (tests/ray/cluster.py deploys the application on it). Skipped where the
`[ray]` extra is not installed: each test module skips itself (`importorskip` here, at a conftest's import,
stops `pytest tests/ray` with an error instead).

The machine is small and shared: the cluster gets 2 logical CPUs, each replica half of one and one kernel thread;
every wait is bounded."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.paths import SMOLLM2, registry_model


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def cluster() -> Iterator:
    import ray
    from ray import serve

    from tests.ray.cluster import Cluster

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
