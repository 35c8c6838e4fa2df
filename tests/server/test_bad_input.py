"""Bad input gets an error body with the right status (OpenAI's shape; Ollama's, a message alone, on its routes),
and the server keeps serving."""

from __future__ import annotations

import base64

import pytest

from tests.paths import stories
from tests.server.conftest import STORIES_ID, start_server

pytestmark = pytest.mark.native_only

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MSG = [{"role": "user", "content": "hi"}]


def error_of(r, status: int) -> dict:
    """The error's fields; on Ollama's routes, its message alone (as `message`), which must then name the
    problem itself."""
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    if r.request.url.path.startswith("/api/"):
        assert isinstance(err, str) and err, body
        return {"message": err}
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
    assert err.get("type", "invalid_request_error") == "invalid_request_error"
    assert raw == b"" or "not valid JSON" in err["message"]  # an empty body: "body: Field required"


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
    ],
)
def test_wrong_types_and_ranges(client, body, param):
    err = error_of(client.post(CHAT, json=body), 400)
    assert err["param"] == param


def test_prompt_longer_than_the_context(client):
    long_prompt = "Once upon a time " * 300  # far more than the 512-token context
    for path, body in [
        (COMPLETIONS, {"model": STORIES_ID, "prompt": long_prompt}),
        (CHAT, {"model": STORIES_ID, "messages": [{"role": "user", "content": long_prompt}]}),
        ("/api/generate", {"model": STORIES_ID, "prompt": long_prompt, "stream": False}),
        ("/api/chat", {"model": STORIES_ID, "messages": [{"role": "user", "content": long_prompt}]}),
    ]:
        err = error_of(client.post(path, json=body), 400)
        assert err.get("code", "context_length_exceeded") == "context_length_exceeded"
        assert "512" in err["message"] and "shorten it" in err["message"]


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
        (COMPLETIONS, {"model": STORIES_ID, "prompt": "x", "n": 2, "best_of": 3}, "best_of"),
        (CHAT, {"model": STORIES_ID, "messages": MSG, "top_logprobs": 3}, "top_logprobs"),
        (
            CHAT,
            {"model": STORIES_ID, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages.0.content.0.type",
        ),
        ("/detokenize", {"tokens": [10**6]}, "tokens"),
        ("/v1/embeddings", {"model": "all-MiniLM-L6-v2-f16", "input": [1, 2, 10**6]}, "input"),
        ("/v1/embeddings", {"model": "all-MiniLM-L6-v2-f16", "input": [[]]}, "input"),
        (COMPLETIONS, {"model": STORIES_ID, "prompt": [[1, 2], [3, 512]]}, "prompt"),
        ("/v1/embeddings", {"model": "all-MiniLM-L6-v2-f16", "input": "x", "dimensions": 7}, "dimensions"),
        ("/api/generate", {"model": STORIES_ID, "prompt": "x", "format": "yaml"}, "format"),
    ]
    for path, body, param in cases:
        err = error_of(client.post(path, json=body), 400)
        got = err.get("param") or err["message"].split(" ")[0].rstrip(":")  # Ollama: the message names it
        assert got == param or got.startswith(param + "."), (path, body, err)


@pytest.mark.parametrize("call", [{"function": "abc"}, {"function": [1, 2]}, {"function": {"arguments": "{}"}},
                                  {"type": "rpc", "function": {"name": "f"}}, "f()"])  # fmt: skip
@pytest.mark.parametrize("path", [CHAT, "/api/chat"])
def test_malformed_tool_calls_in_the_history_are_400s_naming_them(client, path, call):
    history = [*MSG, {"role": "assistant", "content": "", "tool_calls": [call]}, {"role": "user", "content": "ok"}]
    r = client.post(path, json={"model": STORIES_ID, "messages": history, "stream": False})
    assert r.status_code == 400 and "messages.1.tool_calls.0" in r.text, r.text


def test_not_found_and_wrong_method(client):
    error_of(client.get("/v1/nothing"), 404)
    err = error_of(client.get(COMPLETIONS), 405)
    assert err["type"] == "invalid_request_error"


