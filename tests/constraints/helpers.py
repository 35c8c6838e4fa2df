"""Shared test helpers: the test data, compile GBNF quickly, and draw random sentences from a grammar."""

from __future__ import annotations

import json
import random
from pathlib import Path

from llamay.constraints.automaton import Automaton
from llamay.constraints.compile import BYTES, END, REP, Program, compile_grammar
from llamay.constraints.gbnf import parse

DATA = Path(__file__).parent / "data"
SCHEMAS = json.loads((DATA / "schemas.json").read_text())["schemas"]


def automaton(gbnf: str) -> Automaton:
    return Automaton(compile_grammar(parse(gbnf)))


def _min_lengths(prog: Program) -> list[float]:
    """Fewest bytes each rule can derive (inf for rules that never finish)."""
    inf = float("inf")
    best = [inf] * len(prog.rule_alts)
    changed = True
    while changed:
        changed = False
        for r, starts in enumerate(prog.rule_alts):
            for s in starts:
                total, p = 0.0, s
                while prog.kind[p] != END:
                    total += _elem_length(prog, p, best)
                    p += 1
                if total < best[r]:
                    best[r] = total
                    changed = True
    return best


def sentences(prog: Program, rng: random.Random, n: int, budget: int = 60) -> list[bytes]:
    """n random sentences of the grammar: random choices until `budget` bytes, then the shortest ways out."""
    shortest = _min_lengths(prog)
    out = []
    for _ in range(n):
        buf = bytearray()
        todo = [("rule", prog.root)]
        while todo:
            what, x = todo.pop()
            if what == "rule":
                starts = prog.rule_alts[x]
                if len(buf) > budget:
                    start = min(starts, key=lambda s: _alt_length(prog, s, shortest))
                else:
                    start = rng.choice([s for s in starts if _alt_length(prog, s, shortest) < float("inf")])
                elems = []
                p = start
                while prog.kind[p] != END:
                    elems.append(p)
                    p += 1
                todo.extend(("elem", e) for e in reversed(elems))
            elif prog.kind[x] == BYTES:
                mask = prog.arg[x]
                buf.append(rng.choice([b for b in range(256) if mask >> b & 1]))
            elif prog.kind[x] == REP:  # a counted repetition: few copies, or as many as allowed when few
                rule, lo, hi = prog.reps[prog.arg[x]]
                count = lo if len(buf) > budget else rng.choice([lo, min(hi, lo + 3), hi if hi - lo < 20 else lo])
                todo.extend(("rule", rule) for _ in range(count))
            else:
                todo.append(("rule", prog.arg[x]))
        out.append(bytes(buf))
    return out


def _elem_length(prog: Program, p: int, best: list[float]) -> float:
    kind, arg = prog.kind[p], prog.arg[p]
    if kind == REP:
        rule, lo, _ = prog.reps[arg]
        return lo * best[rule] if lo else 0.0
    return 1 if kind == BYTES else best[arg]


def _alt_length(prog: Program, start: int, shortest: list[float]) -> float:
    total, p = 0.0, start
    while prog.kind[p] != END:
        total += _elem_length(prog, p, shortest)
        p += 1
    return total


def schema_validator(schema):
    """A `jsonschema` validator of the schema's own draft (2020-12 when it names none), checking formats."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def assert_sound(schema, valid=(), invalid=(), n: int = 40, budget: int = 80, **kw) -> None:
    """The schema's grammar accepts the `valid` documents (compact JSON), none of the `invalid` ones, and its
    random sentences all validate with `jsonschema` (the reference); the documents are checked there too."""
    import pytest

    from llamay.constraints import schema_to_gbnf

    pytest.importorskip("jsonschema")
    check = schema_validator(schema)
    prog = compile_grammar(parse(schema_to_gbnf(schema, **kw)))
    a = Automaton(prog)
    for doc in valid:
        assert check.is_valid(doc), doc
    for doc in invalid:
        assert not check.is_valid(doc), doc
    text = lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()  # noqa: E731
    assert [d for d in valid if not a.accepts_bytes(text(d))] == []
    assert [d for d in invalid if a.accepts_bytes(text(d))] == []
    bad = [
        s for s in sentences(prog, random.Random(json.dumps(schema)), n, budget) if not check.is_valid(json.loads(s))
    ]
    assert bad == []
