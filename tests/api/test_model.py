"""The library's Model: tokens both ways against the tokenizer's reference behaviour, the high level against the
Engine it runs on (text, streams, stop strings), constrained output validated by jsonschema, embeddings against
sentence-transformers and the server's /v1/embeddings."""

from __future__ import annotations

import json
import math

import pytest

import llamay
from llamay.engine import Engine
from llamay.sampling import SamplerConfig
from tests import paths
from tests.model.test_engine import STORIES_GREEDY

GREEDY = SamplerConfig(temperature=0.0)


@pytest.fixture(scope="module")
def stories():
    with llamay.load(paths.stories("f32"), n_ctx=128) as model:
        yield model


def test_tokens_both_ways(stories):
    ids = stories.tokenize("Once upon a time")
    assert ids == [1, 403, 407, 261, 378]  # llama.cpp's (tests/goldens)
    assert stories.detokenize(ids) == "Once upon a time"
    assert "".join(stories.token_to_piece(t) for t in ids[1:]) == " Once upon a time"
    assert stories.token_bytes(ids[1]) == b" Once" and stories.is_eog(stories.eos) and not stories.is_eog(ids[1])
    with pytest.raises(llamay.TokenError, match="512 is not a token id"):
        stories.token_to_piece(512)
    with pytest.raises(llamay.LlamayError, match="tokenize takes text"):
        stories.tokenize(b"bytes")


def test_complete_is_the_engines_completion(stories):
    text = stories.complete("Once upon a time", 30, temperature=0)
    assert "Once upon a time" + text == "".join(["Once upon a time", *Engine(stories.core, 128).complete(
        "Once upon a time", 30, GREEDY)])  # fmt: skip
    assert ("Once upon a time" + text).startswith(STORIES_GREEDY)
    assert stories.stats.generated_tokens == 30 and stories.stats.finish_reason == "length"
    pieces = list(stories.complete("Once upon a time", 30, stream=True, sampler=llamay.Sampler(temperature=0)))
    assert len(pieces) > 1 and "".join(pieces) == text
    assert stories.complete([1, 403, 407, 261, 378], 30, temperature=0) == text  # token ids as the prompt
    assert stories.complete("Once upon a time", 30, temperature=0, stop="Lily") == ", there was a little girl named "


def test_seeded_sampling_repeats(stories):
    a = stories.complete("Once", 16, temperature=1.2, top_k=0, seed=5)
    assert a == stories.complete("Once", 16, sampler=llamay.Sampler(temperature=1.2, top_k=0, seed=5))
    assert {stories.complete("Once", 16, temperature=1.2, top_k=0, seed=s) for s in (1, 2, 3)} - {a}


def test_chat_is_the_engines_chat(stories):
    messages = [{"role": "user", "content": "Tell me a story"}]
    want = "".join(Engine(stories.core, 128).chat(messages, 12, GREEDY))
    assert stories.chat(messages, 12, temperature=0) == want
    assert "".join(stories.chat(messages, 12, stream=True, temperature=0)) == want
    assert stories.apply_chat_template(messages).endswith("<|im_start|>assistant\n")


def test_one_stream_at_a_time(stories):
    first = stories.complete("Once", 8, stream=True, temperature=0)
    next(first)
    with pytest.raises(llamay.LlamayError, match="still open"):
        stories.complete("Once", 8, temperature=0)
    first.close()
    unstarted = stories.complete("Once", 8, stream=True)  # never iterated: holds nothing
    del unstarted
    assert stories.complete("Once", 4, temperature=0)


