"""Bad input gets an OpenAI-style error body with the right status, and the server keeps serving."""

from __future__ import annotations

import pytest

from tests.paths import stories
from tests.server.conftest import STORIES_ID, start_server

pytestmark = pytest.mark.native_only

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MSG = [{"role": "user", "content": "hi"}]


def error_of(r, status: int) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    return err


@pytest.fixture(autouse=True)
def still_healthy(client):
    yield
    r = client.get("/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS, "/api/generate", "/api/chat", "/v1/embeddings", "/tokenize"])
@pytest.mark.parametrize("raw", [b"{not json", b"", b"[1, 2", b"\xff\xfe"])
def test_malformed_json(client, path, raw):
    err = error_of(client.post(path, content=raw, headers={"content-type": "application/json"}), 400)
    assert err["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": STORIES_ID, "messages": "hi"}, "messages"),
        ({"model": STORIES_ID, "messages": []}, "messages"),
        ({"model": STORIES_ID, "messages": [{"role": "wizard", "content": "x"}]}, "messages.0.role"),
        ({"model": STORIES_ID, "messages": MSG, "temperature": "hot"}, "temperature"),
        ({"model": STORIES_ID, "messages": MSG, "temperature": 9}, "temperature"),
        ({"model": STORIES_ID, "messages": MSG, "max_tokens": -1}, "max_tokens"),
        ({"model": STORIES_ID, "messages": MSG, "top_p": 1.5}, "top_p"),
        ({"model": STORIES_ID, "messages": MSG, "stream": "yes please"}, "stream"),
        ({"model": 7, "messages": MSG}, "model"),
        ({"messages": MSG}, "model"),
    ],
)
def test_wrong_types_and_ranges(client, body, param):
    err = error_of(client.post(CHAT, json=body), 400)
    assert err["param"] == param


def test_unknown_model(client):
    for path, body in [
        (CHAT, {"model": "gpt-4o", "messages": MSG}),
        (COMPLETIONS, {"model": "gpt-4o", "prompt": "x"}),
        ("/api/generate", {"model": "llama3", "prompt": "x"}),
        ("/v1/embeddings", {"model": "text-embedding-3-small", "input": "x"}),
        ("/api/show", {"model": "nothing"}),
    ]:
        err = error_of(client.post(path, json=body), 404)
        assert err["code"] == "model_not_found" and err["param"] == "model"
    error_of(client.get("/v1/models/gpt-4o"), 404)


def test_prompt_longer_than_the_context(client):
    long_prompt = "Once upon a time " * 300  # far more than the 512-token context
    for path, body in [
        (COMPLETIONS, {"model": STORIES_ID, "prompt": long_prompt}),
        (CHAT, {"model": STORIES_ID, "messages": [{"role": "user", "content": long_prompt}]}),
        ("/api/generate", {"model": STORIES_ID, "prompt": long_prompt, "stream": False}),
        ("/api/chat", {"model": STORIES_ID, "messages": [{"role": "user", "content": long_prompt}]}),
    ]:
        err = error_of(client.post(path, json=body), 400)
        assert err["code"] == "context_length_exceeded"
        assert "512" in err["message"]


def test_absurd_max_tokens_and_n(client):
    err = error_of(client.post(COMPLETIONS, json={"model": STORIES_ID, "prompt": "x", "max_tokens": 10**9}), 400)
    assert err["param"] == "max_tokens"
    err = error_of(client.post(COMPLETIONS, json={"model": STORIES_ID, "prompt": "x", "max_tokens": 5000}), 400)
    assert err["param"] == "max_tokens" and "context" in err["message"]
    err = error_of(client.post(CHAT, json={"model": STORIES_ID, "messages": MSG, "max_completion_tokens": 100000}), 400)
    assert err["param"] == "max_completion_tokens"
    err = error_of(client.post(CHAT, json={"model": STORIES_ID, "messages": MSG, "n": 1000}), 400)
    assert err["param"] == "n"
    err = error_of(client.post(CHAT, json={"model": STORIES_ID, "messages": MSG, "n": 0}), 400)
    assert err["param"] == "n"
    err = error_of(client.post("/api/generate", json={"model": STORIES_ID, "prompt": "x",
                                                      "options": {"num_predict": 10**8}}), 400)  # fmt: skip


