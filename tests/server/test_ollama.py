"""The Ollama routes over loopback: NDJSON streaming (the default), final statistics, embed, model listing."""

from __future__ import annotations

import json
import math

import pytest

from tests.server.conftest import STORIES_ID

pytestmark = pytest.mark.native_only

FINAL_FIELDS = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count",
                "eval_duration")  # fmt: skip


def ndjson(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_generate_streams_ndjson_with_a_final_object(client):
    r = client.post("/api/generate", json={"model": STORIES_ID, "prompt": "Once upon a time", "raw": True,
                                           "options": {"num_predict": 12, "temperature": 0}})  # fmt: skip
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/x-ndjson")
    lines = ndjson(r.text)
    assert all(not x["done"] for x in lines[:-1]) and lines[-1]["done"]
    text = "".join(x["response"] for x in lines)
    assert text.startswith(", there was a little girl named Lily")
    final = lines[-1]
    for key in FINAL_FIELDS:
        assert isinstance(final[key], int) and final[key] >= 0, key
    assert final["eval_count"] == 12 and final["done_reason"] == "length"
    assert final["total_duration"] >= final["eval_duration"]
    assert final["model"] == STORIES_ID and final["created_at"].endswith("Z")


def test_generate_non_stream_and_context_continuation(client):
    body = {"model": STORIES_ID, "prompt": "Once upon a time", "raw": True, "stream": False,
            "options": {"num_predict": 8, "temperature": 0}}  # fmt: skip
    first = client.post("/api/generate", json=body).json()
    assert first["done"] and first["response"].startswith(", there was")
    follow = {"model": STORIES_ID, "prompt": "", "context": first["context"], "stream": False,
              "options": {"num_predict": 8, "temperature": 0}}  # fmt: skip
    more = client.post("/api/generate", json=follow)
    whole = client.post("/api/generate", json={**body, "options": {"num_predict": 16, "temperature": 0}}).json()
    assert more.status_code == 200
    cont = more.json()
    assert first["response"] + cont["response"] == whole["response"]
    assert cont["prompt_eval_count"] < len(first["context"])  # the earlier reply came from the prefix cache


def test_generate_with_the_template_and_stop(client):
    r = client.post("/api/generate", json={"model": f"{STORIES_ID}:latest", "prompt": "hi", "stream": False,
                                           "options": {"num_predict": 30, "stop": ["."], "seed": 3}})  # fmt: skip
    body = r.json()
    assert r.status_code == 200 and "." not in body["response"]


def test_bodies_are_json_when_labelled_so_or_unlabelled(client):
    """Ollama's clients (its Python client, its CLI) send `application/json`; a body with no label is read as JSON
    (non-browser clients), and so is one labelled as a form (what `curl -d` sends: Ollama reads it as JSON); one
    labelled as text or multipart (what a web page can send without a CORS preflight) is refused, naming its
    type."""
    body = b'{"model": "stories260K-f32", "prompt": "Once", "stream": false, "options": {"num_predict": 2}}'
    for kind in (
        "application/json",
        "application/json; charset=utf-8",
        "application/vnd.x+json",
        None,
        "application/x-www-form-urlencoded",
    ):
        headers = {"content-type": kind} if kind else {}
        r = client.post("/api/generate", content=body, headers=headers)
        assert r.status_code == 200 and r.json()["done"], (kind, r.text)
    for kind in ("text/plain", "multipart/form-data; boundary=x"):
        r = client.post("/api/generate", content=body, headers={"content-type": kind})
        assert r.status_code == 415, r.text
        assert kind in r.json()["error"]  # Ollama's error shape


def test_empty_generate_loads(client):
    r = client.post("/api/generate", json={"model": STORIES_ID})
    assert r.json()["done"] and r.json()["done_reason"] == "load"


def test_chat_stream_and_not(client):
    msgs = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "A story please."}]
    opts = {"num_predict": 10, "temperature": 0}
    whole = client.post("/api/chat", json={"model": STORIES_ID, "messages": msgs, "stream": False,
                                           "options": opts}).json()  # fmt: skip
    assert whole["message"]["role"] == "assistant" and whole["done"]
    lines = ndjson(client.post("/api/chat", json={"model": STORIES_ID, "messages": msgs, "options": opts}).text)
    assert "".join(x["message"]["content"] for x in lines) == whole["message"]["content"]
    for key in FINAL_FIELDS:
        assert key in lines[-1]


