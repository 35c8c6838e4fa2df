"""json_shared.py: a document's equal parts made one object (and nothing else), and the compiler's sharing of
them: a copy of a schema is compiled once, and the language is the one compiled without the sharing."""

from __future__ import annotations

import copy
import importlib
import json
import random
import re
import tarfile
from functools import cache

import pytest

from llamay.constraints import ConstraintError, compile_grammar, json_shared, schema_to_grammar
from llamay.constraints.automaton import Automaton
from llamay.constraints.json_keywords import check_document
from llamay.constraints.limits import Budget
from tests.constraints.helpers import schema_validator, sentences
from tests.paths import FIXTURES

SCHEMA_MODULE = importlib.import_module("llamay.constraints.json_schema")  # (the package's json_schema: a function)


@pytest.fixture
def always(monkeypatch):
    """Every document copied, however few values it has."""
    monkeypatch.setattr(json_shared, "_FROM", 0)


def _copy(doc):
    """shared_copy as the compiler calls it: with the document's count of values."""
    return json_shared.shared_copy(doc, check_document(doc, Budget()))[0]


def _containers(doc) -> list:
    out, todo = [], [doc]
    while todo:
        x = todo.pop()
        if isinstance(x, (dict, list)):
            out.append(x)
            todo.extend(x.values() if isinstance(x, dict) else x)
    return out


