"""The OpenAI routes over loopback, driven by the `openai` client and plain HTTP."""

from __future__ import annotations

import base64
import json
import math
import struct

import pytest

from tests.server.conftest import STORIES_ID, idle, wait_for

pytestmark = pytest.mark.native_only

LILY = ", there was a little girl named Lily"


def sse_events(text: str) -> list:
    events = []
    for block in text.strip().split("\n\n"):
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def test_models(server):
    oa = server.openai()
    ids = [m.id for m in oa.models.list().data]
    assert ids == [STORIES_ID, "all-MiniLM-L6-v2-f16"]
    assert oa.models.retrieve(STORIES_ID).id == STORIES_ID


def test_completion_greedy_is_the_known_story(server):
    oa = server.openai()
    r = oa.completions.create(model=STORIES_ID, prompt="Once upon a time", max_tokens=12, temperature=0)
    assert r.choices[0].text.startswith(LILY)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 12
    assert r.usage.prompt_tokens == 5
    assert r.usage.model_extra["llamay_cached_prompt_tokens"] == r.usage.prompt_tokens_details.cached_tokens


def test_completion_stream_matches_non_stream(server):
    oa = server.openai()
    whole = oa.completions.create(model=STORIES_ID, prompt="Once upon a time", max_tokens=20, temperature=0)
    parts, finish = [], None
    stream = oa.completions.create(model=STORIES_ID, prompt="Once upon a time", max_tokens=20, temperature=0,
                                   stream=True)  # fmt: skip
    for chunk in stream:
        for c in chunk.choices:
            parts.append(c.text)
            finish = c.finish_reason or finish
    assert "".join(parts) == whole.choices[0].text
    assert finish == "length"


def test_chat_non_stream_and_stream(server):
    oa = server.openai()
    msgs = [{"role": "user", "content": "Tell me a story."}]
    whole = oa.chat.completions.create(model=STORIES_ID, messages=msgs, max_tokens=15, temperature=0)
    assert whole.object == "chat.completion"
    assert whole.choices[0].message.role == "assistant"
    assert whole.choices[0].message.content
    stream = oa.chat.completions.create(model=STORIES_ID, messages=msgs, max_tokens=15, temperature=0, stream=True,
                                        stream_options={"include_usage": True})  # fmt: skip
    text, usage, finish = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text.append(c.delta.content or "")
            finish = c.finish_reason or finish
    assert "".join(text) == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason
    assert usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_sse_wire_format_ends_with_done(client):
    body = {"model": STORIES_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    assert events[-1] == "[DONE]"
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    usage_chunk = events[-2]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 4
    assert "llamay_cached_prompt_tokens" in usage_chunk["usage"]


def test_max_completion_tokens(server):
    oa = server.openai()
    r = oa.chat.completions.create(model=STORIES_ID, messages=[{"role": "user", "content": "hi"}],
                                   max_completion_tokens=3, temperature=0)  # fmt: skip
    assert r.usage.completion_tokens <= 3


def test_n_choices_seeded_and_reproducible(server):
    oa = server.openai()
    kw = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 16, "temperature": 1.0, "seed": 7}
    a = oa.completions.create(n=3, **kw)
    b = oa.completions.create(n=3, **kw)
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.text for c in a.choices] == [c.text for c in b.choices]
    assert len({c.text for c in a.choices}) > 1  # choice i draws with seed + i
    assert a.usage.prompt_tokens == 5 and 3 <= a.usage.completion_tokens <= 48  # the prompt counts once


def test_stop_string_ends_the_choice_and_releases_it(server):
    oa = server.openai()
    r = oa.completions.create(model=STORIES_ID, prompt="Once upon a time", max_tokens=40, temperature=0,
                              stop=["Lily"])  # fmt: skip
    assert r.choices[0].text == ", there was a little girl named "
    assert r.choices[0].finish_reason == "stop"
    wait_for(lambda: idle(server.service), what="the stopped sequence to be released")


def test_stop_string_streaming(server):
    oa = server.openai()
    stream = oa.completions.create(model=STORIES_ID, prompt="Once upon a time", max_tokens=40, temperature=0,
                                   stop=[" girl"], stream=True)  # fmt: skip
    text, finish = "", None
    for chunk in stream:
        for c in chunk.choices:
            text += c.text
            finish = c.finish_reason or finish
    assert text == ", there was a little"
    assert finish == "stop"


def test_logprobs_chat(server):
    oa = server.openai()
    r = oa.chat.completions.create(model=STORIES_ID, messages=[{"role": "user", "content": "hi"}], max_tokens=5,
                                   temperature=0, logprobs=True, top_logprobs=3)  # fmt: skip
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for entry in content:
        assert entry.logprob <= 0.0
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[-1].logprob
        assert math.isclose(entry.logprob, entry.top_logprobs[0].logprob, abs_tol=1e-5)  # greedy: the best one
    assert "".join(e.token for e in content) == r.choices[0].message.content


