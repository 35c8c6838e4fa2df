"""POST /v1/responses (and /responses) with the official `openai` client: whole and streamed (its typed events),
instructions and message items through the template, max_output_tokens, text.format json_schema through the
constraint engine, truncation, and the refusals of what is not served (stored responses, tools)."""

from __future__ import annotations

import json

import pytest

from tests.openai_shapes import check_openai_shape, check_response_event
from tests.server.conftest import STORIES_ID
from tests.server.test_bad_input import error_of

pytestmark = pytest.mark.native_only

openai = pytest.importorskip("openai")


def _chat_text(client, messages, max_tokens):
    r = client.post("/v1/chat/completions", json={"model": STORIES_ID, "messages": messages, "max_tokens": max_tokens,
                                                  "temperature": 0})  # fmt: skip
    return r.json()["choices"][0]["message"]["content"], r.json()["choices"][0]["finish_reason"]


def test_a_response_is_the_chat_reply_of_the_same_messages(server, client):
    oa = server.openai()
    r = oa.responses.create(model=STORIES_ID, instructions="Tell a story.", input="Once upon a time",
                            max_output_tokens=12, temperature=0)  # fmt: skip
    want, finish = _chat_text(client, [{"role": "system", "content": "Tell a story."},
                                       {"role": "user", "content": "Once upon a time"}], 12)  # fmt: skip
    assert r.output_text == want and finish == "length"
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 12 and r.usage.total_tokens == r.usage.input_tokens + 12
    assert r.model == STORIES_ID and r.id.startswith("resp_")
    items = [{"role": "user", "content": [{"type": "input_text", "text": "Once upon"}]},
             {"role": "assistant", "content": "a time"}, {"role": "user", "content": "go on"}]  # fmt: skip
    r = oa.responses.create(model="gpt-4o", input=items, max_output_tokens=5, temperature=0)
    want, _ = _chat_text(client, [{"role": "user", "content": "Once upon"}, {"role": "assistant", "content": "a time"},
                                  {"role": "user", "content": "go on"}], 5)  # fmt: skip
    assert r.output_text == want and r.model == STORIES_ID


def test_the_stream_is_the_whole_response_in_events(server):
    oa = server.openai()
    kw = {"model": STORIES_ID, "input": "Once upon a time", "max_output_tokens": 10, "temperature": 0}
    whole = oa.responses.create(**kw)
    events = list(oa.responses.create(**kw, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]  # fmt: skip
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete"]  # fmt: skip
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = next(e for e in events if e.type == "response.output_text.done")
    assert deltas == done.text == whole.output_text
    assert events[-1].response.output_text == whole.output_text and events[-1].response.usage.output_tokens == 10


def test_text_format_json_schema_is_enforced(server):
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}  # fmt: skip
    oa = server.openai()
    r = oa.responses.create(model=STORIES_ID, input="a number", max_output_tokens=40, temperature=0,
                            text={"format": {"type": "json_schema", "name": "n", "schema": schema}})  # fmt: skip
    jsonschema.validate(json.loads(r.output_text), schema)
    assert r.status == "completed"


def test_unprefixed_route_truncation_and_refusals(server, client):
    long = [{"role": "user", "content": "Once upon a time there was a dog. " * 100}]
    r = client.post("/responses", json={"input": long, "max_output_tokens": 3})
    assert error_of(r, 400)["code"] == "context_length_exceeded"
    r = client.post("/responses", json={"input": long, "max_output_tokens": 3, "truncation": "auto"})
    assert r.status_code == 200 and r.json()["usage"]["input_tokens"] == 512 - 3, r.text
    for field, value, code in [("previous_response_id", "resp_1", "unsupported_parameter"),
                               ("store", True, "unsupported_value"), ("reasoning", {"effort": "low"},
                               "unsupported_parameter"), ("colour", 1, "unknown_field")]:  # fmt: skip
        err = error_of(client.post("/v1/responses", json={"input": "Once", field: value}), 400)
        assert err["param"] == field and err["code"] == code, err
    with pytest.raises(openai.BadRequestError) as e:
        server.openai().responses.create(model=STORIES_ID, input="Once", previous_response_id="resp_x")
    assert "previous_response_id" in e.value.body["message"]


def test_responses_and_their_events_are_openais_shapes(client):
    """The whole response and every streamed event validate as the `openai` package's own types."""
    body = {"model": STORIES_ID, "input": "Once upon a time", "max_output_tokens": 5}
    check_openai_shape(client.post("/v1/responses", json=body).json())
    text = client.post("/v1/responses", json={**body, "stream": True}).text
    blocks = text.strip().split("\n\n")
    events = [json.loads(b.split("data: ", 1)[1]) for b in blocks if "data: [DONE]" not in b]
    assert len(events) > 6
    for event in events:
        check_response_event(event)
    assert events[-1]["type"] == "response.incomplete"
