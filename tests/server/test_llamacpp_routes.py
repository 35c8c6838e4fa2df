"""llama-server's own routes over loopback (plain HTTP): /completion and /completions, /infill, /apply-template,
/embedding, /rerank, /tokenize's pieces; their fields against llama-server's README and, for the numbers,
against llama.cpp's goldens (tests/goldens, written through xllamacpp by scripts/goldens)."""

from __future__ import annotations

import json
import math

import pytest

from tests.paths import MINILM, REPO
from tests.server.conftest import STORIES_ID

pytestmark = pytest.mark.native_only

GOLDEN = json.loads((REPO / "tests" / "goldens" / "stories260K-f32.json").read_text())["cases"][0]
ONCE = GOLDEN["prompt"]  # "Once upon a time"
GREEDY = {"temperature": 0}
TIMINGS = ("cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n",
           "predicted_ms", "predicted_per_token_ms", "predicted_per_second")  # fmt: skip
RESULT = ("content", "tokens", "id_slot", "stop", "model", "tokens_predicted", "tokens_evaluated",
          "generation_settings", "prompt", "truncated", "stop_type", "stopping_word", "tokens_cached",
          "timings")  # fmt: skip


def sse(text: str) -> list:
    blocks = [b for b in text.strip().split("\n\n") if b]
    assert all(b.startswith("data: ") for b in blocks), blocks
    return [json.loads(b[len("data: ") :]) for b in blocks]


def check_timings(t: dict, prompt_n: int, predicted_n: int) -> None:
    assert set(TIMINGS) <= set(t)
    assert t["prompt_n"] == prompt_n and t["predicted_n"] == predicted_n
    assert t["prompt_ms"] >= 0 and t["predicted_ms"] >= 0
    if prompt_n and t["prompt_ms"] > 0:
        assert math.isclose(t["prompt_per_token_ms"] * prompt_n, t["prompt_ms"], rel_tol=1e-9)
        assert math.isclose(t["prompt_per_second"] * t["prompt_ms"], 1e3 * prompt_n, rel_tol=1e-9)
    if predicted_n and t["predicted_ms"] > 0:
        assert math.isclose(t["predicted_per_token_ms"] * predicted_n, t["predicted_ms"], rel_tol=1e-9)


# -- /completion ----------------------------------------------------------------------------------------------


def test_completion_greedy_is_llamacpps(client):
    n = 16
    r = client.post("/completion", json={"prompt": ONCE, "n_predict": n, "return_tokens": True,
                                         "cache_prompt": False, **GREEDY})  # fmt: skip
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(RESULT) <= set(body)
    assert body["tokens"] == GOLDEN["ids"][:n]  # llama.cpp's greedy ids
    assert GOLDEN["text"].startswith(body["content"]) and len(body["content"]) > 20
    assert body["tokens_evaluated"] == len(GOLDEN["prompt_ids"]) and body["tokens_predicted"] == n
    assert body["stop"] is True and body["stop_type"] == "limit" and body["stopping_word"] == ""
    assert body["truncated"] is False and body["model"] == STORIES_ID and body["id_slot"] == -1
    assert body["timings"]["cache_n"] == 0  # cache_prompt false: every prompt token computed
    assert body["tokens_cached"] == len(GOLDEN["prompt_ids"]) + n - 1  # the cache at the end, as llama-server
    check_timings(body["timings"], len(GOLDEN["prompt_ids"]), n)
    gs = body["generation_settings"]
    assert gs["temperature"] == 0 and gs["n_predict"] == n and gs["n_ctx"] == 512 and gs["model"] == STORIES_ID
    assert body["prompt"].endswith(ONCE)


def test_completions_is_the_same_route(client):
    a = client.post("/completion", json={"prompt": ONCE, "n_predict": 6, **GREEDY}).json()
    b = client.post("/completions", json={"prompt": ONCE, "n_predict": 6, **GREEDY}).json()
    assert a["content"] == b["content"] and b["stop_type"] == "limit" and "choices" not in b


