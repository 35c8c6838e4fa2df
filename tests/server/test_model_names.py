"""Model names (Service.resolve): any name, or none, is the served model of the route's kind, as llama-server
answers for its one model (what the OpenAI SDK's users send: `gpt-3.5-turbo-instruct`, `text-embedding-3-small`),
and the reply names the served model; a served model's name on a route of the other kind is a 400; with
--strict-model-name, today's refusals (404 for an unknown name, 400 for none)."""

from __future__ import annotations

import pytest

from tests.paths import MINILM, stories
from tests.server.conftest import STORIES_ID, start_server

pytestmark = pytest.mark.native_only

MINILM_ID = "all-MiniLM-L6-v2-f16"
MSG = [{"role": "user", "content": "A story"}]
GREEDY = {"max_tokens": 8, "temperature": 0}
NAMED_ROUTES = [  # (path, body without a model, the model the reply names)
    ("/v1/chat/completions", {"messages": MSG, **GREEDY}, STORIES_ID),
    ("/v1/completions", {"prompt": "Once upon a time", **GREEDY}, STORIES_ID),
    ("/chat/completions", {"messages": MSG, **GREEDY}, STORIES_ID),
    ("/v1/embeddings", {"input": "a cat"}, MINILM_ID),
]


@pytest.fixture(scope="module")
def strict():
    live = start_server(stories("f32"), n_ctx=128, parallel=2, queue=8, embedding_model=MINILM, strict_names=True)
    yield live
    live.stop()


def test_any_name_or_none_is_the_served_model(server, client):
    oa = server.openai()
    want = oa.completions.create(model=STORIES_ID, prompt="Once upon a time", **GREEDY)
    got = oa.completions.create(model="gpt-3.5-turbo-instruct", prompt="Once upon a time", **GREEDY)
    assert got.model == STORIES_ID and got.choices[0].text == want.choices[0].text
    chat = oa.chat.completions.create(model="gpt-4o", messages=MSG, **GREEDY)
    assert chat.model == STORIES_ID
    vec = oa.embeddings.create(model="text-embedding-3-small", input="a cat")
    assert vec.model == MINILM_ID
    assert vec.data[0].embedding == oa.embeddings.create(model=MINILM_ID, input="a cat").data[0].embedding
    for path, body, model in NAMED_ROUTES:
        named = client.post(path, json={**body, "model": model}).json()
        r = client.post(path, json=body)  # no model at all
        assert r.status_code == 200 and r.json()["model"] == model, (path, r.text)
        if "choices" in named:
            assert r.json()["choices"] == named["choices"]
    for path, body in [
        ("/api/generate", {"prompt": "Once", "stream": False}),
        ("/api/chat", {"messages": MSG, "stream": False}),
    ]:
        r = client.post(path, json={**body, "model": "llama3.2", "options": {"num_predict": 3}})
        assert r.status_code == 200 and r.json()["model"] == STORIES_ID, r.text
    assert client.post("/tokenize", json={"content": "Once", "model": "gpt-4o"}).status_code == 200


def test_a_served_name_of_the_other_kind_is_refused(client):
    r = client.post("/v1/chat/completions", json={"model": MINILM_ID, "messages": MSG})
    assert r.status_code == 400 and r.json()["error"]["code"] == "wrong_model"
    r = client.post("/v1/embeddings", json={"model": STORIES_ID, "input": "x"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "model_not_embedding"
    assert MINILM_ID in r.json()["error"]["message"]  # says which model serves embeddings


def test_without_an_embedding_model_any_name_is_unknown_and_says_how_to_serve_one(slow_server):
    with slow_server.client() as c:
        r = c.post("/v1/embeddings", json={"model": "text-embedding-3-small", "input": "x"})
        assert r.status_code == 404 and "--embedding-model" in r.json()["error"]["message"]
        assert r.json()["error"]["code"] == "model_not_found"
        r = c.post("/api/embeddings", json={"model": "nomic-embed-text", "prompt": "x"})
        assert r.status_code == 404 and "--embedding-model" in r.json()["error"]
        r = c.post("/v1/embeddings", json={"model": STORIES_ID, "input": "x"})  # the generative one: a 400
        assert r.status_code == 400 and r.json()["error"]["code"] == "model_not_embedding"


def test_the_description_admits_any_name_but_the_other_kinds(server, client):
    props = client.get("/openapi.json").json()["components"]["schemas"]
    for schema, other in [("ChatCompletionRequest", MINILM_ID), ("EmbeddingRequest", STORIES_ID)]:
        assert "model" not in props[schema].get("required", [])
        (string,) = [v for v in props[schema]["properties"]["model"]["anyOf"] if v.get("type") == "string"]
        assert "enum" not in string and other in string["not"]["enum"]
    assert "enum" in props["OllamaShowRequest"]["properties"]["model"]  # a lookup names a model exactly


def test_strict_model_names_refuse_unknown_and_missing_names(strict):
    ollama = pytest.importorskip("ollama")
    with strict.client() as c:
        for path, body, _ in NAMED_ROUTES:
            r = c.post(path, json={**body, "model": "gpt-4o"})
            assert r.status_code == 404, r.text
            err = r.json()["error"]
            assert err["code"] == "model_not_found" and err["param"] == "model" and "'gpt-4o'" in err["message"]
            r = c.post(path, json=body)
            assert r.status_code == 400 and r.json()["error"]["param"] == "model", r.text
            assert "--strict-model-name" in r.json()["error"]["message"] or "required" in r.json()["error"]["message"]
        r = c.post("/api/generate", json={"model": "llama3", "prompt": "x"})
        assert r.status_code == 404 and "'llama3' does not exist" in r.json()["error"]
        props = c.get("/openapi.json").json()["components"]["schemas"]
        assert "model" in props["ChatCompletionRequest"]["required"]
        (string,) = [v for v in props["ChatCompletionRequest"]["properties"]["model"]["anyOf"] if v.get("type")
                     == "string"]  # fmt: skip
        assert STORIES_ID in string["enum"] and MINILM_ID not in string["enum"]
    client = ollama.Client(host=strict.url, timeout=120)
    for call in (lambda: client.chat(model="llama3.2", messages=MSG),
                 lambda: next(iter(client.generate(model="llama3.2", prompt="x", stream=True))),
                 lambda: client.embeddings(model="nomic-embed-text", prompt="x")):  # fmt: skip
        with pytest.raises(ollama.ResponseError) as info:
            call()
        assert info.value.status_code == 404 and "does not exist" in info.value.error
    openai = pytest.importorskip("openai")
    with pytest.raises(openai.NotFoundError):
        strict.openai().completions.create(model="gpt-3.5-turbo-instruct", prompt="x", max_tokens=2)
