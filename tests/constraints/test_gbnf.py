"""GBNF: llama.cpp's grammar integration cases (as data), its example grammars, parse errors, printing."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from llamay.constraints import ConstraintError, compile_grammar, parse_gbnf
from llamay.constraints.automaton import Automaton
from llamay.constraints.grammar import Grammar
from tests.constraints.helpers import automaton, sentences

DATA = Path(__file__).parent / "data"
INTEGRATION = json.loads((DATA / "llamacpp_grammar_integration.json").read_text())
GRAMMAR_SAMPLES = json.loads((DATA / "grammar_samples.json").read_text())


@pytest.mark.parametrize("case", [c for c in INTEGRATION["cases"] if "gbnf" in c], ids=lambda c: c["name"])
def test_llamacpp_integration_grammar(case):
    a = automaton(case["gbnf"])
    assert [s for s in case["pass"] if not a.accepts_bytes(s.encode())] == []
    assert [s for s in case["fail"] if a.accepts_bytes(s.encode())] == []


@pytest.mark.parametrize("case", INTEGRATION["build_failures"], ids=lambda c: c["name"])
def test_llamacpp_grammars_that_must_not_build(case):
    with pytest.raises(ConstraintError):
        compile_grammar(parse_gbnf(case["gbnf"]))


@pytest.mark.parametrize("name", sorted(GRAMMAR_SAMPLES))
def test_llamacpp_example_grammars(name):
    a = automaton((DATA / "grammars" / name).read_text())
    samples = GRAMMAR_SAMPLES[name]
    assert [s for s in samples["pass"] if not a.accepts_bytes(s.encode())] == []
    assert [s for s in samples["fail"] if a.accepts_bytes(s.encode())] == []


@pytest.mark.parametrize("name", sorted(GRAMMAR_SAMPLES))
def test_printed_grammar_has_the_same_language(name):
    g = parse_gbnf((DATA / "grammars" / name).read_text())
    again = parse_gbnf(g.to_gbnf())
    original, printed = Automaton(compile_grammar(g)), Automaton(compile_grammar(again))
    rng = random.Random(7)
    for s in sentences(original.program, rng, 25):
        assert printed.accepts_bytes(s), s
    for s in sentences(printed.program, rng, 25):
        assert original.accepts_bytes(s), s


@pytest.mark.parametrize(
    ("gbnf", "where", "what"),
    [
        ('root ::= "a" (\n  "b"', "line 2, column 6", "expecting ')'"),
        ('root ::= "abc', "line 1, column 14", "unterminated string"),
        ("root ::= [a-", "line 1, column 13", "unterminated character class"),
        ('root ::= "\\q"', "line 1, column 11", "unknown escape"),
        ('root ::= "\\x4"', "line 1, column 11", "hex digits"),
        ("root ::= *", "line 1, column 10", "expecting an item"),
        ('root ::= "a"{2,1}', "line 1, column 13", "maximum below"),
        ('root ::= "a"\nitem = "b"', "line 2, column 6", "expecting ::="),
        ('root ::= "a" )', "line 1, column 14", "expecting newline"),
        ("root ::= thing", "line 1, column 10", "undefined rule 'thing'"),
    ],
)
def test_parse_errors_name_line_and_column(gbnf, where, what):
    with pytest.raises(ConstraintError) as e:
        compile_grammar(parse_gbnf(gbnf))
    assert where in str(e.value) and what in str(e.value)


@pytest.mark.parametrize(
    ("gbnf", "yes", "no"),
    [
        ('root ::= "\\x41\\u00e9\\U0001F600"', ["Aé😀"], ["A", "Ae😀"]),
        ("root ::= [^a-z]", ["A", "é", "😀", "\n"], ["a", "", "AB"]),
        ("root ::= . .", ["ab", "é😀", "\n\t"], ["a", "abc"]),
        ("root ::= [\\]\\[\\\\-]+", ["[]\\-", "-"], ["a"]),
        ('root ::= ("ab" | "c")* "!"', ["!", "abcab!", "cc!"], ["a!", "abab"]),
        ('root ::= "x"{0} "y"', ["y"], ["xy"]),
        ("root ::= [a]{2,} | [b]{,}".replace("{,}", "*"), ["aa", "aaaa", "", "bbb"], ["a", "ab"]),
        ('# comment\nroot ::= a | b # trailing\na ::= "1"\nb ::= "2" |\n  "3"\n', ["1", "2", "3"], ["4"]),
        ("root ::= [ぁ-ゟ]+", ["ひらがな"], ["カ", "a"]),
    ],
)
def test_terminals_escapes_and_repetition(gbnf, yes, no):
    a = automaton(gbnf)
    assert all(a.accepts_bytes(s.encode()) for s in yes)
    assert not any(a.accepts_bytes(s.encode()) for s in no)


def test_a_rule_defined_twice_keeps_the_last_definition():
    a = automaton('root ::= "a"\nroot ::= "b"')
    assert a.accepts_bytes(b"b") and not a.accepts_bytes(b"a")


def test_invalid_utf8_is_never_accepted():
    a = automaton("root ::= .*")
    for bad in (b"\xc3", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xff"):
        assert not a.accepts_bytes(bad), bad
    assert a.accepts_bytes("héllo😀".encode())
    assert a.accepts_bytes(b"\xc3", complete=False)  # the start of a character: a valid prefix


def test_nullable_repetition_is_cut_not_looped():
    with pytest.raises(ConstraintError, match="left recursion"):
        compile_grammar(parse_gbnf('root ::= ("a"?)* "b"'))


def test_programmatic_grammar_errors():
    with pytest.raises(ConstraintError, match="no rule named 'start'"):
        compile_grammar(Grammar(parse_gbnf('root ::= "a"').rules, root="start"))