def test_n_probs_are_llamacpps(client):
    """completion_probabilities: each token's logprob and top n against llama.cpp's (same ids, logprobs within
    f32 noise)."""
    k = 5
    r = client.post("/completion", json={"prompt": ONCE, "n_predict": 8, "n_probs": k, **GREEDY}).json()
    probs = r["completion_probabilities"]
    assert len(probs) == 8
    for got, want in zip(probs, GOLDEN["steps"], strict=False):
        assert got["id"] == want["id"] and math.isclose(got["logprob"], want["logprob"], abs_tol=1e-3)
        assert [t["id"] for t in got["top_logprobs"]] == [t for t, _ in want["top"][:k]]
        for t, (_, lp) in zip(got["top_logprobs"], want["top"], strict=False):
            assert math.isclose(t["logprob"], lp, abs_tol=1e-3)
            assert bytes(t["bytes"]).decode("utf-8", "replace") == t["token"]


def test_prompt_shapes(client):
    """Text, token ids and both mixed are one prompt; a list of prompts answers a list. The BOS comes only
    before a first piece that is text (as llama-server)."""
    ids = client.post("/tokenize", json={"content": ONCE, "add_special": True}).json()["tokens"]
    assert ids == GOLDEN["prompt_ids"]
    kw = {"n_predict": 5, **GREEDY}
    text = client.post("/completion", json={"prompt": ONCE, **kw}).json()
    by_ids = client.post("/completion", json={"prompt": ids, **kw}).json()
    assert by_ids["content"] == text["content"] and by_ids["tokens_evaluated"] == len(ids)
    tail = client.post("/tokenize", json={"content": " there"}).json()["tokens"]
    mixed = client.post("/completion", json={"prompt": [*ids, " there"], **kw}).json()
    assert mixed["tokens_evaluated"] == len(ids) + len(tail)
    many = client.post("/completion", json={"prompt": [ONCE, ids, [*ids, " there"]], **kw}).json()
    assert [m["index"] for m in many] == [0, 1, 2]
    assert [m["content"] for m in many] == [text["content"], text["content"], mixed["content"]]
    two = client.post("/completion", json={"prompt": ONCE, "n_cmpl": 2, **kw}).json()
    assert [m["content"] for m in two] == [text["content"]] * 2


def test_n_predict_0_evaluates_the_prompt_into_the_cache(client):
    prompt = "Zero tokens: the prompt alone goes into the cache and the reply is empty, twice over."
    first = client.post("/completion", json={"prompt": prompt, "n_predict": 0}).json()
    assert first["content"] == "" and first["tokens_predicted"] == 0 and first["stop_type"] == "limit"
    assert first["truncated"] is False
    again = client.post("/completion", json={"prompt": prompt, "n_predict": 0}).json()
    t = again["timings"]
    assert t["cache_n"] > 0 and t["prompt_n"] == again["tokens_evaluated"] - t["cache_n"]
    assert again["tokens_cached"] == again["tokens_evaluated"]
    cold = client.post("/completion", json={"prompt": prompt, "n_predict": 0, "cache_prompt": False}).json()
    assert cold["timings"]["cache_n"] == 0 and cold["timings"]["prompt_n"] == cold["tokens_evaluated"]


def test_stop_word_and_end_of_context(client):
    r = client.post("/completion", json={"prompt": ONCE, "n_predict": 30, "stop": ["Lily"], **GREEDY}).json()
    assert r["stop_type"] == "word" and r["stopping_word"] == "Lily"
    assert "Lily" not in r["content"] and GOLDEN["text"].startswith(r["content"] + "Lily")
    full = client.post("/completion", json={"prompt": ONCE, "n_predict": -1, "ignore_eos": True, **GREEDY}).json()
    assert full["stop_type"] == "limit" and full["truncated"] is True  # the context's end, not n_predict
    assert full["tokens_evaluated"] + full["tokens_predicted"] >= 511


