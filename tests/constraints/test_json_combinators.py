"""oneOf / allOf reasoning (json_combinators.py): work proportional to products of the schema's sizes is charged
to the compilation's Budget before it is done."""

from __future__ import annotations

import pytest

from llamay.constraints import ConstraintError, ConstraintLimitError, ConstraintLimits, schema_to_grammar
from tests.constraints.helpers import assert_sound, gbnf_per_hash_seed


def test_overlapping_branches_charge_their_required_lists_per_pair():
    """Branches that may overlap are compared pairwise (excludes, negation): n^2 pairs each walking a long
    `required` shared through a $ref (60 x 60 x 60 took 6 s and was never charged; 300 x 300 took minutes)."""
    shared = {"type": "object", "required": [f"p{i}" for i in range(60)]}
    schema = {"$defs": {"a": shared}, "oneOf": [{"$ref": "#/$defs/a"}] * 60}
    with pytest.raises(ConstraintLimitError) as e:
        schema_to_grammar(schema, limits=ConstraintLimits(max_work=100_000))
    assert e.value.limit == "max_work"


def test_a_branch_of_an_unknown_format_generates_every_type():
    """An unknown format implies no type: the branch generates any value, so the oneOf must count its numbers
    as matching the number branch too (5 was accepted: it matches both)."""
    schema = {"oneOf": [{"format": "int32"}, {"type": "number"}]}
    assert_sound(schema, valid=["x", {}, [1]], invalid=[5, 2.5])


def test_keywords_that_constrain_nothing_imply_no_type():
    """`properties: {}` / `required: []` constrain nothing: any value fits (a string item was refused: the schema
    was generated as an object), and a oneOf counts those values as overlapping."""
    assert_sound({"type": "array", "items": {"required": [], "properties": {}}}, valid=[["a", 1], [{}]])
    assert_sound({"oneOf": [{"properties": {}}, {"type": "string"}]}, valid=[5, {}, [1]], invalid=["x"])
    # (but `minimum: 0` and `contains: {}` constrain numbers and arrays)
    assert_sound({"minimum": 0}, valid=[0, 3], invalid=[-1])
    assert_sound({"contains": {}}, valid=[[1]], invalid=[[]])


def test_allof_of_a_tuple_and_an_items_schema_checks_the_tuple_items():
    """allOf [{items: S}, {prefixItems: [...]}]: the tuple's items are items too, valid against S ([1] was
    accepted); the draft-7 tuple (a list `items`) was refused as 'allOf of a list'."""
    s = {"allOf": [{"type": "array", "items": {"type": "string"}}, {"prefixItems": [True]}]}
    assert_sound(s, valid=[["a"]], invalid=[[1], ["a", 1]])
    s7 = {"$schema": "http://json-schema.org/draft-07/schema#", "allOf": [s["allOf"][0], {"items": [True]}]}
    assert_sound(s7, valid=[["a"]], invalid=[[1], ["a", 1]])


def test_oneof_with_an_enum_of_arrays_keeps_the_other_arrays():
    """The values a oneOf branch shares with an enum of arrays are taken out, not every array: arrays of other
    lengths, and of the length of one value with an item changed (["size"] and ["size", "mode"] were refused)."""
    items = {"type": "array", "items": {"enum": ["size", "deleted", "mode"]}}
    s = {"oneOf": [items, {"enum": [["deleted"], []]}]}
    assert_sound(s, valid=[["size"], ["size", "mode"], ["deleted", "deleted"]], invalid=[["deleted"], [], ["x"]])


def test_tuple_and_items_merge_and_array_enum_negation_are_charged():
    """Each tuple entry merged with the items schema, and an enum array's ways to differ (n ways of n items), are
    charged where they are made."""
    tuple_ = {"allOf": [{"type": "array", "items": {"type": "integer"}}, {"prefixItems": [True] * 2000}]}
    with pytest.raises(ConstraintLimitError) as e:
        schema_to_grammar({"properties": {"a": tuple_}}, limits=ConstraintLimits(max_work=3500))
    assert e.value.where == "#/properties/a"
    with pytest.raises(ConstraintLimitError) as e:
        schema_to_grammar({"not": {"enum": [list(range(60))]}}, limits=ConstraintLimits(max_work=3000))
    assert e.value.where == "#/not"


def test_oneof_branches_told_apart_by_disjoint_patterns_of_a_required_property():
    """Branches that each require `status`, a string matching ^success$ / ^fail$ / ^error$: no string matches
    two of the patterns (their automata's product accepts nothing), so no value matches two branches (every
    branch but the first was left out: a pattern has no negation)."""
    branch = lambda pattern: {"required": ["status"], "properties": {"status": {"type": "string", "pattern": pattern}}}  # noqa: E731
    schema = {"type": "object", "oneOf": [branch("^success$"), branch("^fail$"), branch("^error$")]}
    assert_sound(schema, valid=[{"status": "fail"}, {"status": "error", "x": 1}, {"status": "success"}],
                 invalid=[{"status": "failure"}, {}, {"status": 1}])  # fmt: skip
    # patterns that share a string ("ab") are not told apart: neither has a schema for the other's strings left
    with pytest.raises(ConstraintError, match="oneOf"):
        schema_to_grammar({"type": "object", "oneOf": [branch("^a"), branch("b$")]})


def test_conditional_cases_are_the_same_in_every_process():
    """The cases of if / then chains on one property's values group the values by the tests they pass; the
    values were taken from a set of texts, so their order (and the rules') changed with the hash seed."""
    kinds = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
    schema = {"type": "object", "properties": {"kind": {"enum": kinds}}, "allOf": [
        {"if": {"properties": {"kind": {"enum": ["alpha", "beta", "eps"]}}, "required": ["kind"]},
         "then": {"required": ["a"]}},
        {"if": {"properties": {"kind": {"enum": ["gamma", "beta", "zeta"]}}, "required": ["kind"]},
         "then": {"required": ["g"]}}]}  # fmt: skip
    assert len(gbnf_per_hash_seed(schema)) == 1
