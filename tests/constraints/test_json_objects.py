"""Objects (json_objects.py): other properties where additionalProperties is absent (closed_objects=True
closes them), patternProperties, minProperties / maxProperties; every grammar checked against `jsonschema`."""

from __future__ import annotations

import json

import pytest

from llamay.constraints import (
    ConstraintError,
    ConstraintLimitError,
    ConstraintLimits,
    schema_to_gbnf,
    schema_to_grammar,
)
from tests.constraints.helpers import assert_sound, schema_automaton

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
          "required": ["name"]}  # fmt: skip


def test_an_object_without_additional_properties_admits_others_after_the_listed_ones():
    valid = [{"name": "a"}, {"name": "a", "age": 3, "nick": [1, {"x": None}]}, {"name": "a", "zz": "y"}]
    invalid = [{"name": 1}, {"name": "a", "age": -1}, {"age": 3}]
    assert_sound(PERSON, valid=valid, invalid=invalid)
    closed = schema_automaton(PERSON, closed_objects=True)
    assert closed.accepts_bytes(b'{"name":"a","age":3}')
    assert not closed.accepts_bytes(b'{"name":"a","nick":1}')


def test_other_properties_never_repeat_a_listed_name():
    a = schema_automaton(PERSON)
    assert not a.accepts_bytes(b'{"name":"a","age":3,"age":"x"}')
    assert not a.accepts_bytes(b'{"name":"a","name":2}')
    for other in (b"x", b"ax", b"nb", b"a", b"", b"nam", b"namex", b"name ", b"ag", b"agE", b"age0"):  # any other key
        assert a.accepts_bytes(b'{"name":"a","' + other + b'":1}'), other


@pytest.mark.parametrize("listed_order", [False, True])
def test_other_keys_are_exactly_the_complement_of_the_listed_names(listed_order):
    import random

    names = ["fsType", "fs", "path", "pathX", "readOnly", "ab", "abcdefgh", "é", "q" + "uvwxyz" * 12]
    schema = {"type": "object", "properties": dict.fromkeys(names, False), "additionalProperties": {"type": "null"}}
    a = schema_automaton(schema, listed_order=listed_order)
    rng = random.Random(0)
    keys = {n[:i] + x for n in names for i in range(len(n) + 1) for x in ("", "x", "T", "é")}
    keys |= {"".join(rng.choice("fsTypeathXé ") for _ in range(rng.randrange(8))) for _ in range(500)}
    wrong = [k for k in keys if a.accepts_bytes(f'{{"{k}":null}}'.encode()) != (k not in names)]
    assert wrong == []


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "object", "patternProperties": {"^[a-z]+$": {"type": "integer"}}, "additionalProperties": False},
         [{}, {"ab": 1, "c": 2}], [{"ab": "x"}, {"A": 1}]),
        ({"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "properties": {"id": {"type": "integer"}},
          "required": ["id"]},
         [{"id": 1}, {"id": 1, "x-a": "s"}], [{"id": 1, "x-a": 1}, {"id": "1"}]),
        ({"type": "object", "patternProperties": {"a": {"minimum": 0}, "b": {"maximum": 9}}},
         [{"ab": 5}, {"xa": 1}], [{"ab": 10}, {"b": 10}]),
        ({"type": "object", "properties": {"a1": {"type": "number"}}, "patternProperties": {"^a[0-9]$": {"minimum": 2}},
          "required": ["a1"], "additionalProperties": False},
         [{"a1": 2}], [{"a1": 1}]),
    ],
)  # fmt: skip
def test_pattern_properties(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=60)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        # keys matching one pattern take its schema alone, both patterns both schemas (the test named NoType)
        ({"type": "object", "allOf": [{"patternProperties": {"a": {"type": "number", "minimum": 10}}},
                                      {"patternProperties": {"b": {"type": "number", "minimum": 3}}}],
          "minProperties": 1}, [{"a": 15, "b": 5}, {"ab": 11}, {"x": "y"}], [{}, {"ab": 5}, {"b": 1}]),
        # a pattern matching a listed name: the listed property takes both schemas, other keys never its name
        ({"type": "object", "properties": {"ColorPalette": {"type": "object"}},
          "patternProperties": {"^[^/]": {"type": ["string", "object"]}}, "additionalProperties": False},
         [{"ColorPalette": {}, "x": "s"}, {"Colo": "z"}], [{"ColorPalette": "s"}, {"/a": "s"}]),
        # keys matching no pattern take additionalProperties
        ({"type": "object", "patternProperties": {"^x-": {"type": "string"}},
          "additionalProperties": {"type": "integer"}}, [{"x-a": "s", "b": 1}, {}], [{"x-a": 1}, {"b": "s"}]),
        ({"type": "object", "properties": {"id": {"type": "integer"}}, "patternProperties": {"^i": {"type": "integer"}},
          "additionalProperties": False, "required": ["id"]}, [{"id": 1, "ix": 2}],
         [{"id": 1, "ix": "s"}, {"id": 1, "y": 1}]),
        # a dependency matching a pattern takes its schema; a property with dependencies is listed
        ({"type": "object", "dependentRequired": {"a": ["xb"]}, "patternProperties": {"^x": {"type": "integer"}},
          "additionalProperties": {"type": "string"}}, [{"a": "s", "xb": 1}, {"xc": 2}], [{"xb": "s"}, {"a": "s"}]),
    ],
)  # fmt: skip
def test_pattern_keys_take_the_schemas_of_the_patterns_they_match(schema, valid, invalid):
    """Keys followed through every pattern's automaton and the listed names' trie (json_keys.py): exact."""
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=80)
    a = schema_automaton({**schema, "type": "object"})
    for doc in valid:
        assert a.accepts_bytes(json.dumps(doc, separators=(",", ":")).encode()), doc


