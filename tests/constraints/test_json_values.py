"""Enums of many values (json_values.enum_trie): a character trie whose nodes below its entry are lazy rules, built
as the automaton reaches them. The language is checked against the values themselves (every value accepted,
near misses refused, generated sentences among the values) and against the eager trie (lexicon.word_trie)."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from llamay.constraints import compile_grammar, schema_to_grammar
from llamay.constraints.automaton import Automaton
from llamay.constraints.json_schema import SchemaCompiler
from llamay.constraints.json_values import enum_trie
from llamay.constraints.lexicon import word_trie
from tests.constraints.helpers import sentences

NAMES = [f"r_{part}{i}" for part in ("Antialiasing", "AntialiasingMode", "Bloom", "Shadows") for i in range(600)]


def _trie_rules(grammar, root: str) -> tuple[set[str], set[str]]:
    """(built, unbuilt) rules of the trie named after `root`."""
    built = {n for n in grammar.rules if n.startswith(root)}
    return built, {n for n in grammar.lazy if n.startswith(root)}


def test_an_enum_of_thousands_builds_its_entry_and_the_branches_walked():
    schema = {"type": "object", "properties": {"cvar": {"enum": NAMES}}, "required": ["cvar"]}
    grammar = schema_to_grammar(schema)
    root = next(n for n in grammar.rules if n.endswith("enum"))
    built, unbuilt = _trie_rules(grammar, root)
    assert built == {root} and 0 < len(unbuilt) <= 8  # the entry, its children waiting
    aut = Automaton(compile_grammar(grammar))
    assert aut.accepts_bytes(b'{"cvar":"r_AntialiasingMode123"}')
    built, unbuilt = _trie_rules(grammar, root)
    eager = word_trie([json.dumps(v) for v in NAMES], (f"n{i}" for i in range(10**6)).__next__)
    assert len(built) <= 8 < len(eager)  # the nodes of one value's path, of the trie's 2,000 and more
    for doc in ('{"cvar":"r_Bloom599"}', '{"cvar":"r_Shadows0"}', '{"cvar":"r_Antialiasing42"}'):
        assert aut.accepts_bytes(doc.encode()), doc
    for bad in ('{"cvar":"r_Bloom600"}', '{"cvar":"r_Bloom"}', '{"cvar":"r_Shadows00"}', '{"cvar":"r_"}'):
        assert not aut.accepts_bytes(bad.encode()), bad


@settings(max_examples=120, deadline=None)
@given(st.lists(st.text(alphabet='ab"é\\\U0001f600', min_size=0, max_size=6), min_size=9, max_size=40, unique=True))
def test_an_enum_trie_accepts_its_values_and_nothing_else(values):
    aut = Automaton(compile_grammar(schema_to_grammar({"enum": values})))
    texts = {json.dumps(v, ensure_ascii=False) for v in values}
    for t in texts:
        assert aut.accepts_bytes(t.encode())
        for cut in (t[:-1], t[:-2] + t[-1:], t + "a", t[:1] + "b" + t[1:]):  # near misses
            assert aut.accepts_bytes(cut.encode()) == (cut in texts), cut
    for s in sentences(aut.program, random.Random(0), 30):
        assert s.decode().rstrip(" \t\n\r") in texts  # (schema_to_grammar: the value, then space)


def test_an_enum_met_again_is_one_rule_and_made_again_after_a_rollback():
    c = SchemaCompiler({})
    texts = [json.dumps(n) for n in NAMES[:50]]
    first = enum_trie(c, texts, "a-enum")
    assert enum_trie(c, list(reversed(texts)), "b-enum") == first  # (the same values: the same rule)
    mark = c.checkpoint()
    again = enum_trie(c, texts[:20], "c-enum")
    c.rollback(mark)
    assert again not in c.rules and not any(n.startswith(again) for n in c.lazy)
    made = enum_trie(c, texts[:20], "c-enum")
    assert made in c.rules and c.rules[made] is not None
