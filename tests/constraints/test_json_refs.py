"""`$ref` resolution (json_refs.py): plain-name fragments, base URIs, recursion; every grammar is checked
against `jsonschema` (its sentences validate, invalid documents are refused)."""

from __future__ import annotations

import pytest

from llamay.constraints import (
    ConstraintError,
    ConstraintLimitError,
    compile_grammar,
    schema_to_gbnf,
    schema_to_grammar,
)
from tests.constraints.helpers import assert_sound

D4 = "http://json-schema.org/draft-04/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def _named(schema_key: str, draft: str) -> dict:
    """A property whose $ref names a subschema (an integer) by a plain-name fragment; the root is an object."""
    target = {schema_key: "#jumpDrive", "type": "integer", "minimum": 3}
    if schema_key == "$anchor":
        target[schema_key] = "jumpDrive"
    return {
        "$schema": draft,
        "type": "object",
        "definitions": {"jd": target, "other": {"type": "string"}},
        "properties": {"drive": {"$ref": "#jumpDrive"}},
        "required": ["drive"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(("key", "draft"), [("id", D4), ("$id", D7), ("$anchor", D2020), ("$anchor", None)])
def test_a_fragment_name_refers_to_its_subschema_not_the_root(key, draft):
    schema = _named(key, draft or D2020)
    if draft is None:
        del schema["$schema"]
    assert_sound(schema, valid=[{"drive": 3}, {"drive": 40}], invalid=[{"drive": {}}, {"drive": 2}, {"drive": "x"}])


def test_relative_references_resolve_against_the_enclosing_id():
    schema = {
        "$schema": D2020,
        "$id": "https://example.com/schemas/root.json",
        "type": "object",
        "$defs": {
            "b": {
                "$id": "b.json",
                "type": "object",
                "properties": {"n": {"$ref": "#/$defs/c"}},  # b.json's own $defs, not the root's
                "required": ["n"],
                "additionalProperties": False,
                "$defs": {"c": {"type": "integer", "maximum": 9}},
            },
            "c": {"type": "string"},
        },
        "properties": {
            "x": {"$ref": "b.json"},
            "y": {"$ref": "b.json#/$defs/c"},
            "z": {"$ref": "https://example.com/schemas/b.json"},
            "w": {"$ref": "#/$defs/c"},
        },
        "required": ["x", "y", "z", "w"],
        "additionalProperties": False,
    }
    good = {"x": {"n": 1}, "y": 2, "z": {"n": 9}, "w": "s"}
    assert_sound(schema, valid=[good], invalid=[{**good, "x": {"n": "s"}}, {**good, "y": "s"}, {**good, "w": 1}])


def test_draft4_ids_change_the_base_of_their_subschemas():
    schema = {
        "$schema": D4,
        "id": "http://example.com/root.json",
        "type": "object",
        "properties": {
            "item": {
                "id": "item.json",
                "type": "object",
                "definitions": {"v": {"type": "boolean"}},
                "properties": {"v": {"$ref": "#/definitions/v"}},
                "required": ["v"],
                "additionalProperties": False,
            },
            "id": {"type": "string"},  # a property named id is no identifier
            "again": {"$ref": "item.json"},
        },
        "required": ["item", "id", "again"],
        "additionalProperties": False,
        "definitions": {"v": {"type": "integer"}},
    }
    good = {"item": {"v": True}, "id": "x", "again": {"v": False}}
    assert_sound(schema, valid=[good], invalid=[{**good, "item": {"v": 1}}, {**good, "again": {"v": 1}}])


def test_recursive_references_through_allof_compile_and_stay_valid():
    node = {"allOf": [{"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}},
                       "additionalProperties": False}]}  # fmt: skip
    schema = {"$schema": D2020, "$defs": {"node": node}, "$ref": "#/$defs/node"}
    assert_sound(schema, valid=[{"child": {"child": {}}, "v": 1}], invalid=[{"child": {"v": "x"}}], budget=200)


@pytest.mark.parametrize(
    "schema",
    [
        {"allOf": [{"$ref": "#"}], "type": "object", "properties": {"a": {"type": "integer"}}},
        {
            "$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
            "$ref": "#/$defs/a",
        },
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {"anyOf": [{"allOf": [{"$ref": "#"}, {"type": "object"}]}, {"type": "null"}]},
    ],
)
def test_references_that_only_refer_to_themselves_are_bounded(schema):
    """A refusal (or a grammar that validates), never RecursionError."""
    try:
        compile_grammar(schema_to_grammar(schema))
    except ConstraintLimitError as e:
        assert e.limit in ("max_nesting", "max_work"), e
        return
    except ConstraintError as e:
        assert any(m in str(e) for m in ("refers to itself", "allows no value", "left recursion")), e
        return
    assert_sound(schema)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"$ref": "other.json"}, "external references are not fetched"),
        ({"$ref": "#nowhere"}, "no schema of the document is named #nowhere"),
        ({"$schema": D2020, "$defs": {"a": {"id": "#a"}}, "$ref": "#a"}, "named #a"),  # id is no keyword in 2020-12
    ],
)
def test_references_that_cannot_be_resolved_are_refused_by_name(schema, message):
    with pytest.raises(ConstraintError, match=message):
        schema_to_gbnf(schema)


def test_a_refs_siblings_are_ignored_in_drafts_4_to_7():
    """Drafts 4 to 7 ignore the keywords beside a `$ref` (jsonschema does): {"type": "string", "$ref": object}
    is the object (it was merged into a string: every valid document refused)."""
    target = {"type": "object", "properties": {"a": {"type": "integer"}}}
    field = {"type": "string", "$ref": "#/definitions/d"}
    for draft in ("draft-04", "draft-07"):
        schema = {"$schema": f"http://json-schema.org/{draft}/schema#", "type": "object",
                  "properties": {"S": field}, "definitions": {"d": target}}  # fmt: skip
        assert_sound(schema, valid=[{"S": {"a": 1}}], invalid=[{"S": "x"}, {"S": {"a": "x"}}])
    schema = {"type": "object", "properties": {"S": {"minProperties": 1, "$ref": "#/$defs/d"}}, "$defs": {"d": target}}
    assert_sound(schema, valid=[{"S": {"a": 1}}], invalid=[{"S": {}}])  # (2019-09 on: siblings apply)


def test_a_ref_with_ignored_siblings_fails_inside_its_branch():
    """A draft-7 oneOf branch {type, $ref} whose target cannot be compiled is left out, as before siblings were
    ignored (compiled as a plain reference, its error refused the whole schema: hugo.json)."""
    bad = {"type": "object", "patternProperties": {"^(?!a)$": {}}}
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"bad": bad},
              "oneOf": [{"type": "object", "$ref": "#/definitions/bad"}, {"type": "string"}]}  # fmt: skip
    assert_sound(schema, valid=["x"], invalid=[1])