def test_many_patterns_compile_without_a_value_per_set_of_them():
    """Past the exact sets (2^n - 1 of them: 40 patterns took all memory), a key takes every pattern's schema at
    once: a subset, still sound."""
    schema = {"type": "object", "patternProperties": {f"^p{i}[a-z]*$": {"type": "integer", "minimum": i}
                                                      for i in range(40)}}  # fmt: skip
    assert_sound(schema, valid=[{"p39x": 39}, {}], invalid=[{"p5": 1}, {"p1": "s"}], n=30, budget=80)


def test_patterns_against_long_names_are_charged_by_their_length():
    """Each pattern is run over each listed (or required) name: 40 patterns over 1 MB of names was 40 MB of
    automaton steps, charged 40 x 50."""
    names = [("x" * 20000) + str(i) for i in range(50)]
    for schema in ({"type": "object", "properties": {n: {} for n in names}},
                   {"type": "object", "required": names}):  # fmt: skip
        schema["patternProperties"] = {f"y{i}": {} for i in range(40)}
        with pytest.raises(ConstraintLimitError) as e:
            schema_to_grammar(schema, limits=ConstraintLimits(max_work=200_000))
        assert e.value.limit == "max_work"


PATTERN_SCHEMAS = [
    # (exact: up to 3 patterns) listed names matching patterns, keys matching one, two or none of them
    {"properties": {"xa": {"type": "integer", "maximum": 50}, "é": {"type": "boolean"}},
     "patternProperties": {"^x": {"type": "integer"}, "a$": {"type": ["integer", "string"], "minimum": 10}},
     "additionalProperties": {"type": "string"}},
    {"patternProperties": {"[0-9]+": {"type": "integer"}, "^[^x]*$": {"type": "string"}, "é": {"type": "boolean"}},
     "additionalProperties": False},
    {"properties": {"a": {"type": "integer"}}, "required": ["a"], "patternProperties": {"^[x1]?$": {"type": "string"}},
     "maxProperties": 2},
    {"dependentRequired": {"a": ["x1"]}, "patternProperties": {"^x": {"type": "integer"}}},
    # propertyNames a pattern: every key matches it (listed names it refuses never written)
    {"properties": {"a": {}, "1": {"type": "integer"}}, "propertyNames": {"pattern": "^[1c/]"},
     "patternProperties": {".*": {"type": ["integer", "string"]}, "c$": {"maximum": 20}}},
]  # fmt: skip
FOUR = {"patternProperties": {"a": {"type": "integer"}, "b": {"minimum": 2}, "^c": {"maximum": 20}, "1$": {}},
        "additionalProperties": {"type": "boolean"}}  # fmt: skip


