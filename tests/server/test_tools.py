"""Tool calls over loopback with the official `openai` and `ollama` clients, on four template families: the
generic format (a model without a template: the ChatML fallback; SmolLM2's ChatML) and synthetic Hermes/Qwen,
Llama 3.x and Mistral templates written here, put on a tiny random-weight llama (stories260K's vocabulary, a
context of 2048: tool prompts in a 512-token vocabulary are long). `tool_choice: "required"` and a named tool
always give calls whose arguments validate against their tool's schema (`jsonschema`), whole and streamed (the
client's accumulation)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.models import tiny
from tests.models.tiny_tools import MISTRAL, write_mistral_tools
from tests.openai_shapes import check_openai_shape
from tests.paths import SMOLLM2, registry_model
from tests.server.conftest import start_server

pytestmark = pytest.mark.native_only
jsonschema = pytest.importorskip("jsonschema")

HERMES = """{%- if tools %}<|im_start|>system
Call functions. <tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>
Return each call as <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>
{% endif %}{%- for m in messages %}<|im_start|>{{ 'user' if m.role == 'tool' else m.role }}
{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}{% elif m.role == 'tool' %}<tool_response>{{ m.content }}</tool_response>{% else %}\
{{ m.content }}{% endif %}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
LLAMA3 = """{%- if tools %}<|start_header_id|>system<|end_header_id|>

Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.
{% for t in tools %}{{ t | tojson }}{% endfor %}<|eot_id|>{% endif %}
{%- for m in messages %}<|start_header_id|>{{ 'ipython' if m.role == 'tool' else m.role }}<|end_header_id|>

{% if m.tool_calls %}{"name": "{{ m.tool_calls[0].function.name }}", "parameters": \
{{ m.tool_calls[0].function.arguments | tojson }}}{% else %}{{ m.content }}{% endif %}<|eot_id|>{% endfor %}
{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}"""
TEMPLATES = {"generic": None, "hermes": HERMES, "llama3": LLAMA3, "mistral": MISTRAL}

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                                            "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"]}  # fmt: skip
ADD = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 999},
                                        "b": {"type": "boolean"}}, "required": ["a", "b"]}  # fmt: skip
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "add", "description": "a + b", "parameters": ADD}}]  # fmt: skip
SCHEMAS = {"weather": WEATHER, "add": ADD}
MSGS = [{"role": "user", "content": "Weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "add"}}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    path = tmp_path_factory.mktemp("tools") / "tiny-llama-2k.gguf"
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(tiny.SPECS, "llama", dataclasses.replace(tiny.SPECS["llama"], n_ctx=2048))
        tiny.write_tiny("llama", path)
    live = start_server(path, n_ctx=2048, parallel=2, queue=8)
    yield live
    live.stop()


@pytest.fixture(params=list(TEMPLATES))
def family(request, live):
    """The module's server with one family's template (the tests of a module run one at a time)."""
    tok = live.service.tokenizer
    saved = tok.chat_template_source, tok.chat_template_name
    tok.use_chat_template(TEMPLATES[request.param], request.param)
    tok.chat_template_source = TEMPLATES[request.param]  # None: the ChatML fallback (the generic format)
    yield request.param
    tok.use_chat_template(None, saved[1])
    tok.chat_template_source = saved[0]


def _valid(calls, named=None, one=False):
    assert calls, "no call"
    if one:
        assert len(calls) == 1
    for c in calls:
        assert c.type == "function" and c.id.startswith("call_")
        if named:
            assert c.function.name == named
        jsonschema.validate(json.loads(c.function.arguments), SCHEMAS[c.function.name])


@pytest.mark.parametrize("choice", ["required", "named"])
@pytest.mark.parametrize("parallel", [True, False])
def test_required_and_named_always_call_with_valid_arguments(live, family, choice, parallel):
    oa = live.openai()
    for seed in range(3):
        r = oa.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, temperature=1.0, seed=seed,
                                       tool_choice=NAMED if choice == "named" else choice,
                                       parallel_tool_calls=parallel)  # fmt: skip
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls", ch
        _valid(ch.message.tool_calls, "add" if choice == "named" else None, one=not parallel or choice == "named")


def test_streamed_calls_accumulate_to_the_whole_reply(live, family):
    oa = live.openai()
    kw = {"model": "m", "messages": MSGS, "tools": TOOLS, "tool_choice": "required", "temperature": 0}
    whole = oa.chat.completions.create(**kw).choices[0]
    pieces = 0
    with oa.chat.completions.stream(**kw) as stream:
        for event in stream:
            if event.type == "tool_calls.function.arguments.delta":
                pieces += 1
        final = stream.get_final_completion().choices[0]
    assert final.finish_reason == "tool_calls"
    got = [(c.function.name, c.function.arguments) for c in final.message.tool_calls]
    assert got == [(c.function.name, c.function.arguments) for c in whole.message.tool_calls]
    assert pieces >= 3  # the arguments came in pieces, not in one chunk
    _valid(final.message.tool_calls)


def test_each_call_streams_its_name_first_then_argument_pieces(live, family):
    oa = live.openai()
    chunks = list(oa.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, tool_choice=NAMED, stream=True,
                                             temperature=0))  # fmt: skip
    deltas = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or ()]
    first = deltas[0]
    assert first.index == 0 and first.id.startswith("call_") and first.type == "function"
    assert first.function.name == "add" and first.function.arguments == ""
    assert all(d.id is None and d.function.name is None for d in deltas[1:])
    args = "".join(d.function.arguments for d in deltas)
    jsonschema.validate(json.loads(args), ADD)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_a_call_cut_short_is_left_out(live):
    """max_tokens ends the reply inside a call: finish_reason length, no call with broken arguments."""
    oa = live.openai()
    kw = {"model": "m", "messages": MSGS, "tools": TOOLS, "tool_choice": "required", "temperature": 0,
          "parallel_tool_calls": False}  # fmt: skip
    whole = oa.chat.completions.create(**kw)
    assert whole.choices[0].finish_reason == "tool_calls"
    n = whole.usage.completion_tokens
    full = [(c.function.name, c.function.arguments) for c in whole.choices[0].message.tool_calls]
    cut_in_call = 0
    for k in range(n // 4, n, max(1, n // 8)):  # greedy: each cut reply is a prefix of the whole one
        ch = oa.chat.completions.create(**kw, max_tokens=k).choices[0]
        assert ch.finish_reason == "length"
        got = [(c.function.name, c.function.arguments) for c in ch.message.tool_calls or ()]
        assert got in ([], full)  # a complete call as in the whole reply, or none: never broken arguments
        cut_in_call += not got
    assert cut_in_call  # some cut fell inside the call


def test_auto_gives_text_or_valid_calls(live, family):
    oa = live.openai()
    for seed in range(3):
        ch = oa.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, temperature=1.0, seed=seed,
                                        max_tokens=120).choices[0]  # fmt: skip
        if ch.message.tool_calls:
            assert ch.finish_reason in ("tool_calls", "length")
            if ch.finish_reason == "tool_calls":
                _valid(ch.message.tool_calls)
        else:
            assert ch.finish_reason in ("stop", "length")
            if family == "generic" and ch.finish_reason == "stop":  # the `response` unwrapped
                assert not ch.message.content.lstrip().startswith('{"response"')