def test_embed(client):
    r = client.post("/api/embed", json={"model": "all-MiniLM-L6-v2-f16", "input": ["a cat", "a dog"]})
    body = r.json()
    assert r.status_code == 200 and len(body["embeddings"]) == 2
    assert math.isclose(sum(x * x for x in body["embeddings"][1]), 1.0, rel_tol=1e-3)
    assert body["prompt_eval_count"] > 0
    err = client.post("/api/embed", json={"model": STORIES_ID, "input": "x"})
    assert err.status_code == 400 and "pooling" in err.json()["error"]


def test_tags_show_ps_version(client):
    tags = client.get("/api/tags").json()["models"]
    assert [m["name"] for m in tags] == [f"{STORIES_ID}:latest", "all-MiniLM-L6-v2-f16:latest"]
    assert tags[0]["details"]["family"] == "llama" and tags[0]["details"]["format"] == "gguf"
    assert tags[0]["size"] > 0
    show = client.post("/api/show", json={"model": STORIES_ID}).json()
    assert show["model_info"]["general.architecture"] == "llama"
    assert "completion" in show["capabilities"]
    old_spelling = client.post("/api/show", json={"name": STORIES_ID})
    assert old_spelling.status_code == 200
    ps = client.get("/api/ps").json()["models"]
    assert ps[0]["name"] == f"{STORIES_ID}:latest"
    assert client.get("/api/version").json()["version"]


# -- the official client ----------------------------------------------------------------------------------------


def ollama_client(server):
    ollama = pytest.importorskip("ollama")
    return ollama, ollama.Client(host=server.url, timeout=120)


def test_the_ollama_client_generates_and_chats(server):
    _, c = ollama_client(server)
    opts = {"num_predict": 6, "temperature": 0}
    r = c.generate(model=STORIES_ID, prompt="Once upon a time", options=opts)
    assert r.done and r.eval_count == 6 and r.response
    chat = c.chat(model=STORIES_ID, messages=[{"role": "user", "content": "A story"}], options=opts)
    assert chat.message.role == "assistant" and chat.done
    streamed = "".join(
        p.message.content or ""
        for p in c.chat(model=STORIES_ID, stream=True, options=opts, messages=[{"role": "user", "content": "A story"}])
    )
    assert streamed == chat.message.content