# every numeric sampling field, at a value just outside what the sampler's math (or the API) admits
OPENAI_OUT_OF_BOUNDS = [
    ("repeat_penalty", 0),  # divides the positive logits: was a ZeroDivisionError in the batch step
    ("repeat_penalty", -1),
    ("temperature", -0.1),
    ("temperature", 2.5),
    ("top_p", 1.5),
    ("top_p", -0.1),
    ("min_p", 2),
    ("typical_p", -1),
    ("top_k", 2**40),
    ("top_k", 1.5),
    ("presence_penalty", 3),
    ("frequency_penalty", -3),
    ("repeat_last_n", -2),
    ("dry_multiplier", -1),
    ("dry_allowed_length", -1),
    ("dry_penalty_last_n", -2),
    ("dry_sequence_breakers", ["x" * 41]),
    ("dry_sequence_breakers", [""]),
    ("xtc_probability", 1.5),
    ("xtc_threshold", -0.1),
    ("mirostat", 3),
    ("mirostat_tau", -1),
    ("mirostat_eta", -0.5),
    ("dynatemp_range", -1),
    ("dynatemp_exponent", -1),
    ("min_keep", -1),
    ("seed", 2**64),
    ("n", 17),
    ("max_tokens", -1),
    ("logit_bias", {"5": 101}),
    ("logit_bias", {str(i): 1 for i in range(1025)}),
]
OLLAMA_OUT_OF_BOUNDS = [
    ("repeat_penalty", 0),
    ("top_p", 2),
    ("typical_p", -0.5),
    ("min_p", 1.5),
    ("repeat_last_n", -2),
    ("mirostat", 5),
    ("mirostat_tau", -1),
    ("num_predict", -3),
    ("seed", 2**64),
    ("tfs_z", 0.5),
    ("penalize_newline", False),
    ("bogus_option", 1),  # an option Ollama does not have: refused by name, not ignored
]


@pytest.mark.parametrize(("field", "value"), OPENAI_OUT_OF_BOUNDS)
def test_sampling_fields_outside_their_bounds_are_400s_naming_them(client, field, value):
    body = {"model": STORIES_ID, "prompt": "Once", "max_tokens": 2, field: value}
    err = error_of(client.post(COMPLETIONS, json=body), 400)
    assert err["param"].split(".")[0] == field, err  # logit_bias.5, dry_sequence_breakers.0: the very entry
    chat = {"model": STORIES_ID, "messages": MSG, "max_tokens": 2, field: value}
    assert error_of(client.post(CHAT, json=chat), 400)["param"].split(".")[0] == field


@pytest.mark.parametrize(("field", "value"), OLLAMA_OUT_OF_BOUNDS)
def test_ollama_options_outside_their_bounds_are_400s_naming_them(client, field, value):
    for path, body in [("/api/generate", {"prompt": "Once"}), ("/api/chat", {"messages": MSG})]:
        body = {"model": STORIES_ID, "stream": False, **body, "options": {"num_predict": 2, field: value}}
        err = error_of(client.post(path, json=body), 400)
        assert err["message"].startswith(f"options.{field}"), err


def test_every_admitted_sampling_value_is_accepted_and_honoured(client):
    """The other side of the bounds: values at their edges are accepted and generate (llama.cpp's meanings:
    -1 is the whole context, top_k 0 the whole vocabulary, mirostat 2, a tiny repeat penalty)."""
    body = {"model": STORIES_ID, "prompt": "Once", "max_tokens": 4, "seed": 1, "repeat_penalty": 1e-30,
            "repeat_last_n": -1, "top_k": 0, "top_p": 0, "min_p": 1, "typical_p": 0, "dry_multiplier": 0.5,
            "dry_base": 1e30, "dry_allowed_length": 0, "dry_penalty_last_n": -1, "xtc_probability": 1,
            "xtc_threshold": 0, "dynatemp_range": 2, "dynatemp_exponent": 0, "top_n_sigma": 1e30,
            "min_keep": 2**31 - 1, "presence_penalty": 2, "frequency_penalty": -2,
            "logit_bias": {"5": -100, "6": 100}}  # fmt: skip
    r = client.post(COMPLETIONS, json=body)
    assert r.status_code == 200, r.text
    mirostat = {"model": STORIES_ID, "prompt": "Once", "max_tokens": 4, "mirostat": 2, "mirostat_tau": 0,
                "mirostat_eta": 1e30, "seed": -1}  # fmt: skip
    assert client.post(COMPLETIONS, json=mirostat).status_code == 200
    # and honoured, not ignored: a top-n-sigma this small keeps only the top token, whatever the temperature
    greedy = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 12}
    want = client.post(COMPLETIONS, json={**greedy, "temperature": 0}).json()["choices"][0]["text"]
    for seed in (1, 2, 3):
        r = client.post(COMPLETIONS, json={**greedy, "temperature": 2, "top_n_sigma": 1e-6, "seed": seed})
        assert r.json()["choices"][0]["text"] == want
    opts = {"repeat_penalty": 1e-30, "repeat_last_n": -1, "typical_p": 0.5, "mirostat": 1, "num_ctx": 256,
            "num_thread": 2, "use_mmap": True, "tfs_z": 1, "penalize_newline": True, "num_predict": 3}  # fmt: skip
    r = client.post("/api/generate", json={"model": STORIES_ID, "prompt": "Once", "stream": False, "options": opts})
    assert r.status_code == 200 and r.json()["eval_count"] == 3, r.text


