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
    (non-browser clients); one labelled as a form or text (what `curl -d` sends, and what a web page can send
    without a CORS preflight) is refused, naming its type."""
    body = b'{"model": "stories260K-f32", "prompt": "Once", "stream": false, "options": {"num_predict": 2}}'
    for kind in ("application/json", "application/json; charset=utf-8", "application/vnd.x+json", None):
        headers = {"content-type": kind} if kind else {}
        r = client.post("/api/generate", content=body, headers=headers)
        assert r.status_code == 200 and r.json()["done"], (kind, r.text)
    for kind in ("application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x"):
        r = client.post("/api/generate", content=body, headers={"content-type": kind})
        assert r.status_code == 415, r.text
        err = r.json()["error"]
        assert err["code"] == "unsupported_media_type" and kind in err["message"]


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
    assert err.status_code == 400 and "pooling" in err.json()["error"]["message"]


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