def test_errors_have_ollamas_shape_and_its_client_shows_the_message(server, client):
    """Ollama answers `{"error": "message"}`; its client raises ResponseError with that string as `.error` (an
    OpenAI-style object there came out as a dict's repr)."""
    ollama, c = ollama_client(server)
    msg = [{"role": "user", "content": "hi"}]
    cases = [  # (call, status, what the message must say)
        (lambda: c.chat(model=STORIES_ID, messages=msg, options={"bogus_option": 1}), 400, "options.bogus_option"),
        (lambda: c.chat(model=STORIES_ID, messages=msg, options={"top_p": 2}), 400, "options.top_p"),
        (lambda: c.generate(model=STORIES_ID, prompt="x", options={"num_predict": 5000}), 400, "num_predict is 5000"),
        (lambda: c.embed(model=STORIES_ID, input="x"), 400, "no embeddings"),
        (lambda: c.show("nothing"), 404, "'nothing' does not exist"),
    ]
    for call, status, says in cases:
        with pytest.raises(ollama.ResponseError) as info:
            call()
        e = info.value
        assert e.status_code == status and isinstance(e.error, str) and says in e.error, (status, says, e.error)
    # the same shape from the guard (before any route) and for routes that do not exist, on /api/ only
    r = client.post("/api/chat", content=b"{}", headers={"content-type": "text/plain"})
    assert r.status_code == 415 and isinstance(r.json()["error"], str) and "text/plain" in r.json()["error"]
    r = client.post("/api/chat", content=b"{oops", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"].startswith("the body is not valid JSON")
    assert isinstance(client.get("/api/nothing").json()["error"], str)
    assert client.get("/v1/nothing").json()["error"]["type"] == "not_found_error"


def test_ollama_routes_describe_ollamas_error_shape(client):
    doc = client.get("/openapi.json").json()
    ref = doc["paths"]["/api/chat"]["post"]["responses"]["400"]["content"]["application/json"]["schema"]["$ref"]
    assert doc["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"]["error"]["type"] == "string"
    ref = doc["paths"]["/v1/completions"]["post"]["responses"]["400"]["content"]["application/json"]["schema"]
    assert ref["$ref"].endswith("/ErrorResponse")


def test_older_embeddings_route_gives_the_vector_of_embed(server, client):
    """/api/embeddings (`prompt` → `embedding`) runs the same machinery as /api/embed: the same vector."""
    minilm = "all-MiniLM-L6-v2-f16"
    want = client.post("/api/embed", json={"model": minilm, "input": "a cat"}).json()["embeddings"][0]
    r = client.post("/api/embeddings", json={"model": minilm, "prompt": "a cat"})
    assert r.status_code == 200 and set(r.json()) == {"embedding"} and r.json()["embedding"] == want
    assert client.post("/api/embeddings", json={"model": minilm, "prompt": ""}).json() == {"embedding": []}
    ollama, c = ollama_client(server)
    assert c.embeddings(model=minilm, prompt="a cat").embedding == pytest.approx(want)
    assert c.embeddings(model="nomic-embed-text", prompt="a cat").embedding == pytest.approx(want)  # any name
    for prompt in ("x", ""):
        with pytest.raises(ollama.ResponseError) as info:
            c.embeddings(model=STORIES_ID, prompt=prompt)
        assert info.value.status_code == 400 and f"{STORIES_ID} is a generative model" in info.value.error
    r = client.post("/api/embeddings", json={"model": minilm})
    assert r.status_code == 400 and r.json()["error"].startswith("prompt")


def test_a_served_file_whose_name_is_gone_is_still_listed_and_served(tmp_path):
    """`llamay rm` and `prune` may take the served model's file away (its memory mapping stays): the routes that
    describe it answer from what was read at load, not from the file system."""
    import shutil

    from tests.paths import stories
    from tests.server.conftest import start_server

    path = tmp_path / "gone.gguf"
    shutil.copyfile(stories("f32"), path)
    live = start_server(path, n_ctx=128, parallel=1, queue=4)
    try:
        path.unlink()
        with live.client() as c:
            for r in (c.get("/api/tags"), c.get("/api/ps"), c.post("/api/show", json={"model": "gone"})):
                assert r.status_code == 200, r.text
            assert c.get("/api/tags").json()["models"][0]["modified_at"].endswith("Z")
            r = c.post("/api/generate", json={"model": "gone", "prompt": "Once", "stream": False,
                                              "options": {"num_predict": 3}})  # fmt: skip
            assert r.status_code == 200 and r.json()["eval_count"] == 3, r.text
    finally:
        live.stop()


def test_logprobs_on_ollamas_routes_are_the_completions_ones(server, client):
    """`logprobs` + `top_logprobs` on /api/generate (whole and streamed) and /api/chat: each generated token's
    log-probability, the same the OpenAI completions route gives for the same tokens."""
    ollama = pytest.importorskip("ollama")
    c = ollama.Client(host=server.url)
    opts = {"num_predict": 6, "temperature": 0}
    r = c.generate(model=STORIES_ID, prompt="Once upon a time", raw=True, options=opts, logprobs=True, top_logprobs=2)
    oa = client.post("/v1/completions", json={"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 6,
                                              "temperature": 0, "logprobs": 2}).json()  # fmt: skip
    want = oa["choices"][0]["logprobs"]
    assert [x.token for x in r.logprobs] == want["tokens"]
    assert [x.logprob for x in r.logprobs] == pytest.approx(want["token_logprobs"])
    assert all(len(x.top_logprobs) == 2 and x.top_logprobs[0].logprob >= x.top_logprobs[1].logprob for x in r.logprobs)
    streamed = [lp for part in c.generate(model=STORIES_ID, prompt="Once upon a time", raw=True, options=opts,
                                          logprobs=True, stream=True) for lp in (part.logprobs or [])]  # fmt: skip
    assert [x.token for x in streamed] == want["tokens"]
    chat = c.chat(model=STORIES_ID, messages=[{"role": "user", "content": "Once"}], options=opts, logprobs=True)
    assert len(chat.logprobs) == chat.eval_count
    r = client.post("/api/chat", json={"model": STORIES_ID, "messages": [{"role": "user", "content": "x"}],
                                       "stream": False, "top_logprobs": 2})  # fmt: skip
    assert r.status_code == 400 and r.json()["error"].startswith("top_logprobs needs logprobs")
