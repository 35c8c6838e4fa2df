"""The grammars of tool calls: whatever a sampler picks among the allowed tokens is a reply of calls whose
arguments validate against their tool's JSON Schema (`jsonschema` is the reference), for every syntax and
`tool_choice`; "auto" is free until the syntax's trigger, then held to the grammar (lazy.py)."""

from __future__ import annotations

import json
import random

import pytest

from llamay.tools import GENERIC, HERMES, LLAMA3, MISTRAL, SYNTAXES, parse_reply, plan_tools, tool_vocab
from llamay.tools.lazy import LazyConstraint
from llamay.tools.plan import ToolRequestError
from tests.tokenizer.vocabs import tokenizer

UNIT = {"enum": ["c", "f"]}
TOOLS = [
    {"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 6}, "unit": UNIT},
        "required": ["city", "unit"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "$defs": {"n": {"type": "integer", "minimum": -5, "maximum": 99}},
        "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"type": "boolean"}}, "required": ["a"]}}},
    {"type": "function", "function": {"name": "now"}},  # no parameters: {}
]  # fmt: skip
SCHEMAS = {t["function"]["name"]: t["function"].get("parameters", {"type": "object", "maxProperties": 0})
           for t in TOOLS}  # fmt: skip
NAMED = {"type": "function", "function": {"name": "add"}}


@pytest.fixture(scope="module")
def tok():
    return tokenizer("stories260K")


def _validate(name, arguments):
    """Against the schema with `jsonschema` (natively); where it is missing (Pyodide), the call's shape only."""
    try:
        import jsonschema
    except ImportError:
        schema = SCHEMAS[name]
        assert isinstance(arguments, dict) and set(schema.get("required", ())) <= set(arguments)
        assert set(arguments) <= set(schema.get("properties", {}))
        return
    jsonschema.validate(arguments, SCHEMAS[name])


def _walk(constraint, tok, rng, steps=500, prefix=()):
    """Random tokens among the allowed ones (after `prefix`) until an end-of-generation token."""
    st = constraint.start()
    out = []
    for t in prefix:
        st = constraint.advance(st, t)
        out.append(t)
    for _ in range(steps):
        allowed = constraint.allowed(st).tokens()
        assert allowed, "a dead end"
        t = rng.choice(allowed)
        if t in tok.eos_ids:
            return out, True
        assert constraint.accepts(st, t)
        st = constraint.advance(st, t)
        out.append(t)
    return out, False


@pytest.mark.parametrize("syntax", SYNTAXES.values(), ids=SYNTAXES.keys())
@pytest.mark.parametrize("choice", ["required", "named"])
@pytest.mark.parametrize("parallel", [True, False])
def test_required_and_named_always_give_valid_calls(tok, syntax, choice, parallel):
    plan = plan_tools(None, TOOLS, NAMED if choice == "named" else choice, parallel, syntax=syntax)
    c = plan.constraint(tok)
    rng = random.Random(f"{syntax.name}{choice}{parallel}")
    checked = 0
    for _ in range(4):
        ids, ended = _walk(c, tok, rng)
        if not ended:
            continue  # blanks and strings may run long; what ended is what is checked
        checked += 1
        content, calls = parse_reply(syntax, tok.decode(ids))
        assert content is None and calls, tok.decode(ids)
        assert all(c["complete"] for c in calls)
        if choice == "named":
            assert {c["name"] for c in calls} == {"add"}
        if not parallel or choice == "named" or not syntax.parallel:
            assert len(calls) == 1
        for call in calls:
            _validate(call["name"], json.loads(call["arguments"]))
    assert checked >= 2


def test_generic_auto_is_a_call_or_a_response(tok):
    plan = plan_tools(None, TOOLS, "auto", True)
    assert plan.syntax is GENERIC and not plan.required
    c = plan.constraint(tok)
    rng = random.Random(1)
    kinds = set()
    for _ in range(12):
        ids, ended = _walk(c, tok, rng, steps=300)
        if not ended:
            continue
        text = tok.decode(ids)
        body = json.loads(text)
        assert set(body) in ({"tool_calls"}, {"response"})
        content, calls = parse_reply(GENERIC, text)
        if "response" in body:
            assert content == body["response"] and calls == []
        else:
            assert len(calls) == len(body["tool_calls"])
        kinds.add(next(iter(body)))
    assert kinds  # at least one walk ended


@pytest.mark.parametrize("syntax", [HERMES, MISTRAL])
def test_auto_is_free_until_the_trigger_then_held(tok, syntax):
    plan = plan_tools(None, TOOLS, "auto", True, syntax=syntax)
    c = plan.constraint(tok)
    assert isinstance(c, LazyConstraint)
    st = c.start()
    free = tok.encode('Once upon a time {"x": 1', add_special=False)
    for t in free:  # any text, JSON included
        assert c.accepts(st, t)
        st = c.advance(st, t)
    assert c.is_complete(st)  # the reply may end as text
    assert next(iter(tok.eos_ids)) in c.allowed(st)
    trigger = tok.encode(" " + syntax.opener, add_special=False)
    rng = random.Random(syntax.name)
    ids, ended = _walk(c, tok, rng, prefix=[*free, *trigger])
    assert ended
    content, calls = parse_reply(syntax, tok.decode(ids))
    assert content.startswith("Once upon a time") and calls
    for call in calls:
        _validate(call["name"], json.loads(call["arguments"]))
    st = c.start()
    for t in trigger:
        st = c.advance(st, t)
    bad = tok.encode("hello", add_special=False)[0]
    assert not c.accepts(st, bad) and bad not in c.allowed(st)  # after the trigger: the grammar only


def test_llama3_auto_triggers_on_a_leading_brace_only(tok):
    plan = plan_tools(None, TOOLS, "auto", True, syntax=LLAMA3)
    c = plan.constraint(tok)
    st = c.start()
    for t in tok.encode('Hi {"name": 3', add_special=False):  # text first: braces later are text
        st = c.advance(st, t)
    assert c.is_complete(st)
    st = c.start()
    brace = tok.encode("{", add_special=False)
    for t in brace:
        st = c.advance(st, t)
    assert not c.is_complete(st)  # a call has begun: it must be finished
    assert not c.accepts(st, tok.encode("Hi", add_special=False)[-1])


class MarkerTokenizer:
    """stories260K with one more token, a control token `[TOOL_CALLS]` (as Mistral's vocabularies have it)."""

    def __init__(self, base):
        self.base = base
        self.n_vocab = base.n_vocab + 1
        self.eos_ids = base.eos_ids
        self.marker = base.n_vocab

    def encode(self, text, add_special=True, parse_special=True):
        if parse_special and text == "[TOOL_CALLS]":
            return [self.marker]
        return self.base.encode(text, add_special=add_special, parse_special=parse_special)

    def token_bytes(self, i, special=True):
        if i == self.marker:
            return b"[TOOL_CALLS]" if special else b""
        return self.base.token_bytes(i, special)


def test_a_control_token_marker_is_written_and_shown(tok):
    mt = MarkerTokenizer(tok)
    plan = plan_tools(None, TOOLS, "required", True, syntax=MISTRAL)
    assert plan.shown_tokens(mt) == {mt.marker}
    vocab = tool_vocab(mt, MISTRAL)
    assert vocab.token_bytes[mt.marker] == b"[TOOL_CALLS]" and tool_vocab(mt, MISTRAL) is vocab  # kept
    c = plan.constraint(mt)
    st = c.start()
    assert c.accepts(st, mt.marker)  # the one token of the marker
    lazy = plan_tools(None, TOOLS, "auto", True, syntax=MISTRAL).constraint(mt)
    st = lazy.advance(lazy.start(), tok.encode("Sure", add_special=False)[0])
    st = lazy.advance(st, mt.marker)
    assert not lazy.is_complete(st)  # the control token triggered the grammar


@pytest.mark.parametrize(("tools", "choice", "field"), [
    (TOOLS, "sometimes", "tool_choice"),
    (TOOLS, {"type": "function", "function": {"name": "nope"}}, "tool_choice"),
    (TOOLS, {"type": "function"}, "tool_choice"),
    (None, "required", "tool_choice"),
    ([TOOLS[0], TOOLS[0]], "auto", "tools"),
])  # fmt: skip
def test_requests_that_cannot_be_honoured_name_their_field(tools, choice, field):
    with pytest.raises(ToolRequestError) as e:
        plan_tools(None, tools, choice, True)
    assert e.value.field == field


def test_a_schema_the_engine_cannot_enforce_is_refused_naming_the_tools(tok):
    # a required string not matching a pattern: the negation of a pattern has no grammar (docs/constraints.md)
    odd = {"type": "object", "properties": {"s": {"type": "string", "not": {"pattern": "^a"}}}, "required": ["s"]}
    tools = [{"type": "function", "function": {"name": "enc", "parameters": odd}}]
    with pytest.raises(ToolRequestError) as e:
        plan_tools(None, tools, "required", True).constraint(tok)
    assert e.value.field == "tools" and "enc" in str(e.value)


def test_none_and_no_tools_plan_nothing():
    assert plan_tools(None, TOOLS, "none", True) is None
    assert plan_tools(None, None, None, None) is None
    assert plan_tools(None, [], "auto", None) is None


def test_the_generic_prompt_describes_the_tools_and_rewrites_the_history():
    plan = plan_tools(None, TOOLS, "auto", True)
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]  # fmt: skip
    out = plan.messages(history)
    assert out[0]["role"] == "system" and '"weather"' in out[0]["content"] and "`tool_call`" in out[0]["content"]
    assert json.loads(out[2]["content"]) == {"tool_call": {"name": "weather", "arguments": {"city": "Paris"}}}
    assert out[3]["role"] == "user"
    assert json.loads(out[3]["content"]) == {"tool_response": {"tool": "weather", "content": "sunny"}}
    two = [*history, {"role": "tool", "name": "add", "content": "3"}, {"role": "user", "content": "thanks"}]
    out = plan.messages(two)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "user"]  # results in one turn
    assert [json.loads(line)["tool_response"]["tool"] for line in out[3]["content"].splitlines()] == ["weather", "add"]
    assert plan.template_tools is None and plan.prompt_chars > len(json.dumps(TOOLS))
    native = plan_tools("<tool_call>", TOOLS, "auto", True)
    assert native.syntax is HERMES and native.messages(history) is history and native.template_tools == TOOLS


