"""A pattern with a format and / or lengths (json_string_product.py): exact, every generated string checked with
`jsonschema` (assert_sound), the documents given accepted / refused as it says."""

from __future__ import annotations

import pytest

from llamay.constraints import ConstraintError, schema_to_grammar
from tests.constraints.helpers import assert_sound

WORDS = r"^(?:\S+\s+){0,9}\S+$"
CASES = [
    # every repetition was capped alike (words of at most 6 letters within 100 characters): now the whole string
    ({"type": "string", "pattern": WORDS, "maxLength": 100},
     ["Knowledge of agile methodologies", "Scalable and flexible", "a" * 100], ["a" * 101, " x", "a  "]),
    ({"type": "string", "pattern": "^[a-z]+$", "minLength": 3, "maxLength": 5}, ["abc", "abcde"],
     ["ab", "abcdef", "ABC"]),
    ({"type": "string", "pattern": "ab", "maxLength": 4}, ["ab", "xaby", "\"ab"], ["abxyz", "a", "xyz"]),
    ({"type": "string", "pattern": "^(x|yy)+$", "minLength": 5}, ["xxxxx", "yyyyx", "xyyxx"], ["xxxx", "yyy"]),
    # a format with lengths (refused before), with a pattern (refused before)
    ({"type": "string", "format": "uri", "maxLength": 40}, ["https://example.com/portrait.jpg"],
     ["https://example.com/" + "a" * 30, "not a uri"]),
    ({"type": "string", "format": "date", "pattern": r"^\d{4}-\d{2}-\d{2}$"}, ["2020-01-01"], ["2020-1-01", "x"]),
    ({"type": "string", "format": "email", "pattern": "@example\\.com$", "maxLength": 30},
     ["john.doe@example.com"], ["john.doe@example.org", "x@example.com" + "m" * 20]),
    ({"type": "string", "format": "date-time", "maxLength": 24}, ["2020-01-01T10:00:00Z"],
     ["2020-01-01T10:00:00.123456+01:00"]),
    ({"type": "string", "format": "uri", "pattern": "^https://"}, ["https://a.b/c"], ["http://a.b", "ftp://x"]),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "valid", "invalid"), CASES)
def test_patterns_with_formats_and_lengths_are_exact(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid, n=40, budget=120)


@pytest.mark.parametrize(
    "schema",
    [{"type": "string", "pattern": "^a{5}$", "maxLength": 3}, {"type": "string", "pattern": "^a?$", "minLength": 2},
     {"type": "string", "pattern": "^a+$", "format": "date"}],
)  # fmt: skip
def test_no_string_fits_is_a_clear_refusal(schema):
    with pytest.raises(ConstraintError, match="no string matches"):
        schema_to_grammar(schema)


def test_the_refusal_says_when_the_pattern_is_matched_whole():
    """On the API routes (llama.cpp's choice, anchored_patterns) "^2026-" is the string "2026-" alone: no date-time
    is that, and the refusal says the pattern was matched whole (a search, as the spec has it, compiles)."""
    schema = {"type": "string", "format": "date-time", "pattern": "^2026-"}
    with pytest.raises(ConstraintError, match=r"pattern \(matched as a whole string\) .* with 0 or more characters"):
        schema_to_grammar(schema, anchored_patterns=True)
    assert_sound(schema, valid=["2026-01-02T03:04:05Z"], invalid=["2025-01-02T03:04:05Z"], n=10, budget=60)


def test_a_large_product_is_explored_as_it_is_reached():
    """A pattern with many counted parts (2,000 and more product states): its states are stepped as strings
    reach them, each search for an end bounded; compiled within the budget, sound."""
    pattern = "^" + "".join(f"[a-z]{{0,{i}}}-" for i in range(40, 80)) + "$"
    assert_sound({"type": "string", "pattern": pattern, "maxLength": 200}, valid=["-" * 40], n=5, budget=60)


@pytest.mark.parametrize(
    ("pattern", "fmt"), [(r"^[a-f0-9]{2,4}(:[a-z]+)?$", "hostname"), (None, "uri"), (r"\d\s[^x]é", None)]
)
def test_the_product_steps_each_class_as_its_first_character_does(pattern, fmt):
    """`_Product.out` steps an ASCII class only when no earlier one is known to go the same way (advance_of),
    once per automaton state: its edges equal the reference's, every class's first character pushed through
    every automaton."""
    from llamay.constraints.json_schema import SchemaCompiler
    from llamay.constraints.json_string_product import explored
    from llamay.constraints.regex import parse_pattern

    c = SchemaCompiler({})
    node = parse_pattern(pattern, limits=c.budget, search=True) if pattern else None
    product = explored(c, node, fmt, "#", tuple(range(0x20, 0x7F)), whole=True)
    assert product is not None and len(product.states) > 3
    for i, states in enumerate(product.states):
        reference: dict[tuple, list] = {}
        for lo, hi in product.classes:
            nxt = [a.push_bytes(a.by_id[s], chr(lo).encode()) for a, s in zip(product.automata, states, strict=True)]
            if None not in nxt:
                reference.setdefault(tuple(st.id for st in nxt), []).append((lo, hi))
        assert {product.states[j]: ranges for j, ranges in product.out(i).items()} == reference