@pytest.mark.parametrize("listed_order", [False, True])
@pytest.mark.parametrize("schema", [*PATTERN_SCHEMAS, FOUR])
def test_pattern_keys_agree_with_jsonschema_on_every_short_key(schema, listed_order):
    """Every key of up to 3 characters from a small alphabet (inside and around the patterns' classes), with
    values of each type, alone and beside another member: never accepted when jsonschema rejects it, and
    (any order, up to 3 patterns: exact) accepted when it accepts it."""
    from itertools import product

    from tests.constraints.helpers import schema_validator

    pytest.importorskip("jsonschema")
    exact = not listed_order and schema is not FOUR
    schema = {"type": "object", **schema}
    check = schema_validator(schema)
    a = schema_automaton(schema, listed_order=listed_order)
    keys = ["".join(t) for n in range(4) for t in product("ax1cé/", repeat=n)]
    docs = [{k: v} for k in keys for v in (1, 15, 30, 60, "s", True)]
    docs += [{"a": 12, k: v} for k in keys[:60] for v in (15, "s")]
    docs += [{k: v, "x1": 3} for k in keys[:60] for v in (3, "s")]
    text = lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()  # noqa: E731
    unsound = [d for d in docs if a.accepts_bytes(text(d)) and not check.is_valid(d)]
    assert unsound == []
    if exact:
        missed = [d for d in docs if check.is_valid(d) and not a.accepts_bytes(text(d))]
        assert missed == []


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({**PERSON, "minProperties": 2}, [{"name": "a", "age": 1}, {"name": "a", "age": 1, "b": 2}], [{"name": "a"}]),
        ({"type": "object", "minProperties": 1, "maxProperties": 2}, [{"a": 1}, {"a": 1, "b": 2}],
         [{}, {"a": 1, "b": 2, "c": 3}]),
        ({**PERSON, "maxProperties": 3}, [{"name": "a"}, {"name": "a", "age": 1, "x": 0}],
         [{"name": "a", "age": 1, "x": 0, "y": 1}]),
        ({"type": "object", "additionalProperties": {"type": "boolean"}, "minProperties": 1}, [{"a": True}],
         [{}, {"a": 1}]),
    ],
)  # fmt: skip
def test_property_counts(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=60)


def test_min_properties_that_other_members_would_have_to_reach_are_refused():
    """Two generated members may share a key ({"a": 1, "a": 2} has one property): refused, not approximated."""
    with pytest.raises(ConstraintError, match="minProperties"):
        schema_to_gbnf({"type": "object", "additionalProperties": {"type": "boolean"}, "minProperties": 2})


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({**PERSON, "dependentRequired": {"age": ["email"]}}, [{"name": "a", "age": 1, "email": "e"},
         {"name": "a", "email": "e"}], [{"name": "a", "age": 1}]),
        ({**PERSON, "dependencies": {"age": ["nick"]}, "$schema": "http://json-schema.org/draft-07/schema#"},
         [{"name": "a", "nick": 2}], [{"name": "a", "age": 1}]),
        ({**PERSON, "dependentSchemas": {"age": {"required": ["x"]}}}, [{"name": "a"}], [{"name": "a", "age": 1}]),
        ({**PERSON, "properties": {**PERSON["properties"], "secret": False}}, [{"name": "a"}],
         [{"name": "a", "secret": 1}]),
        ({**PERSON, "properties": {**PERSON["properties"], "age": {"not": {}}}}, [{"name": "a", "b": 1}],
         [{"name": "a", "age": 1}]),
    ],
)  # fmt: skip
def test_dependencies_and_forbidden_properties(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=60)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"not": {"type": "string"}}, [1, None, [], {}], ["x"]),
        ({"not": {"type": ["string", "number"]}}, [True, None], ["x", 1, 1.5]),
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, [[], ["a"]], [["a", "a"]]),
        ({"anyOf": [{"not": {}}, {"type": "integer"}]}, [1], ["x"]),
    ],
)
def test_not_and_unique_items(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=60)


SEVEN = {f"p{i}": {"type": "integer"} for i in range(7)}


@pytest.mark.parametrize("additional", [None, {"type": "string"}])
def test_members_come_in_any_order_each_listed_one_once(additional):
    schema = {"type": "object", "properties": SEVEN, "required": ["p1", "p5"]}
    if additional is not None:
        schema["additionalProperties"] = additional
    valid = [
        {"p1": 1, "p5": 2},
        {"x": "s", "p1": 1, "y": "t", "p5": 2, "z": "u"},
        {"p0": 0, "x": "s", "p1": 1, "p3": 3, "y": "t", "p5": 5, "p6": 6},
        {"p6": 1, "p5": 2, "a": "", "p4": 4, "p3": 3, "p2": 2, "p1": 1, "p0": 0},
        {"p1": 1, "p2": 2, "a": "", "p5": 5},
        {"p5": 1, "p": "", "p1": 2, "p55": "", "p0": 0},
    ]
    invalid = [{"x": "s", "p5": 2}, {"p1": 1, "x": "s"}, {"p1": "1", "x": "s", "p5": 2}]
    if additional is not None:
        invalid.append({"p1": 1, "x": 1, "p5": 2})
    assert_sound(schema, valid=valid, invalid=invalid, n=80, budget=120)
    a = schema_automaton(schema)
    for bad in ('{"p1":1,"p1":2,"p5":3}', '{"p1":1,"x":"s","p1":2,"p5":3}', '{"p5":1,"p6":1,"p1":2,"p5":3}',
                '{,"p1":1,"p5":2}', '{"p1":1,"x":"s",,"p5":2}', '{"p1":1,"p5":2,}',
                '{"p5":1,"\\u0070\\u0031":2}'):  # fmt: skip
        assert not a.accepts_bytes(bad.encode()), bad  # (a listed key once, commas between, no escaped listed key)
    llama = schema_automaton(schema, listed_order=True)  # llama.cpp's layout: other members last
    assert llama.accepts_bytes(b'{"p1":1,"p5":2,"x":"s"}')
    assert not llama.accepts_bytes(b'{"p1":1,"x":"s","p5":2}')
    assert not llama.accepts_bytes(b'{"p5":1,"p1":2}')