def test_high_level_misuse_is_a_clear_error(stories):
    with pytest.raises(llamay.LlamayError, match="temperatur: not a sampling parameter"):
        stories.complete("Once", 4, temperatur=0)
    with pytest.raises(llamay.LlamayError, match="not both"):
        stories.complete("Once", 4, sampler=llamay.Sampler(), temperature=0)
    with pytest.raises(llamay.LlamayError, match="top_p: must be a number >= 0"):
        stories.complete("Once", 4, top_p=2)
    with pytest.raises(llamay.LlamayError, match="max_tokens must be a positive integer"):
        stories.complete("Once", 0)
    with pytest.raises(llamay.LlamayError, match="list of messages"):
        stories.chat("hello")
    with pytest.raises(llamay.LlamayError, match="generative model without pooling"):
        stories.embed("hello")
    with pytest.raises(llamay.LlamayError, match=r"made by llamay\.constraints"):
        stories.complete("Once", 4, constraint={"type": "object"})


def test_a_schema_constraint_gives_valid_json(stories):
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
              "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
              "required": ["name", "tags"], "additionalProperties": False}  # fmt: skip
    spec = llamay.constraints.json_schema(schema)
    for seed in (1, 2):
        out = stories.complete("Once upon a time", 80, constraint=spec, temperature=1.0, seed=seed)
        jsonschema.validate(json.loads(out), schema)
    with pytest.raises(llamay.LlamayError, match="backreferences"):  # a pattern no regular automaton can hold
        llamay.constraints.json_schema({"type": "string", "pattern": "(a)\\1"})


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_embeddings_match_sentence_transformers():
    """On the default backend (tests/model runs every backend's embeddings; portable takes a minute)."""
    expected = json.loads((paths.MINILM.parent / "expected.json").read_text())
    with llamay.load(paths.MINILM) as encoder:
        got = encoder.embed(expected["sentences"])
        one = encoder.embed(expected["sentences"][0])
        assert encoder.is_encoder
        with pytest.raises(llamay.LlamayError, match="encoder"):
            encoder.complete("hello")
    assert one == got[0]
    for a, b in zip(got, expected["embeddings"], strict=True):
        assert cosine(a, b) >= 0.9999


@pytest.mark.native_only
def test_embeddings_equal_the_servers():
    from tests.server.conftest import start_server

    texts = ["a cat", "a dog sat on the mat"]
    live = start_server(paths.stories("f32"), n_ctx=64, embedding_model=paths.MINILM)
    try:
        with live.client() as c:
            r = c.post("/v1/embeddings", json={"model": paths.MINILM.stem, "input": texts})
        assert r.status_code == 200, r.text
        served = [d["embedding"] for d in sorted(r.json()["data"], key=lambda d: d["index"])]
    finally:
        live.stop()
    with llamay.load(paths.MINILM) as encoder:
        assert encoder.embed(texts) == served  # the same path: equal to the last bit JSON carries


def test_chat_with_tools_as_the_server_honours_them():
    """tool_choice required and named always give calls whose arguments validate (jsonschema where it is); a
    constraint beside tools is refused; tool_choice none leaves the tools out."""
    model = llamay.load(paths.stories("f32"))
    props = {"a": {"type": "integer", "minimum": 0, "maximum": 99}, "b": {"enum": [1, 2]}}
    add = {"type": "object", "properties": props, "required": ["a", "b"]}
    tools = [{"type": "function", "function": {"name": "add", "parameters": add}}]
    msgs = [{"role": "user", "content": "Add 2 and 3."}]
    named = {"type": "function", "function": {"name": "add"}}
    for seed in range(3):
        reply = model.chat(msgs, tools=tools, tool_choice=named, max_tokens=150, temperature=1.0, seed=seed)
        assert model.stats.finish_reason == "stop"
        content, calls = model.tool_calls(reply)
        assert content is None and [c["name"] for c in calls] == ["add"]
        assert json.loads(reply)["tool_call"]["arguments"] == calls[0]["arguments"]  # the generic format
        try:
            import jsonschema
        except ImportError:
            assert set(calls[0]["arguments"]) == {"a", "b"}
        else:
            jsonschema.validate(calls[0]["arguments"], add)
    with pytest.raises(llamay.LlamayError, match="constraint"):
        model.chat(msgs, tools=tools, tool_choice="required", constraint=llamay.constraints.json_object())
    with pytest.raises(llamay.LlamayError, match="tool_choice"):
        model.chat(msgs, tools=tools, tool_choice={"type": "function", "function": {"name": "nope"}})
    plain = model.chat(msgs, tools=tools, tool_choice="none", max_tokens=8, temperature=0)
    assert plain == model.chat(msgs, max_tokens=8, temperature=0)


