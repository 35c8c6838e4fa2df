"""Ollama's `think` and `message.thinking` on a template that reasons in <think> (synthetic, on stories260K),
the stream's split against the whole reply's, and the refusal on a template that does not reason."""

from __future__ import annotations

import json
import random

import pytest

from tests.gguf.helpers import edited
from tests.paths import stories
from tests.server.conftest import STORIES_ID, start_server
from tests.server.test_bad_input import error_of

pytestmark = pytest.mark.native_only

thinking = pytest.importorskip("llamay.native.server.thinking")

# opens the reasoning block in the generation prompt unless enable_thinking is false (then an empty block)
TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% if enable_thinking is defined and not enable_thinking %}"
    "<think></think>{% else %}<think>\n{% endif %}{% endif %}"
)
MSG = [{"role": "user", "content": "Once upon a time"}]


@pytest.fixture(scope="module")
def reasoner(tmp_path_factory):
    from llamay.gguf import GGUFValueType as V

    path = tmp_path_factory.mktemp("think") / "thinker.gguf"
    path.write_bytes(edited(stories("f32"), {"tokenizer.chat_template": (TEMPLATE, V.STRING)}))
    live = start_server(path, n_ctx=256, parallel=1, queue=4)
    yield live
    live.stop()


def _chat(live, **kw):
    with live.client() as c:
        body = {"model": "thinker", "messages": MSG, "stream": False, "options": {"num_predict": 8, "temperature": 0}}
        return c.post("/api/chat", json={**body, **kw})


def test_think_puts_the_reasoning_in_thinking(reasoner):
    ollama = pytest.importorskip("ollama")
    r = ollama.Client(host=reasoner.url).chat(model="thinker", messages=MSG, think=True,
                                              options={"num_predict": 8, "temperature": 0})  # fmt: skip
    # the template opened <think> and the tiny model never closes it: the whole reply is reasoning
    raw = _raw(reasoner, think=True)
    assert r.message.thinking == raw and r.message.content == ""
    off = _chat(reasoner, think=False).json()["message"]
    assert "thinking" not in off and off["content"] == _raw(reasoner, think=False)


def _raw(live, think: bool) -> str:
    """The same prompt through /api/generate raw: the text the model writes, unsplit."""
    service = live.service
    ids = service.chat_ids(MSG, think=think)
    with live.client() as c:
        r = c.post("/api/generate", json={"model": "thinker", "context": ids, "stream": False,
                                          "options": {"num_predict": 8, "temperature": 0}})  # fmt: skip
    return r.json()["response"]


def test_streamed_thinking_is_the_whole_replys(reasoner):
    with reasoner.client() as c:
        body = {"model": "thinker", "messages": MSG, "think": True, "options": {"num_predict": 8, "temperature": 0}}
        lines = [json.loads(x) for x in c.post("/api/chat", json=body).text.splitlines()]
    streamed = "".join(x["message"].get("thinking", "") for x in lines)
    assert streamed == _chat(reasoner, think=True).json()["message"]["thinking"] != ""


def test_think_on_a_template_without_reasoning_is_refused(client):
    r = client.post("/api/chat", json={"model": STORIES_ID, "messages": MSG, "think": True, "stream": False})
    err = error_of(r, 400)
    assert "does not support thinking" in err["message"]


@pytest.mark.parametrize("seed", range(20))
def test_a_split_stream_is_the_whole_split(seed):
    rng = random.Random(seed)
    text = rng.choice(["", " ", "\n"]) + rng.choice(["<think>", ""]) + "why " * rng.randrange(3) + \
        rng.choice(["</think>", ""]) + rng.choice(["\n\n", ""]) + "answer <b>x</b>" * rng.randrange(2)  # fmt: skip
    cuts = sorted(rng.sample(range(len(text) + 1), min(len(text), 4)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    s = thinking.ThinkSplit()
    got = [s.feed(p, final=i == len(pieces) - 1) for i, p in enumerate(pieces)]
    assert ("".join(t for t, _ in got), "".join(a for _, a in got)) == thinking.split(text)