def test_any_order_is_lazy_one_rule_per_set_of_members_visited():
    """An object of 60 properties compiles to a few rules; a document visits one set of members per member."""
    from llamay.constraints import compile_grammar, schema_to_grammar
    from llamay.constraints.automaton import Automaton

    many = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(60)}, "required": ["k59"]}
    program = compile_grammar(schema_to_grammar(many))
    before = len(program.rule_alts)
    a = Automaton(program)
    doc = {f"k{i}": i for i in range(59, -1, -3)}
    assert a.accepts_bytes(json.dumps(doc, separators=(",", ":")).encode())
    assert not a.accepts_bytes(b'{"k1":1}') and not a.accepts_bytes(b'{"k59":1,"k59":1}')
    assert before < 20 and len(program.rule_alts) < 40 * len(doc)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "maxProperties": 2, "required": ["c"]},
         [{"c": 1}, {"a": 1, "c": 2}, {"x": 1, "c": 2}], [{"a": 1, "b": 2, "c": 3}, {"a": 1, "x": 2, "c": 3}]),
        ({"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 2, "additionalProperties": False},
         [{"a": 1, "b": 2}, {"b": 1, "a": 2}], [{"a": 1}, {}]),
        ({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "dependentRequired": {"a": ["b"], "b": ["c"]}},
         [{}, {"c": 1}, {"c": 1, "a": 2, "b": 3}, {"b": 1, "c": 2}], [{"a": 1}, {"a": 1, "b": 2}, {"b": 1}]),
        ({"type": "object", "properties": {"a": {}}, "dependentRequired": {"a": ["zz"]}, "maxProperties": 2},
         [{"a": 1, "zz": 2}, {"zz": 1}, {"q": 1}], [{"a": 1}, {"a": 1, "q": 2}]),
    ],
)  # fmt: skip
def test_counts_and_dependencies_are_exact_in_any_order(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=80)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"enum": [2, "a", 3.0]}, [2, 2.0, 3, 3.0, "a"], [2.5, 4, "b"]),
        ({"const": 2**53}, [2**53, float(2**53)], [2**53 + 1]),
        ({"const": 10**30}, [10**30], [10**30 + 1, 1e30]),  # (1e30 is another number in Python: not written)
        ({"const": 10**400}, [10**400], [10**400 + 1]),  # (no float has it: only the integer is written)
        ({"type": "integer", "enum": [1, 2]}, [1, 2, 1.0], [3, 1.5]),  # draft 2020-12: 1.0 is an integer
        ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "enum": [1, 2]}, [1, 2],
         [1.0, 3]),  # draft 4: 1.0 is not an integer
        ({"$schema": "http://json-schema.org/draft-04/schema#", "enum": [1]}, [1, 1.0], [2]),
    ],
)  # fmt: skip
def test_enum_and_const_numbers_equal_to_integers_are_written_both_ways(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid)


def test_an_optional_property_no_value_fits_is_never_generated_a_required_one_refused():
    builtin = {"enum": ["MODIFIABLE", "DELETABLE"], "type": "object"}  # (seen: no value fits, so never there)
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "builtin": builtin}}
    assert_sound(schema, valid=[{"name": "a"}, {"x": 1}], invalid=[{"builtin": "DELETABLE"}, {"builtin": {}}])
    with pytest.raises(ConstraintError, match="no value of enum/const fits"):
        schema_to_gbnf({**schema, "required": ["builtin"]})


