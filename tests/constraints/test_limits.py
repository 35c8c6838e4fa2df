"""Limits on constraint work (limits.py): hostile schemas, grammars, patterns and lexicons are refused quickly,
by a ConstraintLimitError naming the limit and where, never a RecursionError or unbounded time and memory.
"Quickly" is measured by work counters (the compilation's Budget, the program's size), never by a clock;
the cases that exhausted the machine before the limits existed run in a subprocess under memory and CPU
rlimits, so that a regression fails instead of taking the machine down."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from llamay.constraints import (
    ConstraintError,
    ConstraintLimitError,
    ConstraintLimits,
    GrammarConstraint,
    compile_grammar,
    grammar_constraint,
    json_constraint,
    json_schema_constraint,
    lexicon_constraint,
    lexicon_grammar,
    parse_gbnf,
    schema_to_gbnf,
    schema_to_grammar,
)
from llamay.constraints.automaton import Automaton
from llamay.constraints.json_schema import LLAMACPP
from llamay.constraints.limits import DEFAULT_LIMITS, Budget
from tests.constraints.conftest import load_vocab
from tests.constraints.helpers import sentences

REPO = Path(__file__).resolve().parents[2]
QUICK = 50_000  # work (steps) a refusal may cost at most: a small fraction of the default max_work


def deep_schema(depth: int) -> dict:
    s: dict = {"type": "string"}
    for _ in range(depth):
        s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
    return s


def ref_chain(n: int) -> dict:
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}", "type": "object"} for i in range(n)}
    defs[f"d{n}"] = {"type": "object"}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def compile_all(kind: str, source, limits: ConstraintLimits | None = None) -> tuple[Budget, Automaton]:
    """Every stage a builder runs, on one Budget (so the test can read the work done)."""
    budget = Budget(limits)
    if kind == "schema":
        grammar = schema_to_grammar(source, limits=budget)
    elif kind == "gbnf":
        grammar = parse_gbnf(source, limits=budget)
    else:
        grammar = lexicon_grammar(source, limits=budget)
    return budget, Automaton(compile_grammar(grammar, budget), budget.limits)


def test_a_property_schema_met_in_every_branch_is_compiled_once(monkeypatch):
    """A oneOf merged with the object's properties: each branch lists them again, the same schema objects, and
    each is compiled once (SchemaCompiler.visit_shared), however many branches; the language as before."""
    from llamay.constraints.json_schema import SchemaCompiler

    item = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string"}}, "required": ["x"]}
    visits = []
    real = SchemaCompiler.visit_schema
    monkeypatch.setattr(SchemaCompiler, "visit_schema", lambda c, s, *a: visits.append(s) or real(c, s, *a))
    for n in (2, 8):
        schema = {"type": "object", "properties": {"shared": item, **{f"k{i}": {"type": "integer"} for i in range(n)}},
                  "oneOf": [{"required": [f"k{i}"], "not": {"required": [f"k{j}" for j in range(n) if j != i]}}
                            for i in range(n)]}  # fmt: skip
        visits.clear()
        _, aut = compile_all("schema", schema)
        assert sum(v is item for v in visits) == 1
        assert aut.accepts_bytes(b'{"shared":{"x":1,"y":"a"},"k1":2}')
        assert not aut.accepts_bytes(b'{"shared":{"y":"a"},"k1":2}')  # (x required in the shared schema)
        assert not aut.accepts_bytes(b'{"k0":1,"k1":2}')  # (one branch only)


def test_recursion_through_a_property_compiled_once_is_still_found():
    """The rule where a property schema is met again refers to what it refers to: here only that second place
    is in a cycle (R requires p, which is R), and the schema, required all the way down, is refused as such."""
    schema = {
        "definitions": {
            "D": {"type": "object", "properties": {"p": {"$ref": "#/definitions/R"}}, "required": ["p"]},
            "R": {"allOf": [{"$ref": "#/definitions/D"}, {"minProperties": 1}]},
        },
        "type": "object",
        "properties": {"a": {"allOf": [{"$ref": "#/definitions/D"}, {"maxProperties": 5}]}},
        "required": ["a"],
    }
    with pytest.raises(ConstraintError, match="derives no finite string"):
        compile_all("schema", schema)
    schema["definitions"]["D"]["required"] = []  # (a way out: compiles, and recursion stays exact)
    _, aut = compile_all("schema", schema)
    assert aut.accepts_bytes(b'{"a":{"p":{"p":{"q":1}}}}')
    assert not aut.accepts_bytes(b'{"a":{"p":{}}}')  # (R: at least one member)


# (id, kind, source, the limit named, a piece of where it was hit)
HOSTILE = [
    ("minLength 1e9", "schema", {"type": "string", "minLength": 10**9}, "max_repeat", "#/minLength"),
    ("minItems 1e9", "schema", {"type": "array", "minItems": 10**9}, "max_repeat", "#/minItems"),
    ("nested 600", "schema", deep_schema(600), "max_nesting", "#/properties/a/properties/a"),
    ("nested JSON text", "schema", "[" * 100_000 + "]" * 100_000, "max_nesting", "#"),
    ("$ref chain", "schema", ref_chain(1000), "max_nesting", "#/$defs/d0"),
    ("bound of 300 digits", "schema", {"type": "integer", "minimum": 10**300}, "max_number_digits", "#/minimum"),
    ("pattern count", "schema", {"type": "string", "pattern": "^a{1000000000}$"}, "max_repeat", "#/pattern"),
    (
        "pattern nesting",
        "schema",
        {"type": "string", "pattern": "(" * 500 + "a" + ")" * 500},
        "max_nesting",
        "#/pattern",
    ),
    ("pattern stacked", "schema", {"type": "string", "pattern": "a" + "{1}" * 5000}, "max_nesting", "#/pattern"),
    ("gbnf count", "gbnf", 'root ::= "a"{1000000000}', "max_repeat", "GBNF line 1, column 14"),
    ("gbnf count digits", "gbnf", 'root ::= "a"{' + "9" * 100_000 + "}", "max_repeat", "GBNF line 1"),
    ("gbnf nesting", "gbnf", "root ::= " + "(" * 3000 + '"a"' + ")" * 3000, "max_nesting", "GBNF line 1"),
    ("gbnf stacked", "gbnf", 'root ::= "a"' + "?" * 5000, "max_nesting", "GBNF line 1"),
    ("gbnf huge", "gbnf", "root ::= " + " | ".join(f'"w{i}"' for i in range(300_000)), "max_work", "GBNF text"),
    ("gbnf nullable count", "gbnf", 'root ::= ("a"?){100000}', "max_stacks", "the start state"),
    ("lexicon huge", "lexicon", ["a" * i for i in range(1, 3000)], "max_work", "lexicon"),
]


@pytest.mark.parametrize(("kind", "source", "limit", "where"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_inputs_are_refused_quickly_naming_the_limit(kind, source, limit, where):
    budget = Budget()
    with pytest.raises(ConstraintLimitError) as e:
        if kind == "schema":
            compile_grammar(schema_to_grammar(source, limits=budget), budget)
        elif kind == "gbnf":
            Automaton(compile_grammar(parse_gbnf(source, limits=budget), budget))
        else:
            compile_grammar(lexicon_grammar(source, limits=budget), budget)
    err = e.value
    assert err.limit == limit and err.value == getattr(DEFAULT_LIMITS, limit)
    assert where in err.where and limit in str(err) and str(err.value) in str(err)
    read = len(source) if isinstance(source, str) else sum(map(len, source)) if kind == "lexicon" else 0
    if limit == "max_work":
        assert budget.work <= DEFAULT_LIMITS.max_work + read  # refused by the charge that passed the limit
    else:
        assert budget.work <= QUICK + read  # refused after reading the source, before compiling it


@pytest.mark.parametrize(
    ("schema", "small"),
    [
        ({"type": "string", "maxLength": 1_000_000}, 20_000),
        ({"type": "string", "maxLength": 10**12}, 20_000),  # lowered to max_repeat: strings stay within it
        ({"type": "array", "maxItems": 10**9, "items": {"type": "integer"}}, 20_000),
        ({"type": "array", "prefixItems": [{"type": "integer"}], "minItems": 100_000}, 5_000),
        ({"type": "string", "pattern": "^[a-z]{0,5000000}$"}, 20_000),
        ({"type": "number", "minimum": -5, "maximum": 1e300}, 5_000),
    ],
)
def test_large_counts_compile_small(schema, small):
    """Counts a model could never reach compile to a program of a few thousand elements, not copies."""
    budget, aut = compile_all("schema", schema)
    assert len(aut.program.kind) <= small
    assert budget.work <= QUICK


@pytest.mark.parametrize(
    ("lo", "hi"), [(0, 1025), (3, 1100), (3000, 3000), (1024, 4097), (0, 5000), (77, 2500), (2049, None)]
)
def test_counted_repetitions_keep_their_language(lo, hi):
    """Above 1024 copies a repetition is powers of two and blocks, not copies: a program of a few hundred
    elements beyond the copies of the first 1024, and the counts accepted are exactly lo..hi."""
    rep = f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}"
    aut = Automaton(compile_grammar(parse_gbnf(f'root ::= "a"{rep} "b"')))
    assert len(aut.program.kind) <= 1700  # (copies: up to 20,000)
    top = (hi or lo) + 50
    st, accepted = aut.initial, []
    for n in range(top + 1):
        done = aut.step(st, ord("b"))
        if done is not None and done.complete:
            accepted.append(n)
        st = aut.step(st, ord("a"))
        if st is None:
            break
        assert len(st.stacks) <= 4  # a parse or two alive, never one per copy
    assert accepted == list(range(lo, (hi if hi is not None else top) + 1))


def test_huge_enums_and_consts_are_refused_by_work():
    """An enum or const is read, written and compiled in proportion to its size: max_work bounds it (set low
    here, so the test stays small; 100,000 values pass the default)."""
    limits = ConstraintLimits(max_work=100_000)
    for schema in ({"enum": [f"v{i}" for i in range(20_000)]}, {"const": "x" * 200_000}):
        budget = Budget(limits)
        with pytest.raises(ConstraintLimitError) as e:
            compile_grammar(schema_to_grammar(schema, limits=budget), budget)
        assert e.value.limit == "max_work" and budget.work <= 100_000 + 200_000


def test_large_enums_are_a_trie_of_their_texts():
    """An enum holds one stack per branch of its values' texts, not one per value: cheap per token."""
    values = [f"{c}{n:03d}" for c in "ABCDEFGHIJ" for n in range(200)] + [7, None, "é"]
    _, aut = compile_all("schema", {"enum": values})
    st = aut.step(aut.initial, ord('"'))
    assert len(st.stacks) <= 16  # one per first letter and the rest, not 2,000
    for v in values[::97] + values[-3:]:
        assert aut.accepts_bytes(json.dumps(v, ensure_ascii=False).encode()), v
    for bad in ('"A200"', '"K001"', '"A00"', "8", '"e"'):
        assert not aut.accepts_bytes(bad.encode()), bad
    for s in sentences(aut.program, random.Random(0), 50):
        assert json.loads(s) in values