def test_a_history_of_calls_and_results_renders(live, family):
    oa = live.openai()
    fn = {"name": "weather", "arguments": '{"city": "Paris", "unit": "c"}'}
    call = {"id": "call_1", "type": "function", "function": fn}
    msgs = [*MSGS, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]  # fmt: skip
    r = oa.chat.completions.create(model="m", messages=msgs, tools=TOOLS, tool_choice="required", temperature=0)
    _valid(r.choices[0].message.tool_calls)


def test_none_leaves_the_tools_out(live, family):
    oa = live.openai()
    with_tools = oa.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, max_tokens=4, temperature=0)
    none = oa.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, tool_choice="none", max_tokens=4,
                                      temperature=0)  # fmt: skip
    plain = oa.chat.completions.create(model="m", messages=MSGS, max_tokens=4, temperature=0)
    assert none.usage.prompt_tokens == plain.usage.prompt_tokens < with_tools.usage.prompt_tokens
    assert none.choices[0].message.tool_calls is None


@pytest.mark.parametrize(("extra", "param"), [
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tools": None, "tool_choice": "required"}, "tool_choice"),
    ({"tools": [TOOLS[0], TOOLS[0]]}, "tools"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"function_call": "auto"}, "function_call"),
    ({"tools": [{"type": "function", "function": {"name": "x", "parameters": {
        "type": "object", "properties": {"s": {"type": "string", "not": {"pattern": "^a"}}},
        "required": ["s"]}}}]}, "tools"),  # (an optional `s` that cannot be generated is left out instead)
])  # fmt: skip
def test_what_cannot_be_honoured_is_a_400_naming_it(live, extra, param):
    body = {"messages": MSGS, "tools": TOOLS, **extra}
    body = {k: v for k, v in body.items() if v is not None}
    with live.client() as c:
        r = c.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.text