def test_one_of_whose_branch_becomes_impossible_keeps_the_others():
    """Branch 1 (radius) and not branch 0 (length and width, required by the rest) leaves nothing: left out."""
    props = {k: {"type": "number"} for k in ("length", "radius", "width")}
    schema = {"type": "object", "properties": props, "required": ["length", "width"],
              "oneOf": [{"required": ["length", "width"]}, {"required": ["radius"]}]}  # fmt: skip
    assert_sound(schema, valid=[{"length": 1, "width": 2}], invalid=[{"length": 1, "width": 2, "radius": 3}, {}])


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": {"type": "integer"}},
         [{}, {"ab": 1, "c": 2}], [{"A": 1}, {"a": "x"}]),
        ({"type": "object", "propertyNames": {"maxLength": 3}}, [{"abc": 1}], [{"abcd": 1}]),
        ({"type": "object", "properties": {"long_name": {}, "ok": {"type": "integer"}},
          "propertyNames": {"maxLength": 3}, "additionalProperties": False}, [{"ok": 1}, {}], [{"long_name": 1}]),
        ({"type": "object", "propertyNames": {"enum": ["a", "b"]}}, [{"a": 1}, {"b": [], "a": None}], [{"c": 1}]),
        ({"type": "object", "propertyNames": False}, [{}], [{"a": 1}]),
    ],
)  # fmt: skip
def test_property_names(schema, valid, invalid):
    """propertyNames: listed names it refuses are never written; other keys are the strings it allows."""
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=60)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
          "dependencies": {"error": {"maxProperties": 1}}, "properties": {"error": {"type": "string"}}},
         [{"error": "x"}, {"b": 1, "c": 2}, {}], [{"error": "x", "b": 1}, {"error": 1}]),
        ({**PERSON, "dependentSchemas": {"age": {"required": ["x"]}, "name": {"properties": {"age": {"minimum": 3}}}}},
         [{"name": "a"}, {"name": "a", "age": 5, "x": 0}], [{"name": "a", "age": 1, "x": 0}, {"name": "a", "age": 5}]),
        ({"type": "object", "required": ["a"], "dependentSchemas": {"a": {"required": ["b"]}}},
         [{"a": 1, "b": 2}], [{"a": 1}, {"b": 1}]),
    ],
)  # fmt: skip
def test_dependent_schemas_are_exact(schema, valid, invalid):
    """A property with a dependent schema is written, the schema then applied (it never was)."""
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=60)


def test_dependent_schemas_split_is_charged():
    """Reading the dependencies to split them is charged where the schema is (the limit: above the document's
    reading, about 13,000 steps, below the whole compile's, about 16,000)."""
    deps = {f"p{i}": {"required": ["q"]} for i in range(4000)}
    with pytest.raises(ConstraintLimitError) as e:
        schema_to_grammar({"properties": {"o": {"dependencies": deps}}}, limits=ConstraintLimits(max_work=15000))
    assert e.value.where == "#/properties/o"


def test_property_names_of_an_enum_beside_pattern_properties():
    """propertyNames an enum beside patternProperties: each name listed with the schemas it takes (its own, the
    patterns it matches, else additionalProperties), no other key (every key was refused)."""
    schema = {"type": "object", "propertyNames": {"enum": ["p1", "p2", "q", "r", 3]},
              "patternProperties": {"^p": {"type": "number"}, "2$": {"minimum": 2}},
              "properties": {"q": {"type": "string"}}, "additionalProperties": {"type": "boolean"}}  # fmt: skip
    assert_sound(schema, valid=[{}, {"p1": 1}, {"p2": 2, "q": "s", "r": True}],
                 invalid=[{"p1": "a"}, {"p2": 1}, {"q": 1}, {"r": 1}, {"s": True}, {"p3": 1}], n=60)  # fmt: skip
    closed = {**schema, "additionalProperties": False}
    assert_sound(closed, valid=[{"p1": 1, "q": "s"}], invalid=[{"r": True}], n=60)


def test_dependencies_that_exclude_a_property_are_pairs():
    """{P: {not: {required: [X]}}} is "no P or no X", counted once with {X: {not: {required: [P]}}}: two such pairs
    fit the split into cases (four of these dependencies left every one of the properties out)."""
    excl = lambda x: {"not": {"required": [x]}}  # noqa: E731
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {k: {"type": "integer"} for k in "abcd"},
              "dependencies": {"a": excl("b"), "b": excl("a"), "c": excl("d"), "d": excl("c")}}  # fmt: skip
    assert_sound(schema, valid=[{"a": 1, "c": 2}, {"b": 1, "d": 2}, {"a": 1}, {}],
                 invalid=[{"a": 1, "b": 2}, {"c": 1, "d": 1, "a": 1}], n=60)  # fmt: skip