def test_deep_inputs_compile_without_recursion():
    """Inputs that recursed once per level (lexicon tries, keys excluding a long name, $ref chains, schemas
    nested within the limit) compile."""
    _, aut = compile_all("lexicon", ["a" * i for i in range(1, 1500)])
    assert aut.accepts_bytes(b"a" * 1499) and not aut.accepts_bytes(b"a" * 1500)
    long_key = "k" * 3000
    schema = {"type": "object", "properties": {long_key: {"type": "integer"}}, "additionalProperties": True}
    _, aut = compile_all("schema", schema)
    assert aut.accepts_bytes(json.dumps({long_key: 1, "k" + "x" * 2998: 2}, separators=(",", ":")).encode())
    assert not aut.accepts_bytes(json.dumps({long_key: 1, long_key + "": "x"}, separators=(",", ":")).encode())
    _, aut = compile_all("schema", ref_chain(40))
    assert aut.accepts_bytes(b"{}")
    _, aut = compile_all("schema", deep_schema(30))
    assert aut.accepts_bytes(b'{"a":' * 30 + b'"x"' + b"}" * 30)


@pytest.mark.parametrize("options", [{}, LLAMACPP], ids=["lazy", "eager"])
def test_deferred_recursion_checks_refuse_what_the_checks_refused(options):
    """A recursive schema's grammar checks left to compile_grammar (`defer_checks`, as json_schema_constraint
    compiles): llama.cpp's layout, a grammar without lazy rules, is compiled eagerly and checked on its program,
    the spec's, lazily and checked first; either way the schema with no finite value is refused as before, and
    the one with a way out gives the program the checks made first give. Printing a grammar makes them too."""
    schema = {
        "definitions": {"Foo": {"type": "object", "properties": {"child": {"$ref": "#/definitions/Foo"}}}},
        "type": "object",
        "properties": {"foo": {"$ref": "#/definitions/Foo"}},
        "required": ["foo"],
        "additionalProperties": False,
    }
    checked = compile_grammar(schema_to_grammar(schema, **options))
    deferred = schema_to_grammar(schema, defer_checks=True, **options)
    assert deferred.owed is not None and bool(deferred.lazy) == (options == {})
    program = compile_grammar(deferred)
    assert (program.kind, program.arg, program.rule_names) == (checked.kind, checked.arg, checked.rule_names)
    schema["definitions"]["Foo"]["required"] = ["child"]
    with pytest.raises(ConstraintError, match="derives no finite string"):
        schema_to_grammar(schema, **options)
    with pytest.raises(ConstraintError, match="derives no finite string"):
        compile_grammar(schema_to_grammar(schema, defer_checks=True, **options))
    with pytest.raises(ConstraintError, match="derives no finite string"):
        schema_to_grammar(schema, defer_checks=True, **options).to_gbnf()