BRANCHES = [{"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}, {"type": "string"}]


def test_equal_parts_are_one_object_and_the_document_is_the_same_json(always):
    doc = {
        "properties": {
            "a": {"oneOf": copy.deepcopy(BRANCHES)},
            "b": {"type": "array", "items": {"oneOf": copy.deepcopy(BRANCHES)}},
        }
    }
    before = json.dumps(doc)
    got = _copy(doc)
    assert json.dumps(got) == before and json.dumps(doc) == before  # (the same JSON, key order too; doc untouched)
    a, b = got["properties"]["a"]["oneOf"], got["properties"]["b"]["items"]["oneOf"]
    assert a is b  # the two lists, one object
    assert doc["properties"]["a"]["oneOf"] is not doc["properties"]["b"]["items"]["oneOf"]
    assert not any(any(x is y for y in _containers(doc)) for x in _containers(got))  # a copy, all of it


@pytest.mark.parametrize(
    "left, right",
    [([1], [1.0]), ([1], [True]), ([0], [False]), ([0.0], [-0.0]), ({"p": 1, "q": 2}, {"q": 2, "p": 1}),
     (["1"], [1]), ([None], [[]]), ([[1]], [1])],
)  # fmt: skip
def test_parts_that_differ_as_json_stay_apart(always, left, right):
    got = _copy({"l": {"enum": [left]}, "r": {"enum": [right]}})
    assert got["l"] is not got["r"] and json.dumps(got["l"]) == json.dumps({"enum": [left]})
    assert json.dumps(got["r"]) == json.dumps({"enum": [right]})


def test_annotations_aside_and_data_kept_whole(always):
    doc = {"properties": {
        "a": {"type": "integer", "description": "one", "title": "A", "examples": [1]},
        "b": {"type": "integer", "description": "two", "default": 3},
        "h": {"type": "integer", "readOnly": False},  # (a boolean: kept, as a property's schema `false` would be)
        "c": {"enum": [{"description": "one"}, 1]}, "d": {"enum": [{"description": "two"}, 1]},
        "e": {"properties": {"description": {"type": "string"}}}, "f": {"properties": {"description": True}},
        "g": {"properties": {"title": {"type": "string"}}},
    }}  # fmt: skip
    got = _copy(doc)["properties"]
    assert got["a"] is got["b"] and got["a"]["description"] == "one"  # (the first one's annotations)
    assert got["h"] is not got["a"]
    assert got["c"] is not got["d"] and got["c"]["enum"][0] == {"description": "one"}  # (an enum's values: data)
    assert got["e"] is not got["f"] and got["e"] is not got["g"]  # (properties named like annotations: kept)
    assert json.dumps(got["e"]) == json.dumps(doc["properties"]["e"])


@pytest.mark.parametrize("ident", [{"$id": "b.json"}, {"id": "b.json"}, {"$anchor": "b"}, {"$dynamicAnchor": "b"}])
def test_a_document_with_an_identifier_below_its_root_is_kept_as_it_is(always, ident):
    doc = {"$defs": {"b": {**ident, "type": "string"}}, "properties": {"x": {"type": "string"}}}
    assert _copy(doc) is doc


def test_a_property_named_id_or_a_key_that_is_not_a_string(always):
    doc = {"properties": {"id": {"type": "string"}, "n": {"type": "string"}}}
    got = _copy(doc)
    assert got is not doc and got["properties"]["id"] is got["properties"]["n"]
    odd = {"properties": {1: {"type": "string"}}}
    assert _copy(odd) is odd


def test_a_small_document_is_not_copied():
    doc = {"properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    assert _copy(doc) is doc


def test_a_copy_of_an_anyof_is_compiled_once(always):
    """The second copy (its annotations aside) is the first one's rules: none named after it."""
    s = {"properties": {"a": {"description": "one", "anyOf": copy.deepcopy(BRANCHES)},
                        "b": {"description": "two", "anyOf": copy.deepcopy(BRANCHES)}}}  # fmt: skip
    rules = schema_to_grammar(s).rules
    assert any(n.startswith("a-") for n in rules)
    assert not any(n.startswith("b-") for n in rules), sorted(rules)
    for change in ({"anyOf": [*BRANCHES[:1], {"type": "string", "minLength": 1}]}, {"maxProperties": 3}):
        other = copy.deepcopy(s)
        other["properties"]["b"].update(change)  # (a branch or another keyword beside them: its own rules)
        assert any(n.startswith("b-") for n in schema_to_grammar(other).rules), change


# -- the same language with and without the sharing, on real-world schemas -------------------------------------

ARCHIVE = FIXTURES / "jsonschemabench" / "maskbench-dev.tgz"
# schemas that repeat themselves (the copies were most of their compile), and some that do not
NAMES = ("WashingtonPost---wp_17_Normalized.json", "JsonSchemaStore---meta.schema.json", "Github_ultra---o65325.json",
         "JsonSchemaStore---golangci-lint.json", "WashingtonPost---wp_3_Normalized.json", "Github_ultra---o21378.json",
         "Github_medium---o9802.json")  # fmt: skip


@cache
def _schemas() -> dict[str, dict]:
    if not ARCHIVE.exists():
        pytest.skip(f"no {ARCHIVE}")
    with tarfile.open(ARCHIVE) as tar:
        return {m.name.rsplit("/", 1)[-1]: json.loads(tar.extractfile(m).read())
                for m in tar.getmembers() if m.name.rsplit("/", 1)[-1] in NAMES}  # fmt: skip


def _program(schema, monkeypatch, share: bool):
    with monkeypatch.context() as m:
        if not share:
            m.setattr(SCHEMA_MODULE, "shared_copy", lambda doc, values: (doc, False))
        return compile_grammar(schema_to_grammar(schema))


@pytest.mark.parametrize("name", NAMES)
def test_the_language_is_the_one_compiled_without_sharing(name, monkeypatch):
    """Sentences of each accepted by the other, and the test instances accepted alike."""
    data = _schemas()[name]
    try:
        plain = _program(data["schema"], monkeypatch, share=False)
    except ConstraintError as e:
        with pytest.raises(ConstraintError) as got:
            _program(data["schema"], monkeypatch, share=True)
        assert str(got.value) == str(e)
        return
    shared = _program(data["schema"], monkeypatch, share=True)
    a, b = Automaton(plain), Automaton(shared)
    rng = random.Random(name)
    for text in sentences(shared, rng, 10, budget=100):
        assert a.accepts_bytes(text), text
    for text in sentences(plain, rng, 10, budget=100):
        assert b.accepts_bytes(text), text
    for t in data.get("tests", []):
        text = json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False).encode()
        assert a.accepts_bytes(text) == b.accepts_bytes(text), t["data"]


@pytest.mark.parametrize("name", NAMES)
def test_the_shared_documents_sentences_validate(name, monkeypatch):
    pytest.importorskip("jsonschema")
    data = _schemas()[name]
    try:
        shared = _program(data["schema"], monkeypatch, share=True)
    except ConstraintError:
        pytest.skip("refused")
    check = schema_validator(data["schema"])
    bad = [s for s in sentences(shared, random.Random(name), 10, budget=100) if not check.is_valid(json.loads(s))]
    assert bad == []


def _refs_and_objects(doc) -> tuple[list[str], list[dict]]:
    refs, objects, todo = [], [], [doc]
    while todo:
        x = todo.pop()
        if isinstance(x, dict):
            objects.append(x)
            if isinstance(x.get("$ref"), str):
                refs.append(x["$ref"])
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
    return refs, objects


@pytest.mark.parametrize("name", NAMES)
def test_a_flat_documents_resolver_answers_as_the_walked_one(name):
    """A copied document has no identifier below its root: its Resolver reads the root only (`flat`), and
    answers every `$ref` of the document and every object's base URI as the one that walks the document."""
    from llamay.constraints.json_refs import Resolver

    schema = _schemas()[name]["schema"]
    copied, flat = json_shared.shared_copy(schema, check_document(schema, Budget()))
    if not flat:
        pytest.skip("identifiers below the root: not copied")
    walked, read = Resolver(copied, Budget()), Resolver(copied, Budget(), flat=True)
    assert read.root_base == walked.root_base and len(read.base) < len(walked.base)
    refs, objects = _refs_and_objects(copied)  # (a document may have none: all inlined)
    schemas = [obj for obj in objects if id(obj) in walked.base]  # (the schema objects: not data)
    assert len(schemas) > 100
    for obj in schemas:
        assert read.base_of(obj, read.root_base) == walked.base_of(obj, "elsewhere") == walked.root_base
    for ref in refs:
        try:
            want = walked.resolve(ref, walked.root_base, "#")
        except ConstraintError as e:
            with pytest.raises(ConstraintError, match=re.escape(str(e))):
                read.resolve(ref, read.root_base, "#")
            continue
        got = read.resolve(ref, read.root_base, "#")
        assert got[0] is want[0] and got[1:] == want[1:]