def test_stream_chunks_add_up_to_the_result(client):
    body = {"prompt": ONCE, "n_predict": 12, "n_probs": 2, "timings_per_token": True, "return_tokens": True,
            **GREEDY}  # fmt: skip
    whole = client.post("/completion", json=body).json()
    r = client.post("/completion", json={**body, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert "[DONE]" not in r.text
    events = sse(r.text)
    parts, final = events[:-1], events[-1]
    assert all(e["stop"] is False and "timings" in e for e in parts)
    assert "".join(e["content"] for e in parts) == whole["content"]
    assert [t for e in parts for t in e["tokens"]] == whole["tokens"]
    assert [p["id"] for e in parts for p in e["completion_probabilities"]] == whole["tokens"]
    assert final["stop"] is True and final["content"] == "" and final["stop_type"] == "limit"
    assert final["tokens_predicted"] == 12


def test_constraints_grammar_and_json_schema(client):
    r = client.post("/completion", json={"prompt": ONCE, "n_predict": 8, "grammar": 'root ::= "yes" | "no"'})
    assert r.status_code == 200, r.text
    assert r.json()["content"] in ("yes", "no")
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}  # fmt: skip
    r = client.post("/completion", json={"prompt": ONCE, "n_predict": 40, "json_schema": schema, **GREEDY}).json()
    jsonschema.validate(json.loads(r["content"]), schema)
    bad = client.post("/completion", json={"prompt": ONCE, "grammar": "root ::= ("})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "grammar"


def test_response_fields(client):
    fields = ["content", "generation_settings/n_predict", "nope"]
    r = client.post("/completion", json={"prompt": ONCE, "n_predict": 3, "response_fields": fields})
    body = r.json()
    assert set(body) == {"content", "n_predict"} and body["n_predict"] == 3


@pytest.mark.parametrize(
    ("field", "value"),
    [("hiccup", 1), ("n_indent", 2), ("lora", [{"id": 0, "scale": 1.0}]), ("post_sampling_probs", True),
     ("return_progress", True), ("n_cache_reuse", 256), ("t_max_predict_ms", 100), ("temperature", -1e40),
     ("top_k", "40"), ("samplers", ["top_k", "bogus"]), ("logit_bias", [[999999, 1.0]]), ("id_slot", 99),
     ("n_probs", 101), ("n_predict", -5), ("json_schema", "x")],
)  # fmt: skip
def test_fields_refused_by_name(client, field, value):
    r = client.post("/completion", json={"prompt": ONCE, "n_predict": 2, field: value})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert field in (err["param"] or "") or field in err["message"], err


def test_sampling_fields_by_llamacpps_names(client):
    """temperature / temp, penalty_* and the others reach the sampler: a seeded sample repeats, and a greedy
    one is the known story whatever name set the temperature."""
    a = client.post("/completion", json={"prompt": ONCE, "n_predict": 8, "temp": 0}).json()
    b = client.post("/completion", json={"prompt": ONCE, "n_predict": 8, "temperature": 0}).json()
    assert a["content"] == b["content"] and a["generation_settings"]["temperature"] == 0
    kw = {"prompt": ONCE, "n_predict": 12, "seed": 7, "temperature": 1.5, "penalty_repeat": 1.3, "top_k": 0,
          "samplers": "penalties;top_k;temperature"}  # fmt: skip
    s1 = client.post("/completion", json=kw).json()
    s2 = client.post("/completion", json=kw).json()
    assert s1["content"] == s2["content"] and s1["generation_settings"]["repeat_penalty"] == 1.3


# -- timings on the OpenAI routes -------------------------------------------------------------------------------


def test_openai_responses_carry_timings(client):
    r = client.post("/v1/completions", json={"prompt": ONCE, "max_tokens": 5}).json()
    check_timings(r["timings"], r["usage"]["prompt_tokens"] - r["usage"]["prompt_tokens_details"]["cached_tokens"], 5)
    msgs = [{"role": "user", "content": "A story"}]
    c = client.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 5}).json()
    assert c["timings"]["predicted_n"] == c["usage"]["completion_tokens"]
    s = client.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 5, "stream": True})
    chunks = [e for e in (json.loads(b[6:]) for b in s.text.strip().split("\n\n") if b != "data: [DONE]")]
    timed = [e for e in chunks if "timings" in e]
    assert len(timed) == 1 and timed[0]["choices"][0]["finish_reason"] is not None
    every = client.post("/v1/completions", json={"prompt": ONCE, "max_tokens": 4, "stream": True,
                                                 "timings_per_token": True})  # fmt: skip
    chunks = [json.loads(b[6:]) for b in every.text.strip().split("\n\n") if b != "data: [DONE]"]
    assert all("timings" in e for e in chunks if e["choices"])