def test_recursive_inline_references_compile_once():
    """A $ref with siblings (or in an allOf) pointing back at its own schema recursed forever: it is one rule.
    Required all the way down, no finite value exists and the schema is refused as such."""
    schema = {
        "definitions": {"Foo": {"properties": {"child": {"allOf": [{"$ref": "#/definitions/Foo"}]}}, "type": "object"}},
        "properties": {"foo": {"$ref": "#/definitions/Foo", "type": "object"}},
        "required": ["foo"],
    }
    _, aut = compile_all("schema", schema)
    assert aut.accepts_bytes(b'{"foo":{"child":{"child":{}}}}') and not aut.accepts_bytes(b'{"foo":{"child":1}}')
    schema["definitions"]["Foo"]["required"] = ["child"]
    with pytest.raises(ConstraintError, match="derives no finite string"):
        compile_all("schema", schema)
    work = []
    for n in (100, 200, 400):  # n uses of one content: one rule, work linear in n (it was exponential)
        many = {"type": "object", "properties": {f"p{i}": {"$ref": "#", "type": "object"} for i in range(n)}}
        budget, aut = compile_all("schema", many)
        assert aut.accepts_bytes(b'{"p0":{"p1":{}},"p99":{}}') and not aut.accepts_bytes(b'{"p0":1}')
        work.append(budget.work)
    assert work[2] <= 2.5 * work[1] <= 2.5**2 * work[0]


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "string", "minLength": "3"}, "#/minLength"),
        ({"type": "string", "maxLength": -1}, "#/maxLength"),
        ({"type": "array", "maxItems": 2.5}, "#/maxItems"),
        ({"type": "number", "maximum": float("nan")}, "#/maximum"),
        ({"type": "number", "minimum": float("inf")}, "#/minimum"),
        ({"type": "integer", "minimum": True}, "#/minimum"),
        ({"type": "object", "properties": []}, "#/properties"),
        ({"type": "object", "required": "a"}, "#/required"),
        ({"type": "array", "prefixItems": 5}, "#/prefixItems"),
        ({"type": "string", "pattern": 5}, "#/pattern"),
        ({"allOf": [{"minLength": "x"}, {"minLength": 2}]}, "#/minLength"),
        ({"allOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": [1]}}, "not a schema"),
        ({"type": "string", "pattern": "\\u{110000}"}, "#/pattern"),
        ({"type": "string", "pattern": "\\u{zz}"}, "#/pattern"),
    ],
)
def test_malformed_keyword_values_are_errors_naming_them(schema, where):
    with pytest.raises(ConstraintError) as e:
        schema_to_gbnf(schema)
    assert where in str(e.value)


