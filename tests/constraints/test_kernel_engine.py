"""The host side of the kernel engine on lazy programs: the rules compiled at a NEED_RULE (every rule the
operation named, with the rules that begin their alternatives, `_compile_leftmost`), and the caches that make
compiling a lazy rule cheaper (pattern keys' steps, the names' runs in a key trie, literals' elements). Each is
compared with the path without it: the same masks, the same grammar, the same program."""

from __future__ import annotations

import pytest

from llamay.constraints import (
    GrammarConstraint,
    compile_grammar,
    json_keys,
    json_members,
    kernel_engine,
    parse_gbnf,
    schema_to_grammar,
)
from llamay.constraints import compile as compile_module
from llamay.constraints.constraint import PythonEngine
from llamay.constraints.kernel_engine import KernelEngine
from tests.backends import require_backend
from tests.constraints.conftest import load_vocab
from tests.kernels.test_pda import walk_and_compare

BACKENDS = ("portable", "numba", "wasm")

# listed names sharing prefixes (runs of one child), an excluded one, patterns and a nested any-value
SCHEMA = {
    "type": "object",
    "properties": {
        "alpha": {"type": "integer"},
        "alphabet": {"type": "string", "maxLength": 4},
        "alphanumeric_identifier": {"type": "boolean"},
        "beta": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
        "betamax": {},
        "gamma_ray_burst": {"enum": ["x", "y"]},
    },
    "patternProperties": {"^x-[a-z]+$": {"type": "integer"}, "id$": {"type": "string", "maxLength": 3}},
    "additionalProperties": {"type": "number"},
    "required": ["beta"],
}
NAMES = {"type": "object", "properties": {n: {"type": "integer"} for n in ("id", "idle", "identifier", "ice", "x")},
         "additionalProperties": False}  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("schema", [SCHEMA, NAMES], ids=["patterns", "names"])
def test_rules_compiled_with_their_leftmost_ones_give_the_same_masks(backend, schema, monkeypatch):
    """A NEED_RULE compiles the rule and the rules beginning its alternatives (the kernel predicts them at
    once): the masks are the Python engine's, and those of an engine compiling one rule per NEED_RULE."""
    vocab = load_vocab("synthetic")
    progs = [compile_grammar(schema_to_grammar(schema)) for _ in range(3)]
    ref = GrammarConstraint(progs[0], vocab)
    ref.engine = PythonEngine(progs[0], vocab, ref.limits)
    batched = GrammarConstraint(progs[1], vocab)
    batched.engine = KernelEngine(progs[1], vocab, batched.limits, require_backend(backend))
    assert walk_and_compare(ref, batched, "leftmost", 30, 5) >= 10
    one = GrammarConstraint(progs[2], vocab)
    with monkeypatch.context() as m:
        m.setattr(kernel_engine, "_compile_leftmost", _compile_one)
        one.engine = KernelEngine(progs[2], vocab, one.limits, require_backend(backend))
        assert walk_and_compare(ref, one, "leftmost", 30, 5) >= 10


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_value_of_any_type_is_compiled_in_one_stop(backend, monkeypatch):
    """After `"betamax":` (any value: value ::= object | array | string | ...) the kernel needs the value rule
    and every rule it begins with: one NEED_RULE compiles them all (the kernel stopped at each before). Without
    that batch, the closure that meets them still names them all in one stop."""
    vocab = load_vocab("synthetic")
    stops = _record_stops(monkeypatch)
    masks, compiled = [], []
    for batched in (True, False):
        if not batched:
            monkeypatch.setattr(kernel_engine, "_compile_leftmost", _compile_one)
        prog = compile_grammar(schema_to_grammar(SCHEMA))
        c = GrammarConstraint(prog, vocab)
        c.engine = KernelEngine(prog, vocab, c.limits, require_backend(backend))
        del stops[:]
        st = c.advance_bytes(c.start(), b'{"beta":[1],"betamax":')
        masks.append(c.allowed(st).bits)
        compiled.append({prog.rule_names[r] for r in prog.rule_alts})
        named = [set(stop) for stop in stops]
        assert any("value" in stop for stop in named)
        leftmost = {"null", "boolean", "object"}
        assert leftmost & set().union(*named) == (set() if batched else leftmost)
        assert batched or any(leftmost <= stop for stop in named)
    assert masks[0] == masks[1]
    assert compiled[0] == compiled[1]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [3, 40])