ADD_TOOL = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99}, "b": {"type": "boolean"}},
    "required": ["a", "b"]}}}  # fmt: skip


def mistral_tool_reply(model, marker: int, stream: bool = False):
    """A reply that must call `add`, its first token pushed to the marker's control token (the grammar allows
    it, or the same text in plain tokens)."""
    msgs = [{"role": "user", "content": "Add 2 and 3."}]
    return model.chat(msgs, tools=[ADD_TOOL], tool_choice="required", max_tokens=200, temperature=0,
                      logit_bias={marker: 100}, stream=stream)  # fmt: skip


def test_chat_with_tools_shows_a_control_token_marker_to_the_parser(tmp_path):
    """Mistral's `[TOOL_CALLS]` is a control token: the library's reply shows it (as the server's decoder does,
    `ToolPlan.decoder`), so `tool_calls` reads the calls; any other control token stays unseen."""
    from tests.models.tiny_tools import MARKER, write_mistral_tools

    path = tmp_path / "tiny-mistral-tools.gguf"
    marker = write_mistral_tools(path)
    with llamay.load(path) as model:
        assert model.tokenize(MARKER, add_special=False) == [marker] and model.token_to_piece(marker) == ""
        reply = mistral_tool_reply(model, marker)
        assert model.stats.finish_reason == "stop"
        assert reply.startswith(MARKER) and model.detokenize([model.bos]) == ""
        content, calls = model.tool_calls(reply)
        assert content is None and [c["name"] for c in calls] == ["add"]
        assert set(calls[0]["arguments"]) == {"a", "b"} and 0 <= calls[0]["arguments"]["a"] <= 99
        assert "".join(mistral_tool_reply(model, marker, stream=True)) == reply


def test_browser_session_shows_a_control_token_marker_to_the_parser(tmp_path):
    """The browser worker's Session (web/py) decodes a tool reply as the library does: Mistral's `[TOOL_CALLS]`
    control token shows, so its stream's deltas carry the call, whose pieces join into the library's call; the
    reply equals the library's for the same request."""
    from tests.models.tiny_tools import write_mistral_tools

    path = tmp_path / "tiny-mistral-tools.gguf"
    marker = write_mistral_tools(path)
    with llamay.load(path) as model:
        library = mistral_tool_reply(model, marker)
        _, expected = model.tool_calls(library)
    session = paths.web_py_module().Session(bytearray(path.read_bytes()), path.name)
    msgs = [{"role": "user", "content": "Add 2 and 3."}]
    params = {"tools": [ADD_TOOL], "tool_choice": "required", "max_tokens": 200, "temperature": 0,
              "logit_bias": {str(marker): 100}}  # fmt: skip
    pieces = list(session.generate("chat", msgs, params))
    assert "".join(pieces) == library
    deltas = [session.tool_delta(p) for p in pieces] + [session.tool_delta("", last=True)]
    deltas = [d for d in deltas if d is not None]
    calls: dict[int, dict] = {}
    for d in deltas:
        assert "content" not in d  # the reply is one call
        for c in d.get("tool_calls", []):
            if c["index"] in calls:
                calls[c["index"]]["arguments"] += c["function"]["arguments"]
            else:
                assert c["id"].startswith("call_") and c["type"] == "function"
                calls[c["index"]] = dict(c["function"])
    assert len(deltas) > 2  # the arguments came in pieces, not whole at the end
    assert [{"name": c["name"], "arguments": json.loads(c["arguments"])} for c in calls.values()] == expected
    assert session.tool_finish("stop") == "tool_calls" and session.tool_finish("length") == "length"
