"""Property-based requests generated from the server's own OpenAPI description (schemathesis), with all of its
checks: no 5xx, every status and content type and response body as described, schema-violating requests
refused, schema-valid ones accepted, every error with the OpenAI-style body (Ollama's on its routes); and
stateful runs that follow the description's links through the context routes (create, get, fork, snapshot,
restore, continue, delete).

One check is narrowed, not dropped: schemathesis' `positive_data_acceptance` wants every schema-valid request
accepted, and a few refusals depend on what no JSON Schema can say (RUNTIME_REFUSALS: a text's token count
against the context, fields that must agree with each other, a JSON Schema the constraint compiler cannot
take). Our replacement accepts those 400s by their error code only; any other 400 to a schema-valid request
fails, so everything else a route checks must be in the description.

A dedicated server (the tiny model, a small context) so that what the generated requests create (contexts,
snapshots) does not leak into the other tests. Bounded: a few examples per operation and mode, derandomized.
"""

from __future__ import annotations

import os

import pytest

from tests.paths import MINILM, stories
from tests.server.conftest import start_server

schemathesis = pytest.importorskip("schemathesis")
hypothesis = pytest.importorskip("hypothesis")

pytestmark = [pytest.mark.native_only, pytest.mark.slow]

# CI's bounded run; LLAMAY_SCHEMATHESIS_EXAMPLES=200 runs a long one
MAX_EXAMPLES = int(os.environ.get("LLAMAY_SCHEMATHESIS_EXAMPLES", "8"))
MODES = ("positive", "negative")
STATEFUL_STEPS = 12
STATEFUL_EXAMPLES = max(20, MAX_EXAMPLES // 2)  # enough for the links to reach a restore and a snapshot's routes
RUNTIME_REFUSALS = {
    "context_length_exceeded": "a prompt's tokens, known once tokenized, against the context",
    "too_many_sequences": "n times the number of prompts, against --queue",
    "conflicting_fields": "fields that must agree (best_of and n, top_logprobs and logprobs)",
    "template_error": "the model's chat template refusing these messages (e.g. roles out of order)",
    "invalid_response_format": "a JSON Schema the constraint compiler does not support",
    "constraint_limit_exceeded": "a JSON Schema beyond the constraint compiler's limits",
    "invalid_grammar": "a GBNF grammar the constraint compiler cannot parse",
    "fim_not_supported": "/infill on a model without fill-in-the-middle tokens",
    "model_not_reranker": "/rerank on a server whose embedding model is not a reranker",
    "slot_empty": "saving a slot that holds no prompt cache (its state, known at run time)",
    "invalid_tools": "tools and tool_choice that disagree (a named or required call without its tool, two tools of "
    "one name), or a tool's parameters the constraint compiler cannot enforce",
}
# Ollama's error body is its message alone: how those messages begin or what they say, for each code
OLLAMA_REFUSALS = {
    "context_length_exceeded": ("shorten it", "reads at most"),
    "template_error": ("the chat template cannot render",),
    "invalid_response_format": ("format: ",),
    "constraint_limit_exceeded": ("format: ",),
    "invalid_tools": ("two tools are named", "the tools' parameters"),
    "conflicting_fields": (
        "think needs the model's own template",
        "top_logprobs needs logprobs",
        "format cannot constrain a reply that may call tools",
    ),
}


@schemathesis.check
def schema_valid_requests_are_accepted(ctx, response, case) -> None:
    """positive_data_acceptance, less the RUNTIME_REFUSALS (400s the description cannot foresee), plus the
    error body's shape on every 4xx and 5xx."""
    status = response.status_code
    ollama = case.path.startswith("/api/")
    if status >= 400 and response.headers.get("content-type", [""])[0].startswith("application/json"):
        err = response.json()["error"]
        if ollama:
            assert isinstance(err, str) and err, err
        else:
            assert set(err) == {"message", "type", "param", "code"}, err
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or status < 400 or status in (401, 403, 404, 409, 429):
        return
    refused = f"a schema-valid request was refused: {status} {response.text[:300]}"
    assert status == 400, refused
    err = response.json()["error"]
    if ollama:
        assert any(p in err for phrases in OLLAMA_REFUSALS.values() for p in phrases), refused
    else:
        assert err["code"] in RUNTIME_REFUSALS, refused


def _excluded():
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    return [positive_data_acceptance]


@pytest.fixture(scope="module")
def live():
    server = start_server(stories("q8_0"), n_ctx=256, parallel=4, queue=64, embedding_model=MINILM, timeout=60.0)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def schema(live):
    return schemathesis.openapi.from_url(f"{live.url}/openapi.json")


@pytest.fixture(scope="module")
def roomy():
    """A server whose KV pool holds every context a client may keep (MAX_CONTEXTS) and two more: one request at a
    time can never run out of pages, so any 5xx of the stateful run is a bug, not a full pool."""
    from llamay.native.server.context_store import MAX_CONTEXTS

    server = start_server(stories("q8_0"), n_ctx=256, parallel=MAX_CONTEXTS + 2, queue=64, timeout=60.0)
    yield server
    server.stop()


def test_every_operation_with_every_check(live, schema):
    from schemathesis import GenerationMode

    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 24
    excluded = _excluded()
    for op in operations:
        for mode in MODES:

            @hypothesis.settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
                                 suppress_health_check=list(hypothesis.HealthCheck),
                                 phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate])  # fmt: skip
            @hypothesis.given(case=op.as_strategy(generation_mode=GenerationMode(mode)))
            def run(case) -> None:
                case.call_and_validate(base_url=live.url, timeout=120, excluded_checks=excluded)

            try:
                run()
            except hypothesis.errors.Unsatisfiable:  # nothing to make invalid (e.g. GET with no parameters)
                assert mode == "negative", op.label
    with live.client() as c:
        assert c.get("/health").json()["status"] == "ok"


