"""Over-long prompts: refused by default, naming the limit; cut on request (OpenAI routes: `truncation: "auto"`
with llama.cpp's `n_keep`; Ollama: `options.num_ctx` / `truncate`, with `num_keep`), the cut reported. A cut
prompt must give what the same tokens give sent whole."""

from __future__ import annotations

import pytest

from tests.server.conftest import STORIES_ID
from tests.server.test_bad_input import error_of

pytestmark = pytest.mark.native_only

N_CTX = 512  # the shared server's
LONG = [1] + [10 + (i * 7) % 400 for i in range(N_CTX + 88)]  # BOS, then 600 ids: longer than the context


def _complete(client, prompt, **kw):
    body = {"model": STORIES_ID, "prompt": prompt, "max_tokens": 4, "temperature": 0, **kw}
    return client.post("/v1/completions", json=body)


def test_an_over_long_prompt_is_refused_naming_the_limit(client):
    err = error_of(_complete(client, LONG), 400)
    assert err["code"] == "context_length_exceeded" and "512" in err["message"] and "truncation" in err["message"]


def test_truncation_keeps_the_end_and_n_keep_reports_the_cut_and_matches_the_cut_prompt(client):
    r = _complete(client, LONG, truncation="auto", n_keep=3)
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    kept = N_CTX - 4  # the reply's max_tokens stays free
    assert usage["prompt_tokens"] == kept
    assert usage["llamay_truncated_prompt_tokens"] == len(LONG) - kept
    # BOS and the 3 n_keep tokens, then the prompt's end
    by_hand = LONG[:4] + LONG[len(LONG) - (kept - 4) :]
    same = _complete(client, by_hand)
    assert same.status_code == 200 and same.json()["usage"]["llamay_truncated_prompt_tokens"] == 0
    assert r.json()["choices"][0]["text"] == same.json()["choices"][0]["text"]


def test_truncation_leaves_a_short_prompt_alone_and_n_keep_needs_it(client):
    r = _complete(client, "Once upon a time", truncation="auto")
    assert r.status_code == 200 and r.json()["usage"]["llamay_truncated_prompt_tokens"] == 0
    err = error_of(_complete(client, "Once", n_keep=2), 400)
    assert err["param"] == "n_keep" and err["code"] == "conflicting_fields"
    err = error_of(_complete(client, LONG, truncation="auto", n_keep=-1), 400)  # keep everything: cannot cut
    assert err["param"] == "n_keep" and err["code"] == "context_length_exceeded"


def test_chat_truncation_through_the_openai_client(server):
    oa = server.openai()
    long_text = "Once upon a time there was a dog. " * 100  # within max_prompt_chars, beyond the context
    r = oa.chat.completions.create(model=STORIES_ID, messages=[{"role": "user", "content": long_text}], max_tokens=3,
                                   temperature=0, extra_body={"truncation": "auto"})  # fmt: skip
    assert r.usage.prompt_tokens == N_CTX - 3
    assert r.usage.model_extra["llamay_truncated_prompt_tokens"] > 0


def _generate(client, **kw):
    body = {"model": STORIES_ID, "stream": False, **kw}
    return client.post("/api/generate", json=body)


def test_ollama_num_ctx_cuts_to_num_keep_and_the_end(client):
    opts = {"num_ctx": 64, "num_keep": 2, "num_predict": 4, "temperature": 0}
    r = _generate(client, context=LONG, options=opts)
    assert r.status_code == 200, r.text
    got = r.json()
    kept = got["context"][: len(got["context"]) - got["eval_count"]]
    assert len(kept) == 64 - 4 and kept == LONG[:3] + LONG[len(LONG) - 57 :]
    whole = _generate(client, context=kept, options={"num_predict": 4, "temperature": 0})
    assert whole.json()["response"] == got["response"]


def test_ollama_context_limits_are_refused_by_name(client):
    err = error_of(_generate(client, context=LONG, options={"num_predict": 2}), 400)
    assert "512" in err["message"]
    err = error_of(_generate(client, context=LONG, truncate=False, options={"num_ctx": 64}), 400)
    assert "64" in err["message"] and "options.num_ctx" in err["message"]
    err = error_of(_generate(client, prompt="Once", options={"num_ctx": 4096}), 400)
    assert err["message"].startswith("options.num_ctx") and "512" in err["message"]
    r = _generate(client, context=LONG, truncate=True, options={"num_predict": 2})  # the server's context
    assert r.status_code == 200 and len(r.json()["context"]) == N_CTX


def test_ollama_num_ctx_bounds_the_reply(client):
    r = _generate(client, prompt="Once upon a time", options={"num_ctx": 16, "temperature": 0})
    got = r.json()
    assert r.status_code == 200 and len(got["context"]) == 16 and got["done_reason"] == "length"


def _turns(n: int) -> list[dict]:
    turns = [{"role": "system", "content": "You tell stories."}]
    for i in range(n):
        turns.append({"role": "user", "content": f"Tell me story {i} about a dog and a cat and a big red ball."})
        turns.append({"role": "assistant", "content": f"Once upon a time there was a dog {i} who had a ball."})
    return [*turns, {"role": "user", "content": "And the last one?"}]


def test_ollama_chat_drops_the_oldest_messages_keeping_system_and_the_last(server, client):
    """Ollama's cut of a chat: whole old messages go, the system message and the last stay, as few go as let
    the prompt (and the reply's num_predict) fit num_ctx; the reply is the one of that shorter chat sent whole."""
    service = server.service
    chat = _turns(12)
    opts = {"num_ctx": 160, "num_predict": 4, "temperature": 0}
    r = client.post("/api/chat", json={"model": STORIES_ID, "messages": chat, "stream": False, "options": opts})
    assert r.status_code == 200, r.text
    # by hand: the least number of oldest non-system messages whose removal fits 160 - 4 tokens
    for drop in range(1, len(chat) - 1):
        shorter = [chat[0], *chat[1 + drop :]]
        if len(service.chat_ids(shorter)) <= 156:
            break
    assert drop > 1  # the test asks for a real cut
    assert len(service.chat_ids([chat[0], *chat[drop:]])) > 156  # one fewer dropped would not fit
    whole = client.post("/api/chat", json={"model": STORIES_ID, "messages": shorter, "stream": False,
                                           "options": {"num_predict": 4, "temperature": 0}})  # fmt: skip
    assert r.json()["message"]["content"] == whole.json()["message"]["content"]
    assert 0 < r.json()["prompt_eval_count"] <= 156  # the tokens computed (less what the prefix cache had)
