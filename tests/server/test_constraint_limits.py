"""Issue 13's hostile schemas, end to end through the server: each is a 400 naming the constraint limit it passes
(or, where it is within the limits, a normal answer), and the server goes on serving. Before the limits, a
minLength of 1e9 grew the server past 20 GB, a maxLength of 1e6 took 30 s to compile and a 600-deep schema was a
500 (RecursionError). The client's timeout is a hang guard, not a speed goal: compile work is bounded by the
limits' counters (tests/constraints/test_limits.py), and refusals come before the work they refuse."""

from __future__ import annotations

import json

import pytest

from tests.server.conftest import STORIES_ID

pytestmark = pytest.mark.native_only

CHAT = "/v1/chat/completions"
MSG = [{"role": "user", "content": "hi"}]
GUARD = 20.0  # seconds: far above what a bounded compile takes, far below an unbounded one


def nested(depth: int) -> str:
    """A schema of `depth` nested arrays, as JSON text: one JSON level a schema level, so that a schema beyond the
    constraint's max_nesting stays within the body's own nesting limit (the server's JSON reader refuses 128)."""
    return '{"type":"array","items":' * depth + '{"type":"string"}' + "}" * depth


def post(client, schema_text: str, route: str = "openai", max_tokens: int = 8):
    """The request with the schema's text spliced in where SCHEMA stands (the body is sent as written)."""
    if route == "openai":
        fmt = {"type": "json_schema", "json_schema": {"name": "t", "schema": "SCHEMA"}}
        path, body = CHAT, {"model": STORIES_ID, "messages": MSG, "max_tokens": max_tokens, "response_format": fmt}
    else:
        opts = {"num_predict": max_tokens}
        path, body = "/api/generate", {"model": STORIES_ID, "prompt": "x", "stream": False, "options": opts,
                                       "format": "SCHEMA"}  # fmt: skip
    text = json.dumps(body).replace('"SCHEMA"', schema_text)
    return client.post(path, content=text, headers={"content-type": "application/json"}, timeout=GUARD)


def limit_refusal(r) -> str:
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    if r.request.url.path.startswith("/api/"):  # Ollama's error shape: the message alone, naming its field
        assert isinstance(err, str) and err.startswith("format: "), err
        return err
    assert err["param"] == "response_format", err
    return err["message"]


@pytest.fixture(autouse=True)
def still_healthy(client):
    yield
    r = client.get("/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"


@pytest.mark.parametrize("route", ["openai", "ollama"])
def test_min_length_beyond_max_repeat_is_refused_by_name(client, route):
    message = limit_refusal(post(client, '{"type":"string","minLength":1000000000}', route))
    assert "max_repeat=1000000" in message and "#/minLength" in message and "1000000000" in message


@pytest.mark.parametrize("route", ["openai", "ollama"])
def test_schema_nesting_beyond_max_nesting_is_refused_by_name(client, route):
    message = limit_refusal(post(client, nested(100), route))
    assert "max_nesting=64" in message


def test_600_deep_schema_is_a_400_not_a_500(client):
    r = post(client, '{"type":"array","items":' * 600 + "{}" + "}" * 600)  # JSON 600 deep: json.loads reads it
    assert r.status_code == 400, r.text  # a limit on the body's nesting or the schema's: either names it
    assert "nest" in r.json()["error"]["message"]


def test_max_length_of_a_million_compiles_and_generates_within_it(client):
    r = post(client, '{"type":"string","maxLength":1000000}', max_tokens=12)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    text = choice["message"]["content"]
    if choice["finish_reason"] == "length":  # cut inside one JSON string, or one whole and white space after it
        assert text.startswith('"')
        try:
            value = json.loads(text)
        except ValueError:  # cut inside the string: no raw control character in it
            assert all(ord(c) >= 0x20 for c in text)
        else:
            assert isinstance(value, str)
    else:
        assert isinstance(json.loads(text), str)


UNSUPPORTED = {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}, "required": ["a"]}  # (no base)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (CHAT, {"model": STORIES_ID, "messages": MSG, "max_tokens": 2,
                "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": UNSUPPORTED}}},
         "response_format"),
        ("/v1/responses", {"model": STORIES_ID, "input": "hi", "max_output_tokens": 2,
                           "text": {"format": {"type": "json_schema", "name": "t", "schema": UNSUPPORTED}}},
         "text.format"),
        ("/completion", {"prompt": "hi", "n_predict": 2, "json_schema": UNSUPPORTED}, "json_schema"),
        ("/api/chat", {"model": STORIES_ID, "messages": MSG, "stream": False, "format": UNSUPPORTED}, "format"),
    ],
    ids=["openai", "responses", "llamacpp", "ollama"],
)  # fmt: skip
def test_a_schema_refused_names_the_field_as_each_api_spells_it(client, path, body, field):
    """A schema the compiler refuses is a 400 naming the request's own field: not `response_format` on the
    routes that call it `text.format`, `json_schema` or `format`."""
    r = client.post(path, json=body, timeout=GUARD)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    if path.startswith("/api/"):
        assert err.startswith(f"{field}: "), err
    else:
        assert err["param"] == field and err["message"].startswith(f"{field}: "), err
        assert err["code"] == "invalid_response_format", err
