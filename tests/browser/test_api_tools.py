"""Tool calls through the browser's JavaScript API (web/test/tools.html) in headless Chromium, on SmolLM2 (whose
template has no tools: the generic format): the calls equal the native library's on the same request, whole and
streamed replies have OpenAI's shapes, arguments validate against the tool's schema, and what cannot be honoured
is refused by name."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from tests import paths
from tests.openai_shapes import check_openai_shape

pytestmark = pytest.mark.native_only

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "weather", "description": "today's weather in a city",
                                           "parameters": WEATHER}}]  # fmt: skip
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def native_calls(model_path, **kw) -> list[dict]:
    """The calls the native library makes for the same request (greedy), with arguments as objects."""
    import llamay

    with llamay.load(str(model_path)) as model:
        reply = model.chat(MESSAGES, tools=TOOLS, temperature=0, max_tokens=64, **kw)
        return model.tool_calls(reply)[1]


def test_tool_calls_through_the_javascript_api(web_app, site):
    jsonschema = pytest.importorskip("jsonschema")
    smol = paths.registry_model(paths.SMOLLM2)  # skipped locally when absent; CI fetches it
    query = {"model": f"/models/{paths.SMOLLM2}", "tools": json.dumps(TOOLS), "messages": json.dumps(MESSAGES)}
    site.goto(f"{web_app.url}test/tools.html?{urlencode(query)}")
    site.wait_for_function("window.llamayToolsResult !== undefined", polling=250, timeout=240_000)
    r = site.evaluate("window.llamayToolsResult")
    assert "error" not in r, r["error"]
    assert site.outside == [] and site.errors == []

    auto = r["auto"]
    check_openai_shape(auto)
    choice = auto["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    calls = choice["message"]["tool_calls"]
    got = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])} for c in calls]
    assert got == native_calls(smol)
    for c in got:
        jsonschema.validate(c["arguments"], WEATHER)
    assert all(c["id"].startswith("call_") and c["type"] == "function" for c in calls)

    for chunk in r["chunks"]:  # a named tool: the call is forced
        check_openai_shape(chunk)
    # streamed as the server streams it: the call's first delta has its index, id and name, then argument
    # pieces as they are generated; joined, they are the library's call for the same request
    deltas = [ch["choices"][0]["delta"] for ch in r["chunks"]]
    streamed = [c for d in deltas for c in d.get("tool_calls", [])]
    assert len(streamed) > 2 and {c["index"] for c in streamed} == {0}
    head, *rest = streamed
    assert head["id"].startswith("call_") and head["function"]["name"] == "weather"
    assert all("id" not in c and "name" not in c["function"] for c in rest)
    joined = "".join(c["function"]["arguments"] for c in streamed)
    named = {"type": "function", "function": {"name": "weather"}}
    assert [{"name": "weather", "arguments": json.loads(joined)}] == native_calls(smol, tool_choice=named)
    assert r["chunks"][-1]["choices"][0]["finish_reason"] == "tool_calls"

    none = r["none"]["choices"][0]
    assert "tool_calls" not in none["message"] and none["finish_reason"] == "length"

    assert r["unknownField"]["kind"] == "bad-request" and r["unknownField"]["message"].startswith("frobnicate: ")
    assert r["unknownTool"]["kind"] == "bad-request" and "nope" in r["unknownTool"]["message"]
    assert r["bothConstraints"]["kind"] == "bad-request"
    assert r["bothConstraints"]["message"].startswith("response_format: ")
