"""Keywords that constrain nothing: annotations and keywords no draft defines are ignored, as the JSON Schema
spec says (the grammar is the one without them); `refuse_unknown=True` refuses the unknown ones by name."""

from __future__ import annotations

import pytest

from llamay.constraints import ConstraintError, schema_to_gbnf
from llamay.constraints.json_schema import SchemaCompiler
from tests.constraints.helpers import assert_sound

BASE = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 2}}, "required": ["a"]}

UNKNOWN = {
    "example": {"a": 3},
    "links": [{"rel": "self", "href": "x"}],
    "readonly": True,
    "x-kubernetes-preserve-unknown-fields": True,
    "_format": "custom",
    "self": {"vendor": "com.acme"},
    "nullable": True,
}
ANNOTATIONS = {
    "id": "http://example.com/x",
    "title": "T",
    "description": "D",
    "$comment": "c",
    "examples": [{"a": 2}],
    "default": {"a": 2},
    "deprecated": False,
    "readOnly": True,
}


@pytest.mark.parametrize(("key", "value"), [*UNKNOWN.items(), *ANNOTATIONS.items()], ids=lambda x: str(x)[:20])
def test_keywords_that_constrain_nothing_are_ignored(key, value):
    schema = {**BASE, key: value, "properties": {"a": {**BASE["properties"]["a"], key: value}}}
    assert schema_to_gbnf(schema) == schema_to_gbnf(BASE)
    assert_sound(schema, valid=[{"a": 2}, {"a": 30}], invalid=[{"a": 1}, {}, {"a": "x"}])


@pytest.mark.parametrize("key", sorted(UNKNOWN))
def test_refuse_unknown_names_the_keyword_and_where(key):
    schema = {**BASE, "properties": {"a": {**BASE["properties"]["a"], key: UNKNOWN[key]}}}
    with pytest.raises(ConstraintError, match=f"'{key}' at #/properties/a is not a keyword"):
        schema_to_gbnf(schema, refuse_unknown=True)
    c = SchemaCompiler(schema)
    c.gbnf()
    assert c.unknown_keywords == [f"#/properties/a/{key}"]


@pytest.mark.parametrize("key", sorted(ANNOTATIONS))
def test_refuse_unknown_still_accepts_the_spec_annotations(key):
    assert schema_to_gbnf({**BASE, key: ANNOTATIONS[key]}, refuse_unknown=True) == schema_to_gbnf(BASE)


def test_unknown_keywords_beside_enum_and_in_allof_parts_are_ignored():
    schema = {"allOf": [{**BASE, "x-a": 1}, {"x-a": 2, "properties": {"a": {"maximum": 5}}}]}
    assert_sound(schema, valid=[{"a": 2}, {"a": 5}], invalid=[{"a": 6}, {"a": 1}])
    assert_sound({"enum": ["x", "y"], "x-labels": ["X", "Y"]}, valid=["x", "y"], invalid=["z"])


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
                     "additionalProperties": False},
                    {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"],
                     "additionalProperties": False}]},
         [{"a": 1}, {"b": "x"}], [{"a": 1, "b": "x"}, {}]),
        ({"oneOf": [{"type": "object", "properties": {"k": {"enum": ["x", "y"]}, "v": {"type": "integer"}},
                     "required": ["k"]},
                    {"type": "object", "properties": {"k": {"enum": ["z"]}, "v": {"type": "string"}},
                     "required": ["k"]}]},
         [{"k": "x", "v": 1}, {"k": "z", "v": "s"}], [{"k": "x", "v": "s"}, {"k": "w"}]),
        ({"oneOf": [{"type": "object", "required": ["a"]},
                    {"type": "object", "properties": {"a": False, "b": {"type": "null"}}, "required": ["b"]}]},
         [{"a": 1}, {"b": None}], [{}, {"b": 1}]),
    ],
)  # fmt: skip
def test_one_of_objects_told_apart_by_what_one_requires_and_another_forbids(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=60)


def test_one_of_with_overlapping_objects_generates_each_without_the_others():
    """Each branch without the values of the other (json_negation.py): an object with both keys matches both."""
    schema = {"oneOf": [{"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}]}
    assert_sound(schema, valid=[{"a": 1}, {"b": 1, "c": 2}, {"c": 0, "a": 1}], invalid=[{"a": 1, "b": 2}, {}, {"c": 1}])


D4 = "http://json-schema.org/draft-04/schema#"


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"$schema": D4, "allOf": [{"type": "integer", "maximum": 5, "exclusiveMaximum": True}, {"maximum": 7}]},
         [4, -3], [5, 6]),  # (the exclusive bound was lost: min(True, False))
        ({"$schema": D4, "allOf": [{"type": "integer", "minimum": 2}, {"minimum": 2, "exclusiveMinimum": True}]},
         [3], [2, 1]),
        ({"allOf": [{"type": "integer", "minimum": 2, "maximum": 9}, {"minimum": 4, "maximum": 20}]}, [4, 9], [3, 10]),
    ],
)  # fmt: skip
def test_all_of_takes_the_tighter_bound(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid)


