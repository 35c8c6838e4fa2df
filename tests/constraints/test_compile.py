"""The program compiler: counted repetitions (REP) accept exactly what their copies accept, and a repetition's
bound changes no program size (counters, not copies)."""

from __future__ import annotations

import random

import pytest

from llamay.constraints import compile as compile_mod
from llamay.constraints import compile_grammar, parse_gbnf, schema_to_grammar
from llamay.constraints.automaton import Automaton
from llamay.constraints.compile import REP

CASES = {
    "bounded": 'root ::= "<" [a-c]{17,40} ">"',
    "upto": 'root ::= [a-c]{0,30} "."',
    "exact": 'root ::= ("ab" | "c"){20}',
    "nested": 'root ::= ( [ab]{0,18} ";" ){0,19}',
    "unbounded": 'root ::= "x"{18,} "y"',
    "multibyte": "root ::= [a-zé😀]{0,25}",
}


def copies(gbnf: str, monkeypatch) -> Automaton:
    """The same grammar with every repetition written as copies (the reference)."""
    with monkeypatch.context() as m:
        m.setattr(compile_mod, "_COUNT_FROM", 10**9)
        prog = compile_grammar(parse_gbnf(gbnf))
    assert REP not in prog.kind
    return Automaton(prog)


def strings(rng: random.Random, n: int) -> list[bytes]:
    alphabet = ["a", "b", "c", "x", "y", ";", ".", "<", ">", "é", "😀", "z"]
    out = []
    for _ in range(n):
        length = rng.choice([rng.randint(0, 8), rng.randint(15, 45), rng.randint(300, 420)])
        pick = rng.sample(alphabet, rng.randint(1, 4))
        out.append("".join(rng.choice(pick) for _ in range(length)).encode())
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_counted_repetition_accepts_what_copies_accept(name, monkeypatch):
    gbnf = CASES[name]
    counted, reference = Automaton(compile_grammar(parse_gbnf(gbnf))), copies(gbnf, monkeypatch)
    assert REP in counted.program.kind
    rng = random.Random(name)
    samples = strings(rng, 400)
    # and strings right at the bounds, built from the grammar's own pieces
    samples += [b"<" + b"a" * k + b">" for k in range(14, 44)] + [b"a" * k + b"." for k in range(25, 35)]
    samples += [b"ab" * k + b"c" * (20 - k) for k in range(0, 21)] + [b"x" * k + b"y" for k in range(15, 22)]
    samples += [(b"ab" * 9 + b";") * k for k in range(17, 22)] + ["é😀".encode() * k for k in range(10, 15)]
    for s in samples:
        for complete in (True, False):
            assert counted.accepts_bytes(s, complete) == reference.accepts_bytes(s, complete), (s, complete)


def test_bound_changes_no_program_size():
    sizes = set()
    for n in (100, 4096, 131072):
        prog = compile_grammar(schema_to_grammar({"type": "string", "maxLength": n, "minLength": n // 2}))
        sizes.add((len(prog.kind), len(prog.rule_alts)))
    assert len(sizes) == 1


def test_units_that_may_be_empty_are_copied():
    prog = compile_grammar(parse_gbnf('root ::= ("a"?){0,40} "."'))
    assert REP not in prog.kind
    assert Automaton(prog).accepts_bytes(b"a" * 40 + b".") and not Automaton(prog).accepts_bytes(b"a" * 41 + b".")