def test_bounds_beyond_the_digits_are_lowered_and_stay_valid():
    _, aut = compile_all("schema", {"type": "integer", "maximum": 10**60, "minimum": 10**20})
    assert aut.accepts_bytes(str(10**20).encode()) and aut.accepts_bytes(b"9" * 40)
    assert not aut.accepts_bytes(b"9" * 41) and not aut.accepts_bytes(str(10**20 - 1).encode())


def test_per_token_depth_is_bounded():
    c = json_constraint(load_vocab("synthetic"), root="value", limits=ConstraintLimits(max_stack_depth=64))
    st = c.start()
    with pytest.raises(ConstraintLimitError) as e:
        for _ in range(100):
            st = c.advance_bytes(st, b"[")
    assert e.value.limit == "max_stack_depth" and "generation" in e.value.where


def test_per_token_stacks_are_bounded():
    """Each 'a' opens a rule whose 'b' is optional: the live parses grow by one per byte until the limit."""
    limits = ConstraintLimits(max_stacks=100)
    aut = Automaton(compile_grammar(parse_gbnf('root ::= "a" root "b"? | ""')), limits)
    st = aut.initial
    with pytest.raises(ConstraintLimitError) as e:
        for _ in range(200):
            st = aut.step(st, ord("a"))
    assert e.value.limit == "max_stacks" and len(st.stacks) <= 100


