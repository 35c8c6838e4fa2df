"""`not` (json_negation.py): what a schema rejects, generated as a subset of it; every grammar's sentences are
checked with `jsonschema` (assert_sound), and the documents given are accepted / refused as it says."""

from __future__ import annotations

import pytest

from llamay.constraints import ConstraintError, schema_to_gbnf
from llamay.constraints.json_schema import SchemaCompiler
from tests.constraints.helpers import assert_sound, gbnf_per_hash_seed

CASES = [
    ({"not": {"type": "integer"}}, ["a", None, [1], {"a": 1}], [1, 2]),
    ({"not": {"not": {"type": "integer"}}}, [1, -3], ["a", 1.5]),
    ({"type": "integer", "not": {"minimum": 3}}, [2, -10], [3, 4, "a"]),
    ({"type": "number", "not": {"maximum": 0.5, "exclusiveMinimum": 0}}, [0.75, 0, -1], [0.25, 0.5]),
    ({"type": "string", "not": {"minLength": 3}}, ["", "ab"], ["abc"]),
    ({"type": "string", "not": {"maxLength": 2}}, ["abc"], ["ab", ""]),
    ({"type": "array", "not": {"items": {"type": "integer"}}}, [["a"], [None, "b"]], [[], [1, 2]]),
    ({"type": "object", "not": {"required": ["a"]}}, [{}, {"b": 1}], [{"a": 1}]),
    ({"type": "object", "not": {"properties": {"a": {"type": "string"}}, "required": ["a"]}},
     [{"a": 1}, {"b": "x"}], [{"a": "x"}, {"a": "x", "b": 2}]),
    ({"not": {"anyOf": [{"type": "string"}, {"type": "object"}]}}, [1, None, [], True], ["a", {}]),
    ({"not": {"allOf": [{"type": "number"}, {"minimum": 2}]}}, [1, "a", None], [2, 3.5]),
    ({"not": {"enum": [1, "a"]}}, [None, True, [], {}], [1, "a"]),
    ({"type": "object", "not": {"maxProperties": 0}}, [{"a": 1}, {"a": 1, "b": 2}], [{}]),
    ({"allOf": [{"not": {"type": "string"}}, {"not": {"type": "object"}}]}, [1, None], ["a", {}]),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "valid", "invalid"), CASES)
def test_not_generates_only_what_the_negated_schema_rejects(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid, n=40, budget=60)


def test_a_not_with_no_schema_for_what_it_rejects_is_refused_by_name():
    with pytest.raises(ConstraintError, match="'not' at # is not supported"):
        schema_to_gbnf({"type": "string", "not": {"pattern": "^a"}})


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "string", "not": {"enum": ["a", "bc"]}}, ["", "b", "bcd", "ab", "x"], ["a", "bc"]),
        ({"not": {"const": "x"}}, ["", "xx", 1, None], ["x"]),
        ({"type": "integer", "not": {"enum": [1, 3]}}, [0, 2, 4, -5], [1, 3]),
        ({"type": "number", "not": {"const": 2.5}}, [2.4, 2.6, 3], [2.5]),
        ({"type": "boolean", "not": {"const": True}}, [False], [True]),
        ({"type": "integer", "oneOf": [{"const": 1}, {"const": 2}]}, [1, 2], [3]),
        ({"oneOf": [{"type": "string", "enum": ["all", "x"]}, {"type": "string", "enum": ["none"]}]},
         ["all", "none"], ["y"]),
        ({"oneOf": [{"type": "string"}, {"enum": ["a"]}]}, ["b", ""], ["a", 1]),
        ({"not": {"not": {"enum": ["a", 2]}}}, ["a", 2], ["b", 3]),
    ],
)  # fmt: skip
def test_the_values_an_enum_leaves_out(schema, valid, invalid):
    """`not` of an enum / const is the other types and the other values of its types: strings other than its
    strings (written without escapes), numbers between and beyond its numbers, the other boolean; oneOf
    branches of enums with no common value are told apart."""
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=60)