@pytest.mark.parametrize(("syntax", "text"), [(HERMES, "Hi <tool_call"), (MISTRAL, "ok [TOOL_CALLS"), (LLAMA3, ""),
                                              (LLAMA3, "  ")])  # fmt: skip
def test_auto_allows_exactly_what_it_accepts(syntax, text):
    """The free state's mask (computed from the tokens that hold a trigger's last byte) is every token `accepts`
    takes, by a pass over the whole vocabulary (SmolLM2's: tokens such as `>\n\n` or `{}` complete a trigger
    into what the grammar refuses)."""
    tok = tokenizer("smollm2")
    c = plan_tools(None, TOOLS, "auto", True, syntax=syntax).constraint(tok)
    st = c.start()
    for t in tok.encode(text, add_special=False) if text else ():
        st = c.advance(st, t)
    assert st[0] == "free"
    want = [t for t in range(tok.n_vocab) if c.accepts(st, t)]
    assert c.allowed(st).tokens() == want
    assert len(want) < tok.n_vocab


@pytest.mark.parametrize("choice", ["auto", "required"])
def test_a_tool_the_engine_cannot_enforce_is_refused_beside_others_not_left_out(tok, choice):
    odd = {"type": "object", "properties": {"s": {"type": "string", "not": {"pattern": "^a"}}}, "required": ["s"]}
    tools = [*TOOLS, {"type": "function", "function": {"name": "enc", "parameters": odd}}]
    with pytest.raises(ToolRequestError) as e:
        plan_tools(None, tools, choice, True).constraint(tok)
    assert e.value.field == "tools" and "'enc'" in str(e.value)