def test_tables_start_afresh_past_max_states_with_the_same_answers():
    """A constraint whose tables are reset every few tokens answers exactly as one that keeps them."""
    vocab = load_vocab("synthetic")
    gbnf = 'root ::= "[" ( [a-z]{0,300} ("," [0-9]{1,40})* ) "]"'
    small = GrammarConstraint(compile_grammar(parse_gbnf(gbnf)), vocab, limits=ConstraintLimits(max_states=40))
    full = GrammarConstraint(compile_grammar(parse_gbnf(gbnf)), vocab)
    text = b"[" + b"abcxyz" * 40 + b",123,4567" * 12
    tokens = [vocab.token_bytes.index(bytes([b])) for b in text]
    s_small, s_full = small.start(), full.start()
    for i, t in enumerate(tokens):
        if i % 7 == 0:
            assert small.allowed(s_small).bits == full.allowed(s_full).bits
        assert small.accepts(s_small, t) and full.accepts(s_full, t)
        s_small, s_full = small.advance(s_small, t), full.advance(s_full, t)
        assert small.engine.n_states <= 40 + 300  # at most the limit plus what one call builds
    assert small.resets > 0 and full.resets == 0
    end = small.advance_bytes(s_small, b"]")
    assert end is not None and small.is_complete(end)


