"""Every OpenAI-shaped object the server sends (whole answers and each streamed chunk) validates as the `openai`
package's own types; the browser's JS API is held to the same check in tests/browser/test_api.py."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.openai_shapes import check_openai_shape
from tests.server.conftest import STORIES_ID
from tests.server.test_openai import sse_events

pytestmark = pytest.mark.native_only

CHAT = {"model": STORIES_ID, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "seed": 3}
COMPLETE = {"model": STORIES_ID, "prompt": "Once upon a time", "max_tokens": 6, "temperature": 0}


def test_the_check_can_fail():
    with pytest.raises(ValidationError, match="finish_reason"):
        check_openai_shape({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
                            "choices": [{"index": 0, "delta": {}, "finish_reason": "finished"}]})  # fmt: skip


@pytest.mark.parametrize("extra", [{}, {"n": 2, "logprobs": True, "top_logprobs": 2}])
def test_chat_whole_and_streamed(client, extra):
    r = client.post("/v1/chat/completions", json={**CHAT, **extra})
    assert r.status_code == 200, r.text
    check_openai_shape(r.json())
    r = client.post("/v1/chat/completions", json={**CHAT, **extra, "stream": True,
                                                  "stream_options": {"include_usage": True}})  # fmt: skip
    events = sse_events(r.text)
    assert events[-1] == "[DONE]" and len(events) > 3
    for chunk in events[:-1]:
        check_openai_shape(chunk)


@pytest.mark.parametrize("extra", [{}, {"n": 2, "logprobs": 2, "echo": True}])
def test_completion_whole_and_streamed(client, extra):
    r = client.post("/v1/completions", json={**COMPLETE, **extra})
    assert r.status_code == 200, r.text
    check_openai_shape(r.json())
    events = sse_events(client.post("/v1/completions", json={**COMPLETE, **extra, "stream": True}).text)
    assert events[-1] == "[DONE]" and len(events) > 3
    for chunk in events[:-1]:
        check_openai_shape(chunk, streamed=True)
    with pytest.raises(ValidationError, match="finish_reason"):  # whole answers still need one
        check_openai_shape(events[0])


def test_embeddings_and_models(client):
    r = client.post("/v1/embeddings", json={"model": "all-MiniLM-L6-v2-f16", "input": ["a cat", "a dog"]})
    check_openai_shape(r.json(), "embeddings")
    for card in client.get("/v1/models").json()["data"]:
        check_openai_shape(card)