def test_one_of_told_apart_by_a_listed_property_is_made_to_require_it():
    """Branches that list one property with values no other branch allows: generated with it required (a
    subset), each value then matches its branch alone; no negation needed (it once exceeded max_work)."""
    schema = {"type": "object", "oneOf": [
        {"properties": {"k": {"enum": ["a", "b"]}, "x": {"type": "integer"}}},
        {"properties": {"k": {"const": "c"}, "x": {"type": "string"}}},
    ]}  # fmt: skip
    assert_sound(
        schema, valid=[{"k": "a", "x": 1}, {"k": "c", "x": "s"}, {"k": "b"}], invalid=[{}, {"k": "a", "x": "s"}]
    )


def test_an_enum_without_a_not_enum_keeps_its_other_values():
    """`enum` with `not: {enum}`: the values of the first the second does not list (an object value's negation
    has no schema: every value was refused)."""
    schema = {"allOf": [{"enum": [{"foo": False}, 1, "a"]}, {"not": {"enum": [6, "foo", [], True, {"foo": 12}, 1.0]}}]}
    assert_sound(schema, valid=[{"foo": False}, "a"], invalid=[{"foo": 12}, 1, 6])


def test_an_enum_without_a_not_enum_is_charged():
    """Comparing the two lists is charged where the schema is."""
    from llamay.constraints import ConstraintLimitError, ConstraintLimits, schema_to_grammar

    schema = {"properties": {"a": {"enum": list(range(3000)), "not": {"enum": list(range(1, 3001))}}}}
    with pytest.raises(ConstraintLimitError) as e:
        schema_to_grammar(schema, limits=ConstraintLimits(max_work=9000))
    assert e.value.where == "#/properties/a"


def test_the_strings_an_enum_leaves_out_with_lengths():
    """A string other than an enum's with minLength 1 leaves out "" too; the enum's strings no length allows
    need no leaving out (with none left: the lengths alone); a `not` inside oneOf branches over the same
    property (`init_system` not "upstart", or "upstart") was refused as 'not compiled'."""
    assert_sound({"type": "string", "minLength": 1, "not": {"enum": ["upstart", "a"]}},
                 valid=["b", "upstarts", "ups"], invalid=["", "a", "upstart"])  # fmt: skip
    assert_sound({"type": "string", "maxLength": 3, "not": {"enum": ["upstart"]}}, valid=["", "abc"],
                 invalid=["abcd", "upstart"])  # fmt: skip
    attrs = lambda s: {"properties": {"a": {"type": "object", "required": ["i"], "properties": {"i": s}}}}  # noqa: E731
    schema = {"type": "object", "oneOf": [attrs({"not": {"enum": ["u"]}, "type": "string", "minLength": 1}),
                                          {**attrs({"enum": ["u"]}), "required": ["a"]}]}  # fmt: skip
    assert_sound(schema, valid=[{"a": {"i": "systemd"}}, {"a": {"i": "u"}}, {}], invalid=[{"a": {"i": ""}}])
    c = SchemaCompiler({"type": "string", "minLength": 2, "not": {"enum": ["ab"]}})  # (other lengths: refused)
    with pytest.raises(ConstraintError):
        c.gbnf()
    assert any("other than given ones with 'minLength'" in x for x in c.left_out), c.left_out


def test_a_oneof_fails_when_two_branches_match():
    """`not oneOf` is "no branch matches, or two do" (each pair's allOf): items of a oneOf [true, string] fail
    it when they are strings, so an array of strings fails that branch and matches the other (was refused)."""
    assert_sound({"not": {"oneOf": [{"type": "integer"}, {"minimum": 2}]}}, valid=[2, 5], invalid=[1, -3, "a"])
    schema = {"oneOf": [{}, {"type": "array", "items": {"oneOf": [{}, {"type": "string"}]}, "minItems": 1}]}
    assert_sound(schema, valid=[["a", "b"], 3, "s", []], invalid=[[1], [1, None]], n=60)


def test_a_negated_enum_of_several_types_is_the_same_in_every_process():
    """`not` of an enum: the types its values do not have, and the other values of each type they have, were
    taken from sets of names, in an order that changed with the hash seed."""
    schema = {"type": ["string", "number", "boolean", "null", "array", "object"],
              "not": {"type": ["string", "number", "boolean", "null"], "enum": ["a", 1, True, None]}}  # fmt: skip
    assert len(gbnf_per_hash_seed(schema)) == 1