def test_limits_are_validated_and_override_defaults():
    with pytest.raises(ConstraintError, match="max_work"):
        ConstraintLimits(max_work=0)
    with pytest.raises(ConstraintLimitError) as e:
        compile_all("schema", {"type": "string", "minLength": 20}, ConstraintLimits(max_repeat=10))
    assert e.value.limit == "max_repeat" and e.value.value == 10 and e.value.amount == 20


def test_a_refusal_keeps_nothing():
    from llamay.constraints import _CACHE

    vocab = load_vocab("synthetic")
    before = list(_CACHE)
    for n in (10**7, 10**8, 10**9):
        with pytest.raises(ConstraintLimitError):
            grammar_constraint(f'root ::= "a"{{{n}}}', vocab)
        with pytest.raises(ConstraintLimitError):
            lexicon_constraint(["x"] * 2 + ["y" * n], vocab)
    assert list(_CACHE) == before


GUARDED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
resource.setrlimit(resource.RLIMIT_CPU, (20, 20))
from llamay.constraints import json_schema_constraint
from tests.constraints.conftest import synthetic_vocab
try:
    c = json_schema_constraint(sys.argv[1], synthetic_vocab())
    print("compiled", len(c.program.kind))
except MemoryError:
    print("MemoryError")
except Exception as e:
    print(type(e).__name__, getattr(e, "limit", None))