def test_logprobs_completion(server):
    oa = server.openai()
    r = oa.completions.create(model=STORIES_ID, prompt="Once upon a time", max_tokens=4, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 4
    assert "".join(lp.tokens) == r.choices[0].text
    assert lp.text_offset[0] == 0 and all(len(t) == 2 for t in lp.top_logprobs)


def test_echo_and_token_prompt(server, client):
    oa = server.openai()
    ids = client.post("/tokenize", json={"content": "Once upon a time", "add_special": True}).json()["tokens"]
    by_ids = oa.completions.create(model=STORIES_ID, prompt=ids, max_tokens=6, temperature=0)
    by_text = oa.completions.create(model=STORIES_ID, prompt="Once upon a time", max_tokens=6, temperature=0,
                                    echo=True)  # fmt: skip
    assert by_text.choices[0].text == "Once upon a time" + by_ids.choices[0].text


def test_batch_of_prompts(server):
    oa = server.openai()
    r = oa.completions.create(model=STORIES_ID, prompt=["Once upon a time", "Lily"], max_tokens=5, temperature=0)
    assert [c.index for c in r.choices] == [0, 1]
    assert r.choices[0].text.startswith(", there")


def test_embeddings(server):
    oa = server.openai()
    r = oa.embeddings.create(model="all-MiniLM-L6-v2-f16", input=["a cat", "a dog"])
    assert len(r.data) == 2 and len(r.data[0].embedding) == 384
    assert math.isclose(sum(x * x for x in r.data[0].embedding), 1.0, rel_tol=1e-3)


def test_embeddings_base64_wire(client):
    r = client.post("/v1/embeddings", json={"model": "all-MiniLM-L6-v2-f16", "input": "a cat",
                                            "encoding_format": "base64"})  # fmt: skip
    raw = base64.b64decode(r.json()["data"][0]["embedding"])
    assert len(struct.unpack(f"<{len(raw) // 4}f", raw)) == 384


def test_embeddings_of_a_generative_model_is_a_clear_400(client):
    r = client.post("/v1/embeddings", json={"model": STORIES_ID, "input": "hello"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "model" and "pooling" in err["message"] and "all-MiniLM" in err["message"]


def test_generating_with_the_embedding_model_is_a_400(client):
    r = client.post("/v1/completions", json={"model": "all-MiniLM-L6-v2-f16", "prompt": "hi"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "wrong_model"


SCHEMA = {"type": "object", "properties": {"a": {"type": "boolean"}, "n": {"type": "integer"}}, "required": ["a", "n"],
          "additionalProperties": False}  # fmt: skip


def _constraints_available() -> bool:
    from llamay.native.server.params import _sampler_takes

    try:
        import llamay.constraints  # noqa: F401
    except ImportError:
        return False
    return _sampler_takes("constraint")


@pytest.mark.skipif(not _constraints_available(), reason="this build's sampler has no constraint engine")
def test_response_format_json_schema(server, client):
    oa = server.openai()
    fmt = {"type": "json_schema", "json_schema": {"name": "t", "schema": SCHEMA}}
    for seed in range(2):
        r = oa.chat.completions.create(model=STORIES_ID, messages=[{"role": "user", "content": "json"}],
                                       max_tokens=60, seed=seed, response_format=fmt)  # fmt: skip
        value = json.loads(r.choices[0].message.content)
        assert set(value) == {"a", "n"} and isinstance(value["a"], bool) and isinstance(value["n"], int)
    r = client.post("/api/generate", json={"model": STORIES_ID, "prompt": "x", "format": SCHEMA, "stream": False,
                                           "options": {"num_predict": 60, "seed": 1}})  # fmt: skip
    assert set(json.loads(r.json()["response"])) == {"a", "n"}
    r = client.post("/v1/completions", json={"model": STORIES_ID, "prompt": "x", "max_tokens": 8,
                                             "response_format": {"type": "json_object"}})  # fmt: skip
    assert r.status_code == 200 and r.json()["choices"][0]["text"].lstrip().startswith("{")
    bad = {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "(a)\\1"}}}  # backreference
    r = client.post("/v1/chat/completions", json={"model": STORIES_ID, "messages": [{"role": "user", "content": "x"}],
                                                  "response_format": bad})  # fmt: skip
    assert r.status_code == 400 and r.json()["error"]["param"] == "response_format"
    assert "backreferences" in r.json()["error"]["message"]


# -- without the /v1 prefix -------------------------------------------------------------------------------------

# /completions is llama-server's own route there (tests/server/test_llamacpp_routes.py), as in llama-server
UNPREFIXED = ("/chat/completions", "/models", "/models/{model}", "/embeddings")


def test_routes_without_the_v1_prefix(server):
    """`OpenAI(base_url="http://host:port")` (no /v1, as llama-server allows): every route answers there the same."""
    openai = pytest.importorskip("openai")
    oa = openai.OpenAI(base_url=server.url, api_key="none", max_retries=0, timeout=120)
    v1 = server.openai()
    assert [m.id for m in oa.models.list().data] == [m.id for m in v1.models.list().data]
    assert oa.models.retrieve(STORIES_ID).id == STORIES_ID
    kw = {"model": STORIES_ID, "max_tokens": 8, "temperature": 0}
    msgs = [{"role": "user", "content": "A story"}]
    want = v1.chat.completions.create(messages=msgs, **kw).choices[0].message.content
    assert oa.chat.completions.create(messages=msgs, **kw).choices[0].message.content == want
    streamed = "".join(c.choices[0].delta.content or "" for c in oa.chat.completions.create(messages=msgs,
                                                                                             stream=True, **kw)
                       if c.choices)  # fmt: skip
    assert streamed == want
    vec = oa.embeddings.create(model="all-MiniLM-L6-v2-f16", input="a cat").data[0].embedding
    assert vec == v1.embeddings.create(model="all-MiniLM-L6-v2-f16", input="a cat").data[0].embedding
    with pytest.raises(openai.BadRequestError) as info:  # the same refusals, in the same shape
        oa.chat.completions.create(messages=msgs, model="all-MiniLM-L6-v2-f16")
    assert info.value.body["code"] == "wrong_model"


def test_unprefixed_routes_share_the_handlers_and_are_described_once(server, client):
    from llamay.native.server.openai_routes import router

    routes = {r.path: r for r in router.routes}
    doc = client.get("/openapi.json").json()
    for alias in UNPREFIXED:
        route, canonical = routes[alias], routes[f"/v1{alias}"]
        assert route.endpoint is canonical.endpoint and route.methods == canonical.methods
        assert alias not in doc["paths"]
        (op,) = doc["paths"][f"/v1{alias}"].values()
        assert op["x-aliases"] == [alias] and f"`{alias}`" in op["description"]


def test_max_tokens_0_evaluates_the_prompt_and_generates_nothing(server, client):
    """llama-server's n_predict 0: an empty reply (finish "length", no completion tokens), the prompt evaluated into
    the cache: the same prompt again finds it there."""
    oa = server.openai()
    prompt = "Zero tokens, please: the prompt alone goes into the cache, the reply is empty."
    r = oa.completions.create(model=STORIES_ID, prompt=prompt, max_tokens=0)
    assert r.choices[0].text == "" and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 0 and r.usage.prompt_tokens > 8
    again = client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 1}).json()
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] >= r.usage.prompt_tokens // 2
    chat = oa.chat.completions.create(model=STORIES_ID, messages=[{"role": "user", "content": "hi"}], max_tokens=0)
    assert chat.choices[0].message.content == "" and chat.usage.completion_tokens == 0
    with client.stream(
        "POST",
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0, "stream": True},
    ) as s:
        events = sse_events(s.read().decode())
    assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] == "length"
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1]) == ""
    r = client.post("/v1/completions", json={"prompt": "x", "max_tokens": -1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens"


def test_token_id_inputs(server, client):
    """Token ids where the OpenAI API allows them: a completion's prompt (ids, or a batch of id lists: the same
    text as the prompt they tokenize) and an embedding's input (the embedding model's ids: the vector of the text
    they tokenize); an id outside the vocabulary is a 400 naming it."""
    oa = server.openai()
    text = "Once upon a time"
    ids = client.post("/tokenize", json={"content": text, "add_special": True}).json()["tokens"]
    want = oa.completions.create(model=STORIES_ID, prompt=text, max_tokens=6, temperature=0).choices[0].text
    r = oa.completions.create(model=STORIES_ID, prompt=ids, max_tokens=6, temperature=0)
    assert r.choices[0].text == want and r.usage.prompt_tokens == len(ids)
    r = oa.completions.create(model=STORIES_ID, prompt=[ids, ids[:2]], max_tokens=6, temperature=0)
    assert r.choices[0].text == want and len(r.choices) == 2
    bad = client.post("/v1/completions", json={"prompt": [ids, [*ids, 512]], "max_tokens": 2})
    assert bad.status_code == 400 and "token id 512" in bad.json()["error"]["message"]
    minilm = "all-MiniLM-L6-v2-f16"
    tok = server.service.embed_engine.tokenizer  # the embedding model's own ids ([CLS] ... [SEP])
    vec = oa.embeddings.create(model=minilm, input="a cat").data[0].embedding
    e_ids = tok.encode("a cat")
    assert oa.embeddings.create(model=minilm, input=e_ids).data[0].embedding == pytest.approx(vec, abs=1e-6)
    both = oa.embeddings.create(model=minilm, input=[e_ids, tok.encode("a dog")])
    assert both.data[0].embedding == pytest.approx(vec, abs=1e-6) and both.usage.prompt_tokens > len(e_ids)
    n_vocab = tok.n_vocab
    bad = client.post("/v1/embeddings", json={"model": minilm, "input": [[5], [7, n_vocab]]})
    err = bad.json()["error"]
    assert bad.status_code == 400 and err["param"] == "input" and f"input[1][1]: token id {n_vocab}" in err["message"]