def test_every_operation_behind_a_key(roomy_keyed):
    """With --api-key: the same checks, `ignored_auth` among them (each request is also sent without the key and
    with a wrong one, and must then be refused), the description itself fetched with the key."""
    from schemathesis import GenerationMode

    live = roomy_keyed
    key = {"Authorization": f"Bearer {live.api_key}"}
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json", headers=key)
    excluded = _excluded()
    for op in (result.ok() for result in schema.get_all_operations()):

        @hypothesis.settings(max_examples=max(2, MAX_EXAMPLES // 4), deadline=None, derandomize=True, database=None,
                             suppress_health_check=list(hypothesis.HealthCheck),
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate])  # fmt: skip
        @hypothesis.given(case=op.as_strategy(generation_mode=GenerationMode.POSITIVE))
        def run(case) -> None:
            case.call_and_validate(base_url=live.url, timeout=120, headers=key, excluded_checks=excluded)

        run()


@pytest.fixture(scope="module")
def roomy_keyed():
    server = start_server(stories("q8_0"), api_key="k3y", n_ctx=128, parallel=2, queue=16, timeout=60.0)
    yield server
    server.stop()


def _reset(live) -> None:
    with live.client() as c:
        for ctx in c.get("/llamay/contexts").json()["data"]:
            c.delete(f"/llamay/contexts/{ctx['name']}")
        listed = c.get("/llamay/snapshots")
        if listed.status_code == 200:
            for snap in listed.json()["data"]:
                c.delete(f"/llamay/snapshots/{snap['snapshot']}")
        else:  # a server without the snapshot routes: its files are the whole state
            for path in live.service.snapshot_dir.glob("*"):
                path.unlink()


