"""Property-based requests generated from the server's own OpenAPI description (schemathesis): valid and invalid
ones, for every operation; none may get a 5xx, and every error has the OpenAI-style body.

A dedicated server (the tiny model, a small context) so that what the generated requests create (contexts,
snapshots) does not leak into the other tests. Bounded: a few examples per operation and mode, derandomized.
"""

from __future__ import annotations

import pytest

from tests.paths import MINILM, stories
from tests.server.conftest import start_server

schemathesis = pytest.importorskip("schemathesis")
hypothesis = pytest.importorskip("hypothesis")

pytestmark = [pytest.mark.native_only, pytest.mark.slow]

MAX_EXAMPLES = 8
MODES = ("positive", "negative")


@pytest.fixture(scope="module")
def live():
    server = start_server(stories("q8_0"), n_ctx=256, parallel=4, queue=64, embedding_model=MINILM, timeout=60.0)
    yield server
    server.stop()


def check(live, case) -> None:
    response = case.call(base_url=live.url, timeout=120)
    where = f"{case.method} {case.formatted_path} {case.body!r:.300}"
    assert response.status_code < 500, f"{where}: {response.status_code} {response.text[:500]}"
    content_type = response.headers.get("content-type") or [""]  # schemathesis gives header value lists
    if response.status_code >= 400 and content_type[0].startswith("application/json"):
        err = response.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}, where


def test_no_server_error(live):
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 24
    for op in operations:
        for mode in MODES:

            @hypothesis.settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
                                 suppress_health_check=list(hypothesis.HealthCheck))  # fmt: skip
            @hypothesis.given(case=op.as_strategy(generation_mode=GenerationMode(mode)))
            def run(case) -> None:
                check(live, case)

            try:
                run()
            except hypothesis.errors.Unsatisfiable:  # nothing to make invalid (e.g. GET with no parameters)
                assert mode == "negative", op.label
    with live.client() as c:
        assert c.get("/health").json()["status"] == "ok"