def test_replies_and_chunks_have_openai_shapes(live, family):
    """Checked by the openai package's own types, strictly (the client's parsing above is lenient)."""
    body = {"messages": MSGS, "tools": TOOLS, "tool_choice": "required", "temperature": 0}
    with live.client() as c:
        whole = c.post("/v1/chat/completions", json=body).json()
        check_openai_shape(whole)
        assert whole["choices"][0]["message"]["tool_calls"]
        with c.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
            chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    for chunk in chunks:
        check_openai_shape(chunk)
    assert any(ch["choices"][0]["delta"].get("tool_calls") for ch in chunks)


def test_the_tools_count_in_the_prompt_precheck(live):
    """Tools far longer than the context are refused before tokenizing, as a long message is."""
    limit = live.service.limits.max_prompt_chars
    huge = [{"type": "function", "function": {"name": "f", "description": "x" * (limit + 10)}}]
    with live.client() as c:
        r = c.post("/v1/chat/completions", json={"messages": MSGS, "tools": huge, "max_tokens": 1})
        assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text
        assert "characters" in r.json()["error"]["message"]
        r = c.post("/v1/chat/completions", json={"messages": MSGS, "tools": huge, "tool_choice": "none",
                                                 "max_tokens": 1})  # fmt: skip
        assert r.status_code == 200, r.text  # without the tools in the prompt it is short


def test_ollama_tools_on_a_synthetic_template(live, family):
    """Ollama's chat (no tool_choice: auto) with its client: calls, when made, come with arguments as objects."""
    ollama = pytest.importorskip("ollama")
    cl = ollama.Client(host=live.url)
    r = cl.chat(model="m", messages=MSGS, tools=TOOLS, options={"temperature": 1.0, "seed": 1, "num_predict": 120})
    for call in r.message.tool_calls or ():
        assert isinstance(call.function.arguments, dict)
        jsonschema.validate(call.function.arguments, SCHEMAS[call.function.name])
    assert r.done


def test_ollama_refusals_and_tool_results_by_name(live):
    with live.client() as c:
        r = c.post("/api/chat", json={"model": "m", "messages": MSGS, "tools": TOOLS, "format": "json",
                                      "stream": False})  # fmt: skip
        assert r.status_code == 400 and "format" in str(r.json()["error"]), r.text  # Ollama's error shape
        show = c.post("/api/show", json={"model": live.service.generator.id}).json()
        assert "tools" in show["capabilities"]  # every model: its template's syntax, else the generic format
        history = [*MSGS, {"role": "assistant", "content": "", "tool_calls": [
                       {"function": {"name": "weather", "arguments": {"city": "Paris", "unit": "c"}}}]},
                   {"role": "tool", "tool_name": "weather", "content": "sunny"}]  # fmt: skip
        r = c.post("/api/chat", json={"model": "m", "messages": history, "tools": TOOLS, "stream": False,
                                      "options": {"num_predict": 2}})  # fmt: skip
        assert r.status_code == 200, r.text
    # the generic prompt names the result's tool (Ollama's `tool_name`)
    from llamay.native.server.ollama_schemas import OllamaChatRequest
    from llamay.native.server.tools import message_dicts, plan_for

    msgs = message_dicts(OllamaChatRequest(model="m", messages=history).messages)
    rendered = plan_for(None, OllamaChatRequest(model="m", messages=history, tools=TOOLS).tools).messages(msgs)
    assert json.loads(rendered[-1]["content"]) == {"tool_response": {"tool": "weather", "content": "sunny"}}


# -- the default model ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smol():
    live = start_server(registry_model(SMOLLM2), n_ctx=1024, parallel=2, queue=4)
    yield live
    live.stop()