def test_stateful_runs_through_the_context_routes(roomy):
    live = roomy
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    paths = schema.raw_schema["paths"]
    links = paths["/llamay/contexts"]["post"]["responses"]["200"]["links"]
    assert {"GetContext", "ForkContext", "SnapshotContext", "ContinueContext", "DeleteContext"} <= set(links)
    snapshot_links = paths["/llamay/contexts/{name}/snapshot"]["post"]["responses"]["200"]["links"]
    assert {"RestoreSnapshot", "GetSnapshot", "DeleteSnapshot"} <= set(snapshot_links)
    from schemathesis.specs.openapi.checks import use_after_free

    # a context deleted and then made again under its name by a restore or a fork (the name in their path or
    # body, which use_after_free does not read as a re-creation) is found by a later GET, as it should be;
    # that a deleted context is gone is tested in test_contexts
    excluded = [*_excluded(), use_after_free]
    from schemathesis.config._phases import InferenceConfig

    schema.config.phases.stateful.inference = InferenceConfig(algorithms=[])  # the description's links only
    base = schema.as_state_machine()

    class Contexts(base):
        def setup(self):
            """Each scenario from a clean server (no contexts, no snapshots): the same draws, the same run."""
            _reset(live)

        def get_call_kwargs(self, case):
            return {"base_url": live.url, "timeout": 120}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, excluded_checks=excluded, transport_kwargs=kwargs or None,
                                   recorder=getattr(self, "recorder", None))  # fmt: skip

    settings = hypothesis.settings(max_examples=STATEFUL_EXAMPLES, stateful_step_count=STATEFUL_STEPS, deadline=None,
                                   derandomize=True, database=None, suppress_health_check=list(hypothesis.HealthCheck),
                                   phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate])  # fmt: skip
    Contexts.run(settings=settings)
    with live.client() as c:
        assert c.get("/health").json()["status"] == "ok"
    ok = {(m, r) for (m, r, status), n in live.service.metrics.requests.items() if status == 200 and n}
    # the routes every run reaches many times; a restore and a snapshot's own routes need a snapshot made earlier
    # in the same scenario, which the draws give some runs only: test_the_links_lead_where_they_say walks them
    routes = ["/llamay/contexts" + r for r in ("", "/{name}", "/{name}/fork", "/{name}/snapshot",
                                               "/{name}/completions")]  # fmt: skip
    for route in routes:
        assert any(r == route for _m, r in ok), route  # the links were followed


def _follow(link: dict, answer: dict) -> tuple[dict, dict]:
    """A link's parameters and request body, its runtime expressions (`$response.body#/field`) read from the
    answer it follows."""

    def value(expr: str):
        prefix = "$response.body#/"
        assert expr.startswith(prefix), expr
        return answer[expr.removeprefix(prefix)]

    return ({k: value(v) for k, v in link.get("parameters", {}).items()},
            {k: value(v) for k, v in link.get("requestBody", {}).items()})  # fmt: skip


def test_the_links_lead_where_they_say(roomy):
    """Each link of the description, followed from a real answer with its own expressions, reaches its
    operation and gets a 200: create -> snapshot -> restore, get snapshot, continue, fork, delete."""
    live = roomy
    _reset(live)
    with live.client(timeout=120) as c:
        doc = c.get("/openapi.json").json()
        by_id = {op["operationId"]: (path, method) for path, ops in doc["paths"].items() for method, op in ops.items()}

        def call(link: dict, answer: dict, body: dict | None = None) -> dict:
            params, fields = _follow(link, answer)
            path, method = by_id[link["operationId"]]
            r = c.request(method.upper(), path.format(**params), json={**(body or {}), **fields} or None)
            assert r.status_code == 200, (link["operationId"], r.text)
            return r.json()

        created = c.post("/llamay/contexts", json={"name": "walk", "prompt": "Once upon a time"}).json()
        context_links = doc["paths"]["/llamay/contexts"]["post"]["responses"]["200"]["links"]
        snap = call(context_links["SnapshotContext"], created)
        snapshot_links = doc["paths"]["/llamay/contexts/{name}/snapshot"]["post"]["responses"]["200"]["links"]
        assert call(snapshot_links["GetSnapshot"], snap)["snapshot"] == snap["snapshot"]
        restored = call(snapshot_links["RestoreSnapshot"], snap)
        assert restored["n_tokens"] == created["n_tokens"]
        call(context_links["ContinueContext"], restored, {"prompt": " there", "max_tokens": 2})
        forked = call(context_links["ForkContext"], created, {"name": "walk-fork"})
        call(context_links["GetContext"], forked)
        call(context_links["DeleteContext"], forked)
        call(snapshot_links["DeleteSnapshot"], snap)
        call(context_links["DeleteContext"], created)
    _reset(live)