# -- /apply-template, /tokenize -------------------------------------------------------------------------------


def test_apply_template_gives_the_chat_routes_prompt(client):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "A story"}]
    prompt = client.post("/apply-template", json={"messages": msgs}).json()["prompt"]
    assert "A story" in prompt and "Be brief." in prompt
    via_completion = client.post("/completion", json={"prompt": prompt, "n_predict": 8, **GREEDY}).json()
    via_chat = client.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 8, **GREEDY}).json()
    assert via_completion["content"] == via_chat["choices"][0]["message"]["content"]
    bad = client.post("/apply-template", json={"messages": msgs, "temperature": 1})
    assert bad.status_code == 400 and "temperature" in bad.text


def test_tokenize_pieces_are_bytes_where_not_text(client):
    """llama-server's README example on stories260K: 'á' is two byte tokens, each piece a list of bytes."""
    r = client.post("/tokenize", json={"content": "á", "with_pieces": True}).json()
    assert r["tokens"][-2:] == [{"id": 198, "piece": [195]}, {"id": 164, "piece": [161]}]
    r = client.post("/tokenize", json={"content": " Once", "with_pieces": True}).json()
    assert all(isinstance(t["piece"], str) for t in r["tokens"])
    ids = [t["id"] for t in r["tokens"]]
    assert client.post("/detokenize", json={"tokens": ids}).json()["content"] == " Once"


# -- /embedding, /rerank, /infill -------------------------------------------------------------------------------


def test_embedding_is_the_pooled_vector_in_llama_servers_shape(client):
    expected = json.loads((MINILM.parent / "expected.json").read_text())
    text, want = expected["sentences"][0], expected["embeddings"][0]
    r = client.post("/embedding", json={"content": text})
    assert r.status_code == 200, r.text
    (item,) = r.json()
    assert item["index"] == 0 and len(item["embedding"]) == 1
    got = item["embedding"][0]
    cos = sum(a * b for a, b in zip(got, want, strict=True)) / math.sqrt(sum(a * a for a in got))
    assert cos > 0.9999
    taxicab = client.post("/embedding", json={"content": [text, "a cat"], "embd_normalize": 1}).json()
    assert len(taxicab) == 2 and math.isclose(sum(abs(x) for x in taxicab[0]["embedding"][0]), 1.0, rel_tol=1e-6)
    v0 = taxicab[0]["embedding"][0]
    assert all(math.isclose(a / v0[0], b / got[0], rel_tol=1e-4) for a, b in zip(v0[:8], got[:8], strict=True))
    assert client.post("/embedding", json={"content": text, "embd_normalize": -1}).status_code == 400


@pytest.mark.parametrize("path", ["/rerank", "/v1/rerank", "/reranking"])
def test_rerank_is_refused_by_name(client, path):
    r = client.post(path, json={"query": "a panda", "documents": ["hi", "a bear"]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "model_not_reranker"


def test_infill_needs_fim_tokens(client):
    r = client.post("/infill", json={"input_prefix": "def f(", "input_suffix": "):"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "fim_not_supported" and "FIM_PRE" in err["message"]