KIND = {"type": "object", "properties": {"k": {"type": "string"}}}


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({**KIND, "if": {"properties": {"k": {"const": "a"}}}, "then": {"required": ["x"]},
          "else": {"required": ["y"]}},
         [{"k": "a", "x": 1}, {"x": 2}], [{"k": "a"}, {"k": "b", "x": 1}, {}, {"y": 2}]),
        ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}, ["ab", 3],
         ["a", 1.5, None]),
        ({"if": {"type": "string"}, "then": {"minLength": 2}}, ["ab", 3, None], ["a"]),
        ({"then": {"minLength": 2}, "else": False}, ["a", 1], []),  # (without if: nothing)
        ({"anyOf": [{"type": "integer"}, {"type": "string"}], "if": {"type": "integer"}, "then": {"minimum": 5}},
         [5, "a"], [4, None]),
    ],
)  # fmt: skip
def test_if_then_else(schema, valid, invalid):
    """(if and then) or (not if and else); `not if` is a subset (json_negation.py): {"k": "b"} is never made."""
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=60)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "string", "enum": ["a", "abcd", "xy"], "maxLength": 3}, ["a", "xy"], ["abcd", "b"]),
        ({"enum": [1, "abcd", {"a": 1}, {"a": "x"}], "properties": {"a": {"type": "integer"}}}, [1, "abcd", {"a": 1}],
         [{"a": "x"}]),  # (properties constrain objects only)
        ({"const": "2020-01-01", "format": "date", "minLength": 10}, ["2020-01-01"], ["2020-01-02"]),
    ],
)  # fmt: skip
def test_enum_and_const_keep_the_values_the_other_keywords_accept(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid)
    with pytest.raises(ConstraintError, match="no value of enum/const fits the schema's type and keywords"):
        schema_to_gbnf({"enum": ["a", "b", 1], "type": "string", "minLength": 2})


def test_if_then_else_constrain_nothing_in_draft_4():
    """Draft 7 made if / then / else: a draft-04 document's are keywords no draft 4 knows, ignored as the spec
    says (a valid shortcut "Ctrl + Shift + A" was refused by a `then` pattern draft 4 never applies)."""
    cond = {"if": {"properties": {"k": {"const": "a"}}}, "then": {"required": ["x"]}, "else": {"required": ["y"]}}
    schema = {"$schema": D4, **KIND, **cond}
    assert_sound(schema, valid=[{"k": "a"}, {"k": "b", "x": 1}, {}], invalid=[{"k": 1}])
    c = SchemaCompiler(schema)
    c.gbnf()
    assert c.unknown_keywords == ["#/if", "#/then", "#/else"]
    assert_sound({**KIND, **cond}, valid=[{"k": "a", "x": 1}], invalid=[{"k": "a"}, {}])  # (draft 7 and later)


def test_all_of_conditions_on_one_property_are_its_cases():
    """allOf parts each `if: {properties: {k: {const}}}` (a discriminator): one anyOf of the cases of k (absent,
    each value, any other), each with the then / else it takes; was refused ('different values for if')."""
    part = lambda v, then: {"if": {"properties": {"k": {"const": v}}}, "then": then}  # noqa: E731
    schema = {"type": "object", "properties": {"k": {"type": "string"}},
              "allOf": [part("a", {"required": ["x"]}), part("b", {"properties": {"x": {"type": "string"}}}),
                        part("c", {"required": ["y"]})]}  # fmt: skip
    assert_sound(schema, valid=[{"k": "a", "x": 1}, {"k": "b", "x": "s"}, {"k": "c", "y": 0}, {"k": "d"},
                                {"x": "s", "y": 1}],
                 invalid=[{"k": "a"}, {"k": "b", "x": 1}, {"k": "c"}, {"x": "s"}, {"x": 1, "y": 1}], n=80)  # fmt: skip
    required = {"allOf": [{**part("a", {"minimum": 3}), "else": {"type": "object"}},
                          {**part(1, {"required": ["z"]}), "else": {"type": ["object", "number"]}}]}  # fmt: skip
    for p in required["allOf"]:
        p["if"]["required"] = ["k"]
    assert_sound(required, valid=[4, {"k": "a"}, {"k": 1, "z": 0}, {}], invalid=[2, {"k": 1}], n=80)


def test_two_different_conditions_merge_as_the_anyof_they_mean():
    """Parts with other conditions (not one property's values): the second's as (if and then) or (not if, and
    else), merged with the first (a subset where `not if` is one)."""
    schema = {"allOf": [{"if": {"type": "string"}, "then": {"minLength": 2}},
                        {"if": {"minimum": 5}, "then": {"multipleOf": 2}}]}  # fmt: skip
    assert_sound(schema, valid=["ab", 6, 3, None], invalid=["a", 7], n=60)
