"""Tool calls out of replies: each syntax's calls, text around them, and a stream cut anywhere gives the same
events as the whole reply (the pieces of each call's arguments concatenate to its JSON)."""

from __future__ import annotations

import json
import random

import pytest

from llamay.tools import SYNTAXES, ToolStream, collect, parse_reply

W = {"city": 'Pa"r{is}', "days": [1, {"n": 2}]}  # braces and quotes inside strings, nesting
REPLIES = [
    (
        "hermes",
        f'Let me look.\n<tool_call>\n{{"name": "weather", "arguments": {json.dumps(W)}}}\n</tool_call>\n'
        '<tool_call>\n{"name": "add", "arguments": {}}\n</tool_call>',
        "Let me look.\n",
        [("weather", W), ("add", {})],
    ),
    ("llama3", f' {{"name": "weather", "parameters": {json.dumps(W)}}}', None, [("weather", W)]),
    (
        "mistral",
        f'[TOOL_CALLS] [{{"name": "weather", "arguments": {json.dumps(W)}}}, {{"name": "add", "arguments":'
        ' {"a": 1}}]',
        None,
        [("weather", W), ("add", {"a": 1})],
    ),
    ("generic", f'{{"tool_call": {{"name": "weather", "arguments": {json.dumps(W)}}}}}', None, [("weather", W)]),
    (
        "generic",
        '{ "tool_calls" : [ {"name":"add","arguments":{"a":1}} , {"name":"add","arguments":{"a":2}} ] }',
        None,
        [("add", {"a": 1}), ("add", {"a": 2})],
    ),
    ("generic", '{"response": "Hi \\u00e9, \\"you\\"\\n"}', 'Hi é, "you"\n', []),
    ("generic", "plain text, no JSON", "plain text, no JSON", []),
    ("hermes", "no call here <tool but text", "no call here <tool but text", []),
    ("mistral", "[TOOL_CALLS] not json", "[TOOL_CALLS] not json"[len("[TOOL_CALLS]") :], []),
]


def _streamed(syntax, text, cuts):
    stream = ToolStream(SYNTAXES[syntax])
    events, last = [], 0
    for cut in [*cuts, len(text)]:
        events += stream.feed(text[last:cut])
        last = cut
    return events + stream.end()


@pytest.mark.parametrize(("syntax", "text", "content", "calls"), REPLIES)
def test_whole_replies(syntax, text, content, calls):
    got_content, got = parse_reply(SYNTAXES[syntax], text)
    assert got_content == content
    assert [(c["name"], json.loads(c["arguments"])) for c in got] == calls
    assert all(c["complete"] for c in got)


@pytest.mark.parametrize(("syntax", "text", "content", "calls"), REPLIES)
def test_a_stream_cut_anywhere_parses_as_the_whole(syntax, text, content, calls):
    whole = parse_reply(SYNTAXES[syntax], text)
    assert collect(_streamed(syntax, text, range(1, len(text)))) == whole  # a character at a time
    rng = random.Random(len(text))
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 8))))
        assert collect(_streamed(syntax, text, cuts)) == whole


def test_events_name_a_call_before_its_arguments():
    events = _streamed("hermes", REPLIES[0][1], range(1, len(REPLIES[0][1])))
    kinds = [e[0] for e in events if e[0] != "content"]
    assert kinds[0] == "name" and kinds.count("name") == 2 and kinds.count("end") == 2
    first_args = next(i for i, e in enumerate(events) if e[0] == "args")
    assert events[first_args - 1][0] == "name" or events[first_args - 1][0] == "args"
    assert sum(1 for e in events if e[0] == "args" and e[1] == 0) > 10  # the arguments came in pieces


def test_a_call_cut_short_is_incomplete():
    text = '<tool_call>\n{"name": "weather", "arguments": {"city": "Par'
    content, calls = parse_reply(SYNTAXES["hermes"], text)
    assert content is None and calls == [{"name": "weather", "arguments": '{"city": "Par', "complete": False}]
    cut = '{"tool_calls": [{"name": "add", "arguments": {"a": 1}}, {"na'  # the next call's head: no content
    assert parse_reply(SYNTAXES["generic"], cut) == (None, [{"name": "add", "arguments": '{"a": 1}', "complete": True}])
