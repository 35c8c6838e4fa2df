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


def schema_automaton(schema, **kw) -> Automaton:
    """The automaton of a JSON Schema (its grammar compiled lazily, as the library does)."""
    from llamay.constraints import schema_to_grammar

    return Automaton(compile_grammar(schema_to_grammar(schema, **kw)))


def _min_lengths(prog: Program) -> list[float]:
    """Fewest bytes each rule can derive (inf for rules that never finish), of an eagerly compiled program."""
    inf = float("inf")
    best = [inf] * len(prog.rule_alts)
    changed = True
    while changed:
        changed = False
        for r, starts in enumerate(prog.rule_alts):
            for s in starts:
                total = _alt_length(prog, s, best.__getitem__)
                if total < best[r]:
                    best[r] = total
                    changed = True
    return best


class _Shortest:
    """Bytes some derivation of a rule takes, found on demand (a lazy program's rules are compiled as they are
    reached, and an object in any order has a rule per set of members): a depth-first search for the first
    finite derivation, alternatives without rules first, then in the order written (json_members.py writes
    the members still needed first), counting a rule being expanded as never finishing. A value is the length
    of a real derivation (the way out follows the derivations found), not always the shortest; only finite
    ones are remembered."""

    def __init__(self, prog: Program) -> None:
        self.prog = prog
        self.memo: dict[int, float] = {}
        self.active: set[int] = set()

    def __call__(self, rule: int) -> float:
        """(Iterative: a derivation can be deeper than Python's recursion.)"""
        inf, prog, memo = float("inf"), self.prog, self.memo
        if rule in memo:
            return memo[rule]
        frames = [self.frame(rule)]  # [rule, alternatives left, position in the current one, total so far]
        while frames:
            f = frames[-1]
            r, alts, p, total = f
            if p is None:
                if not alts:  # no alternative finishes
                    frames.pop()
                    self.active.discard(r)
                    self.deliver(frames, inf)
                    continue
                p, total = alts.pop(0), 0.0
            pushed = False
            while prog.kind[p] != END:
                kind, arg = prog.kind[p], prog.arg[p]
                times, child = (1, None) if kind == BYTES else (1, arg) if kind != REP else prog.reps[arg][1::-1]
                if child is None:
                    total += 1
                elif times:
                    if child in memo:
                        total += times * memo[child]
                    elif child in self.active:
                        total = inf
                        break
                    else:
                        f[2], f[3] = p, total
                        frames.append(self.frame(child))
                        pushed = True
                        break
                p += 1
            if pushed:
                continue
            if total == inf:
                f[2] = None
                continue
            frames.pop()
            self.active.discard(r)
            memo[r] = total
            self.deliver(frames, total)
        return memo.get(rule, inf)

    def frame(self, rule: int) -> list:
        self.active.add(rule)
        return [rule, sorted(self.prog.rule_alts[rule], key=self.has_rules), None, 0.0]

    def deliver(self, frames: list, value: float) -> None:
        """The rule the top frame waited for is worth `value`: go on after it, or to the next alternative."""
        if not frames:
            return
        f = frames[-1]
        if value == float("inf"):
            f[2] = None
            return
        kind, arg = self.prog.kind[f[2]], self.prog.arg[f[2]]
        f[3] += value * (self.prog.reps[arg][1] if kind == REP else 1)
        f[2] += 1

    def has_rules(self, start: int) -> bool:
        p = start
        while self.prog.kind[p] != END:
            if self.prog.kind[p] != BYTES:
                return True
            p += 1
        return False


def sentences(prog: Program, rng: random.Random, n: int, budget: int = 60) -> list[bytes]:
    """n random sentences of the grammar: random choices until `budget` bytes, then the shortest ways out."""
    shortest = _Shortest(prog) if prog.lazy else _min_lengths(prog).__getitem__
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
                else:  # (uniform among those that finish: the first that does in a random order)
                    order = rng.sample(starts, len(starts))
                    start = next(s for s in order if _alt_length(prog, s, shortest) < float("inf"))
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


def _alt_length(prog: Program, start: int, shortest, bound: float = float("inf")) -> float:
    """Bytes of the alternative at `start` (`shortest(rule)` for its rules), given up once past `bound`."""
    total, p = 0.0, start
    while prog.kind[p] != END and total < bound:
        kind, arg = prog.kind[p], prog.arg[p]
        if kind == REP:
            rule, lo, _ = prog.reps[arg]
            total += lo * shortest(rule) if lo else 0.0
        else:
            total += 1 if kind == BYTES else shortest(arg)
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

    from llamay.constraints import schema_to_grammar

    pytest.importorskip("jsonschema")
    check = schema_validator(schema)
    prog = compile_grammar(schema_to_grammar(schema, **kw))
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


def gbnf_per_hash_seed(schema, seeds: int = 6) -> set[str]:
    """The schema's GBNF as compiled in `seeds` processes of different string hash seeds (a compile that
    iterates a set of strings would differ between them); skipped where there are no processes (Pyodide)."""
    import os
    import subprocess
    import sys

    import pytest

    if sys.platform == "emscripten":
        pytest.skip("no subprocesses under Pyodide")
    code = "import json, sys; import llamay.constraints as C; print(C.schema_to_gbnf(json.loads(sys.argv[1])))"
    outs = set()
    for seed in range(seeds):
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        run = subprocess.run([sys.executable, "-c", code, json.dumps(schema)], capture_output=True, text=True, env=env)
        assert run.returncode == 0, run.stderr
        outs.add(run.stdout)
    return outs
