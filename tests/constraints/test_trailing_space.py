"""trailing_space.py: the constraints' JSON ends with its value. Their language is the grammar's without the
whitespace after the root value (sentences both ways, on the test schemas and json_object), refusals still
name the root, and at a finished value a model can only stop."""

from __future__ import annotations

import random

import pytest

from llamay.constraints import (
    ConstraintError,
    compile_grammar,
    json_constraint,
    json_schema_constraint,
    schema_to_grammar,
)
from llamay.constraints.automaton import Automaton
from llamay.constraints.gbnf import parse
from llamay.constraints.json_any import json_gbnf
from llamay.constraints.json_schema import LLAMACPP
from llamay.constraints.trailing_space import without_trailing_space
from llamay.gguf import open_gguf
from llamay.tokenizer import load_tokenizer
from tests import paths
from tests.constraints.helpers import SCHEMAS, sentences

WHITESPACE = b" \t\n\r"
TREE = {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/t"}}]}
RECURSIVE = {"$ref": "#/$defs/t", "$defs": {"t": TREE}}


def _grammars():
    for name in sorted(SCHEMAS)[::3]:
        yield name, lambda s=SCHEMAS[name]: schema_to_grammar(s, max_string_length=8, max_items=2)
    yield "recursive", lambda: schema_to_grammar(RECURSIVE)
    yield "recursive llama.cpp", lambda: schema_to_grammar(RECURSIVE, **LLAMACPP)
    for root in ("value", "object", "array"):
        yield f"json {root}", lambda r=root: parse(json_gbnf(r, 8, 2))


@pytest.mark.parametrize("name, make", list(_grammars()), ids=lambda x: x if isinstance(x, str) else "")
def test_the_language_is_the_grammars_without_trailing_whitespace(name, make):
    before, after = compile_grammar(make()), compile_grammar(without_trailing_space(make()))
    a, b = Automaton(before), Automaton(after)
    rng = random.Random(name)
    ended = 0
    for text in sentences(before, rng, 30, budget=80):
        assert b.accepts_bytes(text.rstrip(WHITESPACE)), text  # (the value alone: still a sentence)
        if a.accepts_bytes(text.rstrip(WHITESPACE) + b" "):
            ended += 1
            assert not b.accepts_bytes(text.rstrip(WHITESPACE) + b" "), text  # (what followed it: gone)
    assert ended  # (the grammar did allow whitespace after its value)
    for text in sentences(after, rng, 30, budget=80):
        assert a.accepts_bytes(text) and text == text.rstrip(WHITESPACE), text


def test_refusals_still_name_the_root():
    endless = {"$ref": "#/$defs/a", "$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}}
    with pytest.raises(ConstraintError) as plain:
        compile_grammar(schema_to_grammar(endless))
    with pytest.raises(ConstraintError) as ended:
        json_schema_constraint(endless, _tok())
    assert str(ended.value) == str(plain.value) and "'root'" in str(plain.value)


def _tok():
    with open_gguf(paths.stories("f32")) as f:
        return load_tokenizer(f)


@pytest.mark.parametrize("make, text", [
    (lambda tok: json_schema_constraint({"type": "object", "properties": {"n": {"type": "integer"}}}, tok),
     '{"n":12}'),
    (lambda tok: json_schema_constraint({"type": "integer"}, tok), "12"),
    (lambda tok: json_constraint(tok), '{"a":[1]}'),
])  # fmt: skip
def test_at_a_finished_value_only_the_end_is_left(make, text):
    """After a whole value (an object's "}", or an integer that may still grow), no token that starts with
    whitespace is allowed, and the state is complete (the end of generation is allowed)."""
    tok = _tok()
    c = make(tok)
    pieces = {tok.decode([t]): t for t in reversed(range(tok.n_vocab))}  # (a token per character of the text)
    st = c.start()
    for ch in text:
        assert c.accepts(st, pieces[ch]), text
        st = c.advance(st, pieces[ch])
    assert c.is_complete(st)
    spaces = [t for t in range(tok.n_vocab) if tok.decode([t])[:1].isspace()]
    assert [tok.decode([t]) for t in spaces if c.accepts(st, t)] == []
    inner = c.advance(c.start(), pieces[text[0]])  # (whitespace inside a value is as before: after its "{")
    assert any(c.accepts(inner, t) for t in spaces) == (text[0] == "{")
