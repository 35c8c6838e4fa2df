"""JSON Schema to grammar: llama.cpp's cases (integration strings and converter outputs, as data), number
ranges checked exhaustively, unsupported keywords, and random sentences validated with `jsonschema`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from llamay.constraints import ConstraintError, compile_grammar, parse_gbnf, schema_to_gbnf, schema_to_grammar
from llamay.constraints.automaton import Automaton
from llamay.constraints.json_schema import LLAMACPP, SchemaCompiler
from tests.constraints.helpers import assert_sound, schema_automaton, sentences

DATA = Path(__file__).parent / "data"
INTEGRATION = json.loads((DATA / "llamacpp_grammar_integration.json").read_text())
TO_GRAMMAR = json.loads((DATA / "llamacpp_json_schema_to_grammar.json").read_text())
NOTES = json.loads((DATA / "llamacpp_json_schema_notes.json").read_text())["cases"]
REAL_WORLD = json.loads((DATA / "schemas.json").read_text())["schemas"]
# llama.cpp ignores these keywords silently; llamay approximates them (uniqueItems: at most one item), so the
# cases' valid strings with more are refused
APPROXIMATED = {"required props": "uniqueItems"}


def validator(schema):
    """A jsonschema validator; llama.cpp's draft-7 tuples (`items` as a list) get the draft-7 validator and
    its single-schema `prefixItems` is read as `items`, as llama.cpp reads it."""
    jsonschema = pytest.importorskip("jsonschema")
    if isinstance(schema.get("prefixItems"), dict):
        schema = {**{k: v for k, v in schema.items() if k != "prefixItems"}, "items": schema["prefixItems"]}
    default = jsonschema.Draft7Validator if isinstance(schema.get("items"), list) else jsonschema.Draft202012Validator
    cls = jsonschema.validators.validator_for(schema, default=default)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@pytest.mark.parametrize("case", [c for c in INTEGRATION["cases"] if "schema" in c], ids=lambda c: c["name"])
def test_llamacpp_integration_schema(case):
    strict = True
    a = schema_automaton(case["schema"], strict=strict, **LLAMACPP)  # llama.cpp's choices
    if case["name"] not in APPROXIMATED:
        assert [s for s in case["pass"] if not a.accepts_bytes(s.encode())] == []
    assert [s for s in case["fail"] if a.accepts_bytes(s.encode())] == []


@pytest.mark.parametrize("case", TO_GRAMMAR["cases"], ids=lambda c: c["name"])
def test_llamacpp_schema_to_grammar(case):
    """Failures fail here too; otherwise random sentences of our grammar and of the one llama.cpp writes are
    accepted by the other (or one way only, where the notes say why)."""
    if case["status"] == "failure":
        with pytest.raises(ConstraintError):
            schema_to_gbnf(case["schema"])
        return
    ours = compile_grammar(parse_gbnf(schema_to_gbnf(case["schema"], **LLAMACPP)))  # as llama.cpp, printed
    theirs = compile_grammar(parse_gbnf(case["llamacpp_grammar"]))  # their output parses with our GBNF parser
    compare = NOTES.get(case["name"], {}).get("compare", "equal")
    rng = random.Random(case["name"])
    if compare in ("equal", "ours-within"):
        their_automaton = Automaton(theirs)
        assert [s for s in sentences(ours, rng, 40) if not their_automaton.accepts_bytes(s)] == []
    if compare in ("equal", "theirs-within"):
        our_automaton = Automaton(ours)
        assert [s for s in sentences(theirs, rng, 40) if not our_automaton.accepts_bytes(s)] == []


@pytest.mark.native_only
@pytest.mark.parametrize("case", [c for c in TO_GRAMMAR["cases"] if c["status"] == "success"], ids=lambda c: c["name"])
def test_llamacpp_schema_sentences_validate(case):
    check = validator(case["schema"])
    ours = compile_grammar(schema_to_grammar(case["schema"]))
    for s in sentences(ours, random.Random(3), 40):
        check.validate(json.loads(s))


@pytest.mark.native_only
@pytest.mark.parametrize("name", sorted(REAL_WORLD))
def test_real_world_schema_sentences_validate(name):
    schema = REAL_WORLD[name]
    check = validator(schema)
    ours = compile_grammar(schema_to_grammar(schema))
    for s in sentences(ours, random.Random(name), 60, budget=120):
        check.validate(json.loads(s))


INTEGER_RANGES = [(0, None), (1, None), (-5, None), (None, -5), (None, 100), (15, 300), (-123, 42), (-10, 10),
                  (0, 0), (-1, -1), (99, 1001), (-1000, -999), (7, 7)]  # fmt: skip


@pytest.mark.parametrize(("lo", "hi"), INTEGER_RANGES)
def test_integer_ranges_exactly(lo, hi):
    schema = {"type": "integer"}
    if lo is not None:
        schema["minimum"] = lo
    if hi is not None:
        schema["maximum"] = hi
    a = schema_automaton(schema)
    for v in range(-1200, 1201):
        want = (lo is None or v >= lo) and (hi is None or v <= hi)
        assert a.accepts_bytes(str(v).encode()) == want, v
    for text in ("-0", "00", "+1", "01", "1.0", "1e2", ""):
        assert not a.accepts_bytes(text.encode()), text


@pytest.mark.parametrize(
    "bounds",
    [
        {"minimum": 0},
        {"exclusiveMinimum": 0},
        {"maximum": 5.5},
        {"minimum": -1, "exclusiveMaximum": 0},
        {"minimum": -2.5, "maximum": 3.25},
        {"exclusiveMinimum": -1, "exclusiveMaximum": 1},
        {"minimum": 0, "exclusiveMinimum": 2, "maximum": 10},
        {"minimum": 1, "exclusiveMinimum": True, "maximum": 3},  # draft 4 booleans
    ],
)
def test_number_bounds_are_never_broken(bounds):
    schema = {"type": "number", **bounds}
    lo, hi, lo_x, hi_x = _bounds(bounds)
    prog = compile_grammar(schema_to_grammar(schema))
    seen = 0
    for s in sentences(prog, random.Random(str(bounds)), 200, budget=12):
        v = float(s)
        assert (v > lo if lo_x else v >= lo) if lo is not None else True, (s, bounds)
        assert (v < hi if hi_x else v <= hi) if hi is not None else True, (s, bounds)
        seen += 1
    assert seen


def _bounds(b):
    lo, hi, lo_x, hi_x = b.get("minimum"), b.get("maximum"), False, False
    if isinstance(b.get("exclusiveMinimum"), bool):
        lo_x = b["exclusiveMinimum"]
    elif "exclusiveMinimum" in b and (lo is None or b["exclusiveMinimum"] >= lo):
        lo, lo_x = b["exclusiveMinimum"], True
    if "exclusiveMaximum" in b and (hi is None or b["exclusiveMaximum"] <= hi):
        hi, hi_x = b["exclusiveMaximum"], True
    return lo, hi, lo_x, hi_x


@pytest.mark.parametrize(
    ("schema", "yes", "no"),
    [
        ({"type": "number", "exclusiveMinimum": 0}, ["0.5", "1", "0.001", "12.25"], ["0", "0.0", "-1", "-0.5"]),
        ({"type": "number", "minimum": -1, "exclusiveMaximum": 0}, ["-1", "-0.5", "-0.01"], ["0", "-0.0", "1"]),
        ({"type": "number", "maximum": 5.5}, ["5", "4.99", "-3.5", "-100"], ["6", "5.6", "1e3"]),
    ],
)
def test_number_bound_examples(schema, yes, no):
    a = schema_automaton(schema)
    assert [s for s in yes if not a.accepts_bytes(s.encode())] == []
    assert [s for s in no if a.accepts_bytes(s.encode())] == []


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "minItems": 2}, "uniqueItems"),
        ({"type": "number", "multipleOf": 0.00001}, "multipleOf"),
        ({"type": "string", "not": {"pattern": "^a"}}, "not"),
        ({"type": "object", "properties": {"a": {}}, "propertyNames": {"maxLength": 3}}, "propertyNames"),
        ({"type": "array", "contains": {"type": "integer"}, "maxContains": 2}, "contains"),
        (
            {
                "type": "object",
                "required": ["a"],
                "dependentSchemas": {"a": {"required": ["b"]}, "c": {"required": ["d"]}, "e": {"required": ["f"]}},
            },
            "dependentSchemas",
        ),  # (up to 2 are exact: json_schema.without_dependent_schemas)
        ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, "oneOf"),
        (
            {"type": "object", "properties": {"a": {}}, "additionalProperties": False, "minProperties": 2},
            "minProperties",
        ),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_unsupported_keywords_are_errors_naming_keyword_and_path(schema, keyword):
    with pytest.raises(ConstraintError) as e:
        schema_to_gbnf(schema)
    assert keyword in str(e.value) and "#" in str(e.value)
    c = SchemaCompiler(schema, strict=False)
    c.gbnf()
    assert any(keyword in msg for msg in c.ignored)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "kaboom"}, "unknown type"),
        ({"$ref": "https://example.com/x.json"}, "external references are not fetched"),
        ({"$ref": "#/$defs/missing"}, "not in the schema"),
        ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "incompatible types"),
        ({"type": "string", "minLength": 5, "maxLength": 2}, "below minLength"),
        ({"type": "integer", "minimum": 5, "maximum": 4}, "no integer"),
        ({"properties": {"a": False}, "required": ["a"]}, "allows no value"),
        ({"enum": []}, "non-empty"),
    ],
)
def test_impossible_or_malformed_schemas(schema, message):
    with pytest.raises(ConstraintError, match=message):
        schema_to_gbnf(schema)


def test_listed_order_keeps_the_written_order_and_optional_ones_may_be_skipped():
    schema = {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "b": {"type": "integer"}, "a": {"type": "integer"}},
        "required": ["b"],
        "additionalProperties": False,
    }
    a = schema_automaton(schema, listed_order=True)
    for ok in ('{"b":1}', '{"x":1,"b":2}', '{"b":2,"a":3}', '{"x":1,"b":2,"a":3}'):
        assert a.accepts_bytes(ok.encode()), ok
    for bad in ('{"a":3,"b":2}', '{"b":2,"x":1}', '{"x":1}', "{}", '{"b":1,}', '{,"b":1}'):
        assert not a.accepts_bytes(bad.encode()), bad


@pytest.mark.parametrize("additional", [False, True, {"type": "string"}])
def test_small_objects_take_their_members_in_any_order_each_once(additional):
    props = {"x": {"type": "integer"}, "b": {"type": "integer"}, "a": {"type": "integer"}}
    schema = {"type": "object", "properties": props, "required": ["b"], "additionalProperties": additional}
    ok = ['{"b":1}', '{"a":3,"b":2}', '{"b":2,"x":1}', '{"a":1,"x":2,"b":3}', '{"x":1,"b":2,"a":3}']
    bad = ['{"x":1}', "{}", '{"b":1,}', '{,"b":1}', '{"b":1,"b":2}', '{"a":1,"b":2,"a":3}', '{"b":"s"}']
    more = ['{"z":"s","b":1}', '{"b":1,"z":"s","a":2}']
    if additional is False:
        bad += more
    else:
        ok += more
    documents = [json.loads(d) for d in bad if d in ('{"x":1}', "{}", '{"b":"s"}', *more)]  # (JSON, no duplicates)
    assert_sound(schema, valid=[json.loads(d) for d in ok], invalid=documents)
    a = schema_automaton(schema)
    assert [d for d in bad if a.accepts_bytes(d.encode())] == []  # duplicate keys too (jsonschema keeps one)


def test_additional_properties_never_repeat_a_listed_key():
    schema = {"type": "object", "properties": {"ab": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    a = schema_automaton(schema)
    assert a.accepts_bytes(b'{"ab":1,"a":"x","abc":"y","b":"z"}')
    assert not a.accepts_bytes(b'{"ab":"no"}')
    assert not a.accepts_bytes(b'{"ab":1,"ab":"x"}')
    assert not a.accepts_bytes(b'{"ab":1,"\\u0061b":"x"}')  # no escapes in additional keys


def test_recursive_refs_and_discriminated_one_of():
    tree = REAL_WORLD["tree"]
    a = schema_automaton(tree)
    assert a.accepts_bytes(b'{"value":1,"children":[{"value":2},{"value":3,"children":[{"value":4}]}]}')
    assert not a.accepts_bytes(b'{"value":1,"children":[{"value":"x"}]}')
    pay = schema_automaton(REAL_WORLD["payment_method"])
    assert pay.accepts_bytes(b'{"type":"card","last4":"1234"}')
    assert not pay.accepts_bytes(b'{"type":"card","iban":"DE00ABCD"}')


def test_allof_merges_and_respects_additional_properties_false():
    schema = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
            {"properties": {"a": {"minimum": 3}, "b": {"type": "string"}}},
        ]
    }
    a = schema_automaton(schema)
    assert a.accepts_bytes(b'{"a":3}') and not a.accepts_bytes(b'{"a":2}')
    assert not a.accepts_bytes(b'{"a":3,"b":"x"}')  # b is forbidden by the first part
    with pytest.raises(ConstraintError, match="forbids"):
        schema_to_gbnf({"allOf": [schema, {"required": ["b"]}]})


def test_generation_caps_bound_strings_and_arrays():
    schema = {"type": "object", "properties": {"s": {"type": "string"}, "l": {"type": "array"}}, "required": ["s"]}
    a = schema_automaton(schema, max_string_length=3, max_items=2)
    assert a.accepts_bytes(b'{"s":"abc","l":[1,2]}')
    assert not a.accepts_bytes(b'{"s":"abcd"}')
    assert not a.accepts_bytes(b'{"s":"","l":[1,2,3]}')
    tight = schema_automaton({"type": "string", "minLength": 5}, max_string_length=3)
    assert tight.accepts_bytes(b'"abcde"')  # a cap never goes below the schema's minimum


def test_empty_schema_is_an_object_at_the_root_and_anything_below():
    root = schema_automaton({})
    assert root.accepts_bytes(b'{"a":[1]}') and not root.accepts_bytes(b"1")
    inner = schema_automaton({"type": "object", "properties": {"x": {}}, "required": ["x"]})
    assert inner.accepts_bytes(b'{"x":1}') and inner.accepts_bytes(b'{"x":[null,"s"]}')


def test_min_length_counts_a_surrogate_pair_escape_as_one_character():
    """JSON's `\\ud83d\\ude00` is one character (jsonschema's count too): it must not make a string long enough."""
    check = validator({"type": "string", "minLength": 2})
    pair = b'"\\ud83d\\ude00"'
    assert len(json.loads(pair)) == 1 and not check.is_valid(json.loads(pair))
    a = schema_automaton({"type": "string", "minLength": 2})
    assert not a.accepts_bytes(pair)
    assert a.accepts_bytes(b'"\\u00e9x"') and a.accepts_bytes(b'"\\uD7FFx"')  # other escapes still count as one


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "array", "contains": {"type": "integer"}}, [[1], ["a", 2, None]], [[], ["a"]]),
        ({"type": "array", "items": {"type": "string"}, "contains": {"const": "const"}},
         [["const"], ["type", "const", "x"]], [["type"], [1, "const"]]),
    ],
)  # fmt: skip
def test_contains(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid, n=40, budget=60)
