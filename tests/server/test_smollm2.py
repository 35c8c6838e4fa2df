"""The default model end to end: SmolLM2-135M-Instruct, its ChatML template, the `openai` client."""

from __future__ import annotations

import pytest

from tests.paths import SMOLLM2, registry_model
from tests.server.conftest import start_server

pytestmark = [pytest.mark.native_only, pytest.mark.slow]


@pytest.fixture(scope="module")
def smol():
    live = start_server(registry_model(SMOLLM2), n_ctx=512, parallel=2, queue=4, aliases=("smollm2",))
    yield live
    live.stop()


def test_chat_with_the_default_model(smol):
    oa = smol.openai()
    assert [m.id for m in oa.models.list().data] == ["SmolLM2-135M-Instruct.Q4_1"]
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    r = oa.chat.completions.create(model="smollm2", messages=messages, max_tokens=8, temperature=0)
    reply = r.choices[0].message.content
    assert "Paris" in reply
    assert r.usage.prompt_tokens > 20  # the template's default system prompt came along
    stream = oa.chat.completions.create(model="smollm2", messages=messages, max_tokens=8, temperature=0,
                                        stream=True)  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == reply
    again = oa.chat.completions.create(model="smollm2", messages=messages, max_tokens=8, temperature=0)
    assert again.usage.prompt_tokens_details.cached_tokens >= 16  # the rendered prompt came from the cache
