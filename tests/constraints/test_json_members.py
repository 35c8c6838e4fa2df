"""Members in any order (json_members.py), as a property against `jsonschema`: hypothesis writes objects whose
names share prefixes (long ones too, so a set of members has rules below its trie's root, short ones written
into it), with required, dependentRequired, min/maxProperties and additionalProperties, and documents of those
names, others near them, repeated ones, in any order. The grammar accepts a document exactly when `jsonschema`
does (within the layout's documented subsets, kept out of the drawn schemas: other members count once towards
minProperties, the greedy completion test with dependencies and maxProperties) and never a repeated listed
name."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay.constraints import compile_grammar, json_members, schema_to_grammar
from llamay.constraints.automaton import Automaton
from tests.constraints.helpers import schema_validator

# names sharing prefixes: long ones (a first character's subtree past json_members._INLINE characters) and short
# ones, a name that is a prefix of others, an escaped quote and a non-ASCII character
NAMES = ["UnnecessaryAbstractClass", "UnnecessaryApply", "UnnecessaryFilter", "UnusedImports", "UnusedPrivateMember",
         "MagicNumber", "MaxLineLength", "MayBeConst", "a", "ab", "abc", "abd", 'q"x', "é", "id", "U"]  # fmt: skip
OTHERS = ["", "Unnecessary", "UnusedX", "MagicNumbe", "abcd", "i", "x", "idl", "Ma", "q"]
VALUES = [{"type": "integer"}, {"type": "string"}, {}]
WRITTEN = ["1", '"s"', "true", "null"]


@st.composite
def objects(draw) -> dict:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=10, unique=True))
    schema: dict = {"type": "object", "properties": {n: draw(st.sampled_from(VALUES)) for n in names}}
    schema["required"] = draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
    counts = draw(st.sampled_from(["none", "min", "max", "deps"]))
    if counts == "deps":
        first = draw(st.sampled_from(names))
        schema["dependentRequired"] = {first: draw(st.lists(st.sampled_from(names), min_size=1, max_size=2))}
    elif counts == "max":
        schema["maxProperties"] = draw(st.integers(max(1, len(schema["required"])), 5))  # (fewer: refused)
    additional = draw(st.sampled_from(["absent", "false", "integer"]))
    if counts == "min":
        schema["minProperties"] = draw(st.integers(1, min(4, len(names))))  # (more: refused, json_objects.py)
        additional = "false"  # (another member counts once towards it: a subset, documented)
    if additional != "absent":
        schema["additionalProperties"] = False if additional == "false" else {"type": "integer"}
    return schema


@st.composite
def documents(draw, schema: dict) -> str:
    names = list(schema["properties"])
    keys = draw(st.lists(st.one_of(st.sampled_from(names), st.sampled_from(OTHERS)), max_size=7))
    values = [draw(st.sampled_from(WRITTEN)) for _ in keys]
    members = [f"{json.dumps(k, ensure_ascii=False)}:{v}" for k, v in zip(keys, values, strict=True)]
    return "{" + ",".join(members) + "}"


@pytest.mark.native_only
@pytest.mark.parametrize("root_inline", [json_members._ROOT_INLINE, 0])  # (a trie's root in a set's rule, or not)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_members_in_any_order_agree_with_jsonschema(root_inline, data):
    pytest.importorskip("jsonschema")
    schema = data.draw(objects())
    check = schema_validator(schema)
    default, json_members._ROOT_INLINE = json_members._ROOT_INLINE, root_inline
    try:
        a = Automaton(compile_grammar(schema_to_grammar(schema)))
        agree(a, check, schema, data)
    finally:
        json_members._ROOT_INLINE = default


def agree(a: Automaton, check, schema: dict, data) -> None:
    """The automaton accepts the drawn documents of `schema` exactly when `check` does, a listed name once."""
    for _ in range(40):
        text = data.draw(documents(schema))
        pairs = json.loads(text, object_pairs_hook=list)
        keys = [k for k, _ in pairs]
        if any(keys.count(n) > 1 for n in schema["properties"]):
            expected = False  # (a listed name at most once)
        elif len(set(keys)) != len(keys):
            continue  # (another key twice: jsonschema sees one member; the grammar may take both)
        else:
            expected = check.is_valid(dict(pairs))
        assert a.accepts_bytes(text.encode()) == expected, (schema, text)


def in_listed_order(keys: list[str], names: list[str]) -> bool:
    """Listed names in the order listed, other keys after every listed one (llama.cpp's layout)."""
    at, other = -1, False
    for key in keys:
        if key in names:
            if other or names.index(key) <= at:
                return False
            at = names.index(key)
        else:
            other = True
    return True


@pytest.mark.native_only
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_listed_order_as_a_key_trie_agrees_with_jsonschema_in_that_order(data):
    """`ordered` (listed_order past json_objects._ORDERED_TRIE_FROM properties, here from 0): a document is
    accepted exactly when `jsonschema` takes it and its keys are in the listed order, other keys last. The
    dependencies of a property are required in that order (json_objects.py: a subset), so the reference is
    the schema with them required."""
    pytest.importorskip("jsonschema")
    from llamay.constraints import json_objects

    schema = data.draw(objects())
    deps = [d for ds in schema.get("dependentRequired", {}).values() for d in ds]
    check = schema_validator({**schema, "required": list(dict.fromkeys([*schema["required"], *deps]))})
    names = list(schema["properties"])
    default, json_objects._ORDERED_TRIE_FROM = json_objects._ORDERED_TRIE_FROM, 0
    try:
        a = Automaton(compile_grammar(schema_to_grammar(schema, listed_order=True)))
    finally:
        json_objects._ORDERED_TRIE_FROM = default
    fits = {"integer": "1", "string": '"s"'}  # (a value of each property's schema: the order decides)
    listed = [
        f"{json.dumps(n, ensure_ascii=False)}:{fits.get(schema['properties'][n].get('type'), 'null')}" for n in names
    ]
    drawn = [data.draw(documents(schema)) for _ in range(40)]
    for text in ["{" + ",".join(listed) + "}", "{" + ",".join(listed[::-1]) + "}", *drawn]:
        pairs = json.loads(text, object_pairs_hook=list)
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys) and not any(keys.count(n) > 1 for n in names):
            continue  # (another key twice: jsonschema sees one member; the grammar may take both)
        expected = len(set(keys)) == len(keys) and in_listed_order(keys, names) and check.is_valid(dict(pairs))
        assert a.accepts_bytes(text.encode()) == expected, (schema, text)


def test_thousands_of_optional_properties_in_listed_order_are_a_key_trie():
    """An API request's schema (llama.cpp's listed order) of 3,000 optional properties: each key a walk down
    the names' trie (llama.cpp's layout explored a parse per property at the first key, past max_stacks)."""
    from llamay.constraints import LLAMACPP

    names = [f"prop_{i:04d}_{'x' * (i % 17)}" for i in range(3000)]
    schema = {"type": "object", "properties": {n: {"type": "string"} for n in names}}
    a = Automaton(compile_grammar(schema_to_grammar(schema, **LLAMACPP)))
    first, then, last = names[5], names[1234], names[2999]
    assert a.accepts_bytes(f'{{"{first}":"a","{then}":"b","{last}":"c"}}'.encode())
    assert a.accepts_bytes(b"{}")
    assert not a.accepts_bytes(f'{{"{then}":"b","{first}":"a"}}'.encode())  # (out of the listed order)
    assert not a.accepts_bytes(f'{{"{first}":"a","{first}":"a"}}'.encode())
    assert not a.accepts_bytes(b'{"other":"a"}')  # (closed: llama.cpp's objects)