def test_the_rules_a_step_meets_are_compiled_in_one_stop(backend, n, monkeypatch):
    """n objects as alternatives, each "{" space its member (a lazy program): the step over "{" (a closure per
    alternative) meets every member's rule not compiled yet and names them (MAX_NEEDS a stop: the operation
    starts over fewer times than there are rules); the masks are the Python engine's. Rules compiled one by
    one (`_compile_one`), so the batching is the kernel's."""
    from llamay.constraints import LLAMACPP
    from llamay.kernels.pda_layout import MAX_NEEDS

    schema = {"anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"],
                         "additionalProperties": False} for i in range(n)]}  # fmt: skip
    vocab = load_vocab("synthetic")
    ref = GrammarConstraint(compile_grammar(schema_to_grammar(schema, **LLAMACPP)), vocab)
    ref.engine = PythonEngine(ref.program, vocab, ref.limits)
    monkeypatch.setattr(kernel_engine, "_compile_leftmost", _compile_one)
    stops = _record_stops(monkeypatch)
    prog = compile_grammar(schema_to_grammar(schema, **LLAMACPP), lazy=True)  # (as beside any lazy rule)
    ker = GrammarConstraint(prog, vocab)
    ker.engine = KernelEngine(prog, vocab, ker.limits, require_backend(backend))
    st_k = ker.advance_bytes(ker.start(), b"{")
    st_r = ref.advance_bytes(ref.start(), b"{")
    assert ker.allowed(st_k).bits == ref.allowed(st_r).bits
    members = [stop for stop in stops if any(name.endswith("-kv") for name in stop)]
    assert sum(len(stop) for stop in members) == n  # (each named once)
    assert len(members) == -(-n // MAX_NEEDS)  # (a stop per MAX_NEEDS of them, not one per rule)
    assert all(len(stop) <= MAX_NEEDS for stop in stops)
    assert walk_and_compare(ref, ker, "members", 12, 4) >= 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_rules_a_states_stacks_meet_are_compiled_in_one_stop(backend, monkeypatch):
    """The start state's three stacks (one per alternative) each meet a rule not compiled yet in their walks
    (after a byte each): the mask goes on past each stack to the others and names all three rules, so it costs
    one stop; the masks are the Python engine's."""
    grammar = 'root ::= "a" ra | "b" rb | "c" rc\nra ::= "x" [0-9]\nrb ::= "yy"\nrc ::= [a-z]+\n'
    vocab = load_vocab("synthetic")
    ref = GrammarConstraint(compile_grammar(parse_gbnf(grammar)), vocab)
    ref.engine = PythonEngine(ref.program, vocab, ref.limits)
    monkeypatch.setattr(kernel_engine, "_compile_leftmost", _compile_one)
    stops = _record_stops(monkeypatch)
    prog = compile_grammar(parse_gbnf(grammar), lazy=True)
    ker = GrammarConstraint(prog, vocab)
    ker.engine = KernelEngine(prog, vocab, ker.limits, require_backend(backend))
    st = ker.start()
    del stops[:]
    assert ker.allowed(st).bits == ref.allowed(ref.start()).bits
    assert [sorted(stop) for stop in stops] == [["ra", "rb", "rc"]]
    assert walk_and_compare(ref, ker, "walk", 10, 3) >= 3


def _record_stops(monkeypatch) -> list[list[str]]:
    """The names of the rules compiled at each NEED_RULE, one list per stop."""
    stops: list[list[str]] = []
    compile_rules = kernel_engine.Arena.compile_rules

    def recorded(a, rids):
        stops.append([a.pw.program.rule_names[r] for r in rids])
        compile_rules(a, rids)

    monkeypatch.setattr(kernel_engine.Arena, "compile_rules", recorded)
    return stops


def _compile_one(program, rid: int) -> list[int]:
    """`_compile_leftmost` without the batch: rule `rid` alone (what the engine did before)."""
    program.rule_alts[rid]
    return [rid]


def _gbnf(schema) -> str:
    return schema_to_grammar(schema).to_gbnf()


def test_pattern_key_steps_memoised_change_no_grammar(monkeypatch):
    """PatternKeys.step and .value remember what they computed: the grammar (every lazy rule built) is the one
    computed afresh at each call."""
    cached = _gbnf(SCHEMA)
    monkeypatch.setattr(json_keys.PatternKeys, "step", json_keys.PatternKeys._step)
    monkeypatch.setattr(json_keys.PatternKeys, "value", json_keys.PatternKeys._value)
    assert _gbnf(SCHEMA) == cached


# the same patterns merged into each branch's object: their classes, steps and successors are shared (not with
# an object of one pattern in common and one not)
_ONE_IN_COMMON = {"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "null"}, "^y": {"type": "boolean"}}}
BRANCHES = {
    "type": "object",
    "patternProperties": {"^x-[a-z]+$": {"type": "integer"}, "id$": {"type": "string", "maxLength": 3}},
    "anyOf": [
        {"properties": {"alpha": {"type": "integer"}, "idx": {"type": "boolean"}}},
        {"properties": {"beta": {"type": "string"}}, "required": ["beta"], "additionalProperties": {"type": "null"}},
        {"properties": {"x-ray": {"type": "integer"}}, "additionalProperties": False},
        {"properties": {"in": _ONE_IN_COMMON}},
    ],
}


@pytest.mark.parametrize("schema", [SCHEMA, BRANCHES], ids=["patterns", "branches"])
def test_pattern_keys_shared_and_steps_memoised_change_no_grammar(schema, monkeypatch):
    """The patterns' classes, steps and successors, shared by the objects of a compilation with the same
    patterns, and a key trie node's steps, kept per object: the grammar (every lazy rule built) is the one each
    object computes afresh at each call."""
    cached = _gbnf(schema)
    keys_init, members_init = json_keys.PatternKeys.__init__, json_members.Members.__init__

    def forgetful_keys(self, *args, **kwargs):
        keys_init(self, *args, **kwargs)
        self.class_memo, self.steps, self.nexts = _Forgetful(), _Forgetful(), _Forgetful()

    def forgetful_members(self, *args, **kwargs):
        members_init(self, *args, **kwargs)
        self.steps_memo = _Forgetful()

    monkeypatch.setattr(json_keys.PatternKeys, "__init__", forgetful_keys)
    monkeypatch.setattr(json_members.Members, "__init__", forgetful_members)
    assert _gbnf(schema) == cached


@pytest.mark.parametrize("schema", [SCHEMA, NAMES], ids=["patterns", "names"])
def test_names_runs_change_no_grammar(schema, monkeypatch):
    """A key trie's runs of one child (`Members.run_from`, jumped at once) give the grammar of a walk node by
    node."""
    jumped = _gbnf(schema)
    monkeypatch.setattr(json_members.Members, "run_from", lambda self, at: ("", at))
    assert _gbnf(schema) == jumped


class _Forgetful(dict):
    def __setitem__(self, key, value) -> None:
        pass


def test_literal_elements_cached_change_no_program(monkeypatch):
    """A literal's elements, cached per text, make the program its elements made afresh make."""
    text = 'root ::= "ab" x "ab" ("é" | "ab")* x\nx ::= "ab" | "cd" "ab"\n'
    grammars = [parse_gbnf(text), schema_to_grammar(NAMES)]
    cached = [compile_grammar(g, lazy=True) for g in grammars]
    for p in cached:
        p.rule_alts[len(p.rule_names) - 1]
    original = compile_module._Compiler.__init__

    def forgetting(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.lits = _Forgetful()

    monkeypatch.setattr(compile_module._Compiler, "__init__", forgetting)
    grammars = [parse_gbnf(text), schema_to_grammar(NAMES)]
    afresh = [compile_grammar(g, lazy=True) for g in grammars]
    for p in afresh:
        p.rule_alts[len(p.rule_names) - 1]
    for a, b in zip(cached, afresh, strict=True):
        assert (a.kind, a.arg, dict(a.rule_alts), a.rule_names) == (b.kind, b.arg, dict(b.rule_alts), b.rule_names)