def test_a_refused_value_fails_no_other_request(server, client):
    """repeat_penalty 0 used to pass validation and fail the whole batch step: every stream running beside it
    ended with a 500. Now it is refused before it is queued; the stream beside it runs to its end."""
    import threading

    got: list[str] = []

    def stream() -> None:
        body = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 60, "temperature": 0,
                "stream": True}  # fmt: skip
        with server.client() as c, c.stream("POST", COMPLETIONS, json=body) as r:
            got.extend(r.iter_lines())

    t = threading.Thread(target=stream)
    t.start()
    ollama = {"prompt": "x", "stream": False, "options": {"repeat_penalty": 0}}
    for path, body in [(COMPLETIONS, {"prompt": "x", "repeat_penalty": 0}), ("/api/generate", ollama)]:
        error_of(client.post(path, json={"model": STORIES_ID, "max_tokens": 5, **body}), 400)
    t.join(60)
    events = [line for line in got if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]" and not any('"error"' in e for e in events), events[-3:]
    assert '"finish_reason":"length"' in events[-2] or '"finish_reason":"stop"' in events[-2]


@pytest.mark.parametrize(
    ("raw", "what"),
    [
        (b'{"model": "m", "prompt": "x", "temperature": NaN}', "NaN"),
        (b'{"model": "m", "prompt": "x", "temperature": Infinity}', "Infinity"),
        (b'{"model": "m", "prompt": "x", "temperature": -Infinity}', "-Infinity"),
        (b'{"model": "m", "prompt": "x", "top_p": 1e999}', "beyond the range"),
        (b'{"model": "m", "prompt": "x", "seed": 1' + b"0" * 5000 + b"}", "digits"),
        (b'{"model": "m", "prompt": "x", "logit_bias": ' + b'{"a": ' * 200 + b"1" + b"}" * 201, "nested deeper"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
    ],
)
def test_json_that_is_not_standard_or_too_deep_is_malformed(client, raw, what):
    """Python's json reads NaN, Infinity and 1e999 (as inf) and trips on 5000-digit integers and deep nesting;
    none is standard JSON a field could take: each is a 400 invalid_json saying what was wrong."""
    for path in (COMPLETIONS, "/api/generate", "/llamay/contexts", "/tokenize"):
        err = error_of(client.post(path, content=raw, headers={"content-type": "application/json"}), 400)
        assert err.get("code", "invalid_json") == "invalid_json" and what in err["message"], err


def test_stop_strings_within_their_limits(client):
    """A 100 KB stop string used to cost O(L^2) per token on the event loop (15 s of every client's time):
    stop strings are limited in count, length and total, each a 400 naming the limit."""
    base = {"model": STORIES_ID, "prompt": "Once", "max_tokens": 4}
    for stop, limit in [(["a"] * 17, "max_stops"), (["x" * 100_000], "max_stop_chars"), ("x" * 1025, "max_stop_chars")]:
        err = error_of(client.post(COMPLETIONS, json={**base, "stop": stop}), 400)
        assert err["param"] == "stop" and limit in err["message"]
    ok = client.post(COMPLETIONS, json={**base, "stop": ["z" * 1024] * 15 + ["there was"], "temperature": 0})
    assert ok.status_code == 200, ok.text
    opts = {"model": STORIES_ID, "prompt": "Once", "stream": False, "options": {"stop": ["x" * 1025]}}
    assert "max_stop_chars" in error_of(client.post("/api/generate", json=opts), 400)["message"]


def test_a_prompt_longer_than_any_that_fits_is_refused_before_tokenizing(server, client):
    limit = server.service.limits.max_prompt_chars
    assert limit == 512 * max(map(len, server.service.tokenizer.vocab.tokens))  # context x the longest token
    long_prompt = "x" * (limit + 1)
    for path, body in [(COMPLETIONS, {"prompt": long_prompt}),
                       (CHAT, {"messages": [{"role": "user", "content": long_prompt}]}),
                       ("/api/generate", {"prompt": long_prompt, "stream": False})]:  # fmt: skip
        err = error_of(client.post(path, json={"model": STORIES_ID, **body}), 400)
        assert err.get("code", "context_length_exceeded") == "context_length_exceeded", err
        assert "max_prompt_chars" in err["message"], err


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
            for path in ("/openapi.json", "/docs", "/docs/init.js", "/docs/assets/swagger-ui-bundle.js"):
                r = anon.get(path)  # the description and the docs page are behind the key too
                assert error_of(r, 401)["code"] == "invalid_api_key" and r.headers["www-authenticate"].startswith(
                    "Basic"
                )
            assert anon.get("/redoc").status_code == 404  # its script exists only on a CDN: not served
            basic = {"Authorization": "Basic " + base64.b64encode(b"anyone:sekret").decode()}
            assert anon.get("/docs", headers=basic).status_code == 200  # a browser's own login dialog
            assert error_of(anon.get("/v1/models", headers=basic), 401)  # the API takes the Bearer form only
            bad = {"Authorization": "Basic " + base64.b64encode(b"anyone:wrong").decode()}
            assert anon.get("/openapi.json", headers=bad).status_code == 401
        with live.client() as ok:
            assert ok.get("/v1/models").status_code == 200
            assert "HTTPBearer" in str(ok.get("/openapi.json").json()["components"]["securitySchemes"])
            for _ in range(2):  # one sequence (--parallel 1), used again and again
                r = ok.post(COMPLETIONS, json={"model": "stories260K-q8_0", "prompt": "Once", "max_tokens": 3})
                assert r.status_code == 200, r.text
        oa = live.openai()
        assert oa.models.list().data[0].id == "stories260K-q8_0"
    finally:
        live.stop()


@pytest.mark.parametrize(("model", "field"), [("CompletionRequest", "prompt"), ("EmbeddingRequest", "input"),
                                              ("DetokenizeRequest", "tokens")])  # fmt: skip
@pytest.mark.parametrize("bad", [-1, 2.5, "7", True, None])
def test_a_large_token_list_is_refused_once_at_its_first_bad_id(model, field, bad):
    """The event loop validates bodies: a list of ids is checked in one pass and refused at its first bad item,
    with one error (a per-item validator over every union member made one error per id: seconds a request)."""
    from pydantic import ValidationError

    from llamay.native.server import schemas

    ids = [5] * 1000 + [bad] + [bad] * 5000
    with pytest.raises(ValidationError) as e:
        getattr(schemas, model).model_validate({field: ids})
    errors = e.value.errors()
    assert len(errors) == 1 and errors[0]["loc"][0] == field and "item 1000" in errors[0]["msg"], errors
    assert getattr(schemas, model).model_validate({field: [5, 6.0]}).model_dump()[field] == [5, 6]


def test_token_lists_past_the_bound_are_refused_by_length(client):
    from llamay.native.server.limits import MAX_TOKEN_IDS

    too_many = [1] * (MAX_TOKEN_IDS + 1)
    for path, field in ((COMPLETIONS, "prompt"), ("/detokenize", "tokens")):
        err = error_of(client.post(path, json={"model": STORIES_ID, field: too_many}), 400)
        assert err["param"].startswith(field) and str(MAX_TOKEN_IDS) in err["message"], err