POINTERS = {
    "alias": ({"type": "object", "properties": {"name": {"type": "string", "maxLength": 3},
                                                "alias": {"$ref": "#/properties/name"}}, "required": ["alias"]},
              [{"alias": "ab"}, {"alias": "abcd"}, {"alias": 1}, {"name": "x", "alias": "y"}, {}]),
    "root": ({"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#"}}, "required": ["v"]},
             [{"v": 1}, {"v": 1, "next": {"v": 2}}, {"v": 1, "next": {"w": 2}}, {"v": 1, "next": 3}]),
    "inside a definition": ({"definitions": {"n": {"type": "object", "properties": {"k": {"enum": [1, 2]}}}},
                             "type": "object", "properties": {"a": {"$ref": "#/definitions/n/properties/k"}}},
                            [{"a": 1}, {"a": 2}, {"a": 3}, {"a": "1"}, {}]),
}  # fmt: skip


@pytest.mark.parametrize("name", POINTERS)
def test_a_tools_pointers_point_into_its_parameters(name):
    """A tool's `$ref` pointers (`#/properties/name`, `#`, into a definition) resolve in its parameters, not in
    the call wrapped around them (where `#/properties/name` was the function's name: refused as "not in the
    schema" or, worse, the name's const): jsonschema on the combined call schema and the compiled grammar
    both agree with jsonschema on the tool's own parameters, document by document."""
    jsonschema = pytest.importorskip("jsonschema")
    from llamay.constraints import compile_grammar, schema_to_grammar
    from llamay.constraints.automaton import Automaton
    from llamay.tools.grammar import call_schema

    params, docs = POINTERS[name]
    tools = [{"type": "function", "function": {"name": "f", "parameters": params}},
             {"type": "function", "function": {"name": "name", "parameters": {"type": "object"}}}]  # fmt: skip
    combined = call_schema(tools, "arguments")
    aut = Automaton(compile_grammar(schema_to_grammar(combined)))
    for doc in docs:
        valid = jsonschema.Draft202012Validator(params).is_valid(doc)
        call = {"name": "f", "arguments": doc}
        assert jsonschema.Draft202012Validator(combined).is_valid(call) == valid, doc
        assert aut.accepts_bytes(json.dumps(call, separators=(",", ":")).encode()) == valid, doc