def test_other_bad_values(client):
    cases = [
        (COMPLETIONS, {"model": STORIES_ID, "prompt": [99999]}, "prompt"),
        (COMPLETIONS, {"model": STORIES_ID, "prompt": []}, "prompt"),
        (COMPLETIONS, {"model": STORIES_ID, "prompt": "x", "logit_bias": {"abc": 1}}, "logit_bias"),
        (COMPLETIONS, {"model": STORIES_ID, "prompt": "x", "logit_bias": {"99999": 1}}, "logit_bias"),
        (COMPLETIONS, {"model": STORIES_ID, "prompt": "x", "stop": ["a"] * 40}, "stop"),
        (COMPLETIONS, {"model": STORIES_ID, "prompt": "x", "suffix": "y"}, "suffix"),
        (
            CHAT,
            {"model": STORIES_ID, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages.0.content.str",
        ),
        ("/detokenize", {"tokens": [10**6]}, "tokens"),
        ("/v1/embeddings", {"model": "all-MiniLM-L6-v2-f16", "input": [1, 2, 3]}, "input"),
        ("/v1/embeddings", {"model": "all-MiniLM-L6-v2-f16", "input": "x", "dimensions": 7}, "dimensions"),
        ("/api/generate", {"model": STORIES_ID, "prompt": "x", "format": "yaml"}, "format"),
    ]
    for path, body, param in cases:
        err = error_of(client.post(path, json=body), 400)
        assert err["param"] == param, (path, body, err)


def test_not_found_and_wrong_method(client):
    error_of(client.get("/v1/nothing"), 404)
    err = error_of(client.get(COMPLETIONS), 405)
    assert err["type"] == "invalid_request_error"


def test_sampling_parameters_the_sampler_lacks_are_refused_or_used(client):
    """Penalties and logit_bias: used when the sampler has them, else a clear 400 (never silently ignored);
    their neutral values are always accepted."""
    from llamay.native.server.params import _config_fields

    fields = _config_fields()
    neutral = {"model": STORIES_ID, "prompt": "x", "max_tokens": 2, "presence_penalty": 0, "frequency_penalty": 0,
               "logit_bias": {}}  # fmt: skip
    assert client.post(COMPLETIONS, json=neutral).status_code == 200
    for name, value in [("presence_penalty", 0.5), ("frequency_penalty", 0.5), ("logit_bias", {"5": 3})]:
        r = client.post(COMPLETIONS, json={"model": STORIES_ID, "prompt": "x", "max_tokens": 2, name: value})
        if name in fields:
            assert r.status_code == 200, r.text
        else:
            assert error_of(r, 400)["code"] == "unsupported_parameter"


def test_api_key():
    live = start_server(stories("q8_0"), api_key="sekret", n_ctx=128, parallel=1, queue=2)
    try:
        import httpx

        with httpx.Client(base_url=live.url, timeout=60) as anon:
            assert anon.get("/health").status_code == 200
            err = error_of(anon.get("/v1/models"), 401)
            assert err["code"] == "invalid_api_key"
            err = error_of(anon.post(COMPLETIONS, json={"model": "x"}), 401)
            error_of(anon.get("/v1/models", headers={"Authorization": "Bearer wrong"}), 401)
            assert "HTTPBearer" in str(anon.get("/openapi.json").json()["components"]["securitySchemes"])
        with live.client() as ok:
            assert ok.get("/v1/models").status_code == 200
            for _ in range(2):  # one sequence (--parallel 1), used again and again
                r = ok.post(COMPLETIONS, json={"model": "stories260K-q8_0", "prompt": "Once", "max_tokens": 3})
                assert r.status_code == 200, r.text
        oa = live.openai()
        assert oa.models.list().data[0].id == "stories260K-q8_0"
    finally:
        live.stop()