@pytest.mark.slow
def test_the_default_model_calls_tools(smol):
    """SmolLM2 (ChatML, no tools in its template) asked for the weather: the generic format makes it call."""
    oa = smol.openai()
    r = oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "What is the weather in Paris?"}],
                                   tools=TOOLS[:1], temperature=0)  # fmt: skip
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls"
    _valid(ch.message.tool_calls)
    assert "paris" in json.loads(ch.message.tool_calls[0].function.arguments)["city"].lower()
    for choice in ("required", {"type": "function", "function": {"name": "weather"}}):
        r = oa.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, tool_choice=choice, temperature=0.8,
                                       seed=3)  # fmt: skip
        _valid(r.choices[0].message.tool_calls)


@pytest.mark.slow
def test_the_default_model_with_the_ollama_client(smol):
    ollama = pytest.importorskip("ollama")
    cl = ollama.Client(host=smol.url)
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = cl.chat(model="m", messages=msgs, tools=TOOLS[:1], options={"temperature": 0})
    calls = r.message.tool_calls
    assert calls and all(c.function.name == "weather" for c in calls)
    for c in calls:
        assert isinstance(c.function.arguments, dict)
        jsonschema.validate(c.function.arguments, WEATHER)
    streamed = [c for part in cl.chat(model="m", messages=msgs, tools=TOOLS[:1], options={"temperature": 0},
                                      stream=True) for c in part.message.tool_calls or ()]  # fmt: skip
    assert [(c.function.name, c.function.arguments) for c in streamed] == [
        (c.function.name, c.function.arguments) for c in calls
    ]
    history = [*msgs, {"role": "assistant", "content": "", "tool_calls": [calls[0].model_dump()]},
               {"role": "tool", "content": "sunny, 21 C"}]  # fmt: skip
    answer = cl.chat(model="m", messages=history, options={"temperature": 0, "num_predict": 24})
    assert answer.message.content  # without tools: a text answer after the result


def test_a_control_token_marker_reaches_the_parser_as_text():
    """Mistral's `[TOOL_CALLS]` is a control token: a reply's decoder shows it (and no other control token)."""
    from llamay.native.server.schemas import ChatCompletionRequest
    from llamay.native.server.tools import plan_for, reply_decoder
    from llamay.tools import parse_reply
    from tests.tokenizer.vocabs import tokenizer
    from tests.tools.test_grammar import MarkerTokenizer

    tok = tokenizer("stories260K")
    mt = MarkerTokenizer(tok)
    plan = plan_for(MISTRAL, ChatCompletionRequest(messages=MSGS, tools=TOOLS).tools, "required")
    decoder = reply_decoder(mt, plan)
    body = tok.encode('[{"name": "add", "arguments": {"a": 1, "b": true}}]', add_special=False)
    text = decoder.push(mt.marker) + decoder.push(tok.bos_id) + decoder.push_many(body) + decoder.flush()
    assert text.startswith("[TOOL_CALLS]")  # the marker shown, BOS (a control token) not
    content, calls = parse_reply(plan.syntax, text)
    assert content is None and [c["name"] for c in calls] == ["add"]
    assert reply_decoder(tok, None).push(tok.bos_id) == ""


def test_the_library_reads_the_calls_the_server_reads(tmp_path):
    """On a vocabulary where `[TOOL_CALLS]` is a control token, the library's chat gives the same calls as the
    server's for the same greedy request: both decoders show the marker (`ToolPlan.decoder`)."""
    import llamay
    from tests.api.test_model import ADD_TOOL, mistral_tool_reply

    path = tmp_path / "tiny-mistral-tools.gguf"
    marker = write_mistral_tools(path)
    with llamay.load(path) as model:
        content, calls = model.tool_calls(mistral_tool_reply(model, marker))
    live = start_server(path, n_ctx=2048, parallel=1, queue=2)
    try:
        r = live.openai().chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Add 2 and 3."}], tools=[ADD_TOOL], tool_choice="required",
            max_tokens=200, temperature=0, logit_bias={str(marker): 100})  # fmt: skip
    finally:
        live.stop()
    served = [(c.function.name, json.loads(c.function.arguments)) for c in r.choices[0].message.tool_calls]
    assert calls and [(c["name"], c["arguments"]) for c in calls] == served
    assert content is None and not r.choices[0].message.content