"""


@pytest.mark.native_only
@pytest.mark.parametrize(
    ("schema", "expect"),
    [
        ('{"type": "string", "minLength": 1000000000}', "ConstraintLimitError max_repeat"),  # grew past 20 GB
        ('{"type": "string", "maxLength": 1000000}', "compiled"),  # took 30 s
        ('{"type": "object", "properties": {"a": ' * 600 + "{}" + "}}" * 600, "ConstraintLimitError max_nesting"),
    ],
    ids=["minLength-1e9", "maxLength-1e6", "nested-600"],
)
def test_the_cases_seen_on_the_server_under_rlimits(schema, expect):
    """In a subprocess with 2 GB of address space and 20 s of CPU: before the limits, these exhausted one."""
    out = subprocess.run([sys.executable, "-c", GUARDED, schema], cwd=REPO, capture_output=True, text=True, timeout=300)
    words = out.stdout.split()
    assert " ".join(words[:2]).startswith(expect), (out.returncode, out.stdout, out.stderr[-500:])
    if expect == "compiled":
        assert int(words[1]) <= 20_000


def test_an_allof_of_anyofs_is_charged_by_its_branches_before_they_are_compiled(monkeypatch):
    """allOf of k anyOf lists of objects is one anyOf of their product, every branch a merge of k objects
    compiled one by one: charged when the product is made, by the branches times the schemas each holds, so
    a product too large for max_work is refused before its branches are visited (a real schema's oneOf of
    overlapping branches, negated, made 14,112 branches and took 5 to 9 s to pass max_work). A small one
    still compiles, its branches exact."""
    from llamay.constraints.json_schema import SchemaCompiler as compiler

    visits = 0
    visit = compiler.visit

    def counted(self, *args):
        nonlocal visits
        visits += 1
        return visit(self, *args)

    monkeypatch.setattr(compiler, "visit", counted)

    def objects(i: int) -> dict:
        return {"anyOf": [{"type": "object", "properties": {f"p{i}{j}{m}": {"type": "string"} for m in range(12)}}
                          for j in range(3)]}  # fmt: skip

    budget = Budget()
    with pytest.raises(ConstraintLimitError) as e:
        schema_to_grammar({"allOf": [objects(i) for i in range(9)]}, limits=budget)
    assert e.value.limit == "max_work" and visits < 100
    visits = 0
    budget, aut = compile_all("schema", {"allOf": [objects(i) for i in range(2)]})
    assert aut.accepts_bytes(b'{"p000":"a","p120":"b"}')
    assert not aut.accepts_bytes(b'{"p000":1,"p010":1,"p020":1}')  # (each branch of the first anyOf refuses it)
    assert visits >= 9 and budget.work < QUICK


def test_a_cached_program_past_half_its_rule_limit_is_built_anew():
    """A lazy program's rules grow with every walk that reaches new ones (unique items: hundreds an item); the
    cache hands out a fresh one past half of max_rules, so a schema served long never reaches the limit."""
    import json

    vocab = load_vocab("synthetic")
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    limits = ConstraintLimits(max_rules=4000)
    c1 = json_schema_constraint(schema, vocab, limits=limits)
    assert json_schema_constraint(schema, vocab, limits=limits) is c1  # cached while young
    for i in range(400):  # requests' documents, walked through the one cached program
        if len(c1.program.rule_names) > 2000:
            break
        doc = [f"{chr(97 + (i + j) % 26)}{i}{chr(65 + (i * j) % 26)}" for j in range(5)]
        assert c1.engine.push_bytes(c1.start(), json.dumps(doc).encode()) is not None
    assert len(c1.program.rule_names) > 2000
    c2 = json_schema_constraint(schema, vocab, limits=limits)
    assert c2 is not c1 and len(c2.program.rule_names) < 2000
    assert json_schema_constraint(schema, vocab, limits=limits) is c2


def test_a_cached_program_past_half_its_size_limit_is_built_anew():
    """An object's members in any order: a rule per set of members written, each holding its names' trie, so a
    cached program's size grows faster than its rule count; past half of max_positions the cache hands out a
    fresh one (waiting for half of max_rules, every request would refuse once the size limit is reached)."""
    import random

    vocab = load_vocab("synthetic")
    names = [f"property_{i:02d}" for i in range(12)]
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names}, "additionalProperties": False}
    limits = ConstraintLimits(max_positions=40_000)
    c1 = json_schema_constraint(schema, vocab, limits=limits)
    rng = random.Random(3)
    for i in range(1000):  # requests' documents (members in new orders), walked through the one cached program
        if len(c1.program.kind) > 20_000:
            break
        doc = "{" + ",".join(f'"{n}":{i}' for n in rng.sample(names, 6)) + "}"
        assert c1.engine.push_bytes(c1.start(), doc.encode()) is not None
    assert len(c1.program.kind) > 20_000 and len(c1.program.rule_names) < limits.max_rules // 2
    c2 = json_schema_constraint(schema, vocab, limits=limits)
    assert c2 is not c1 and len(c2.program.kind) < 20_000
    assert json_schema_constraint(schema, vocab, limits=limits) is c2


def test_a_lazy_rule_refused_by_a_limit_leaves_the_cached_program_whole():
    """One request's walk reaching a limit while a lazy rule compiles (here max_rules, unique items naming
    hundreds of rules) must not fail the next requests sharing the cached program: the compile is undone, so
    a document that needs none of it is still accepted and masked as token checks say, and the refused one
    is refused again by the same limit. (Before: the rules numbered in the failed compile stayed, so `{"b":1}`
    then raised max_rules too, and the third walk raised "not a grammar node: None", the lazy rule gone.)"""
    vocab = load_vocab("synthetic")
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                                               "b": {"type": "integer"}}}  # fmt: skip
    limits = ConstraintLimits(max_rules=390)
    c = json_schema_constraint(schema, vocab, limits=limits)
    many = json.dumps({"a": ["x", "y", "zz", "w"]}, separators=(",", ":")).encode()
    for attempt in range(2):
        with pytest.raises(ConstraintLimitError) as e:
            c.engine.push_bytes(c.start(), many)
        assert e.value.limit == "max_rules", attempt
        assert len(c.program.rule_names) < 390
        st = c.start()
        for tok in b'{"b":1':  # (the synthetic vocabulary's first 256 tokens are the single bytes)
            mask = c.allowed(st)
            assert tok in mask and all(c.accepts(st, t) == (t in mask) for t in range(vocab.n_vocab))
            st = c.advance(st, tok)
        assert c.engine.push_bytes(st, b"}") is not None
