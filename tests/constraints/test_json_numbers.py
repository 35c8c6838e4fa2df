"""Number bounds (json_numbers.py) are exact for decimals: on a grid of numbers, and on numbers just inside and
outside each bound, the grammar accepts exactly what `jsonschema` validates, up to 16 digits after the point
(fractional and exclusive bounds, negative ranges, bounds narrower than one)."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from llamay.constraints import schema_to_grammar
from llamay.constraints.json_numbers import MAX_DIGITS
from tests.constraints.helpers import assert_sound, schema_automaton, schema_validator

BOUNDS = [
    {"minimum": 0.25},
    {"minimum": 0.25, "maximum": 0.75},
    {"exclusiveMinimum": 0.25, "exclusiveMaximum": 0.75},
    {"exclusiveMinimum": 0, "exclusiveMaximum": 1},
    {"minimum": -2.5, "maximum": -0.5},
    {"minimum": -0.001, "maximum": 0.001},
    {"maximum": 0.3},
    {"exclusiveMaximum": -1.125},
    {"minimum": 1.5, "exclusiveMaximum": 2},
    {"minimum": 99.99, "maximum": 100.01},
    {"minimum": 0.1, "maximum": 0.1},
    {"minimum": 3, "maximum": 3.0001},
    {"minimum": 1, "exclusiveMinimum": True, "maximum": 3, "exclusiveMaximum": True, "$schema":
     "http://json-schema.org/draft-04/schema#"},
]  # fmt: skip


def _texts(schema: dict) -> list[str]:
    """A grid of decimals, and numbers a digit or two beside each bound."""
    out = [f"{k / 100:.2f}".rstrip("0").rstrip(".") for k in range(-400, 401, 3)]
    out += ["0", "-0.5", "1", "-1", "0.0", "100", "-100", "3", "2"]
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        b = schema.get(key)
        if isinstance(b, bool) or b is None:
            continue
        base = repr(float(b))
        out.append(base)
        for tail in ("0001", "1", "9999999", "00000000000001"):
            out.append(base + tail if "." in base else f"{base}.{tail}")
        for step in (1e-3, 1e-9, 1e-14):
            out += [repr(b + step), repr(b - step)]
    return [t for t in out if "e" not in t]


@pytest.mark.parametrize("bounds", BOUNDS, ids=lambda b: ",".join(f"{k}={v}" for k, v in b.items())[:40])
def test_number_bounds_accept_exactly_the_valid_decimals(bounds):
    pytest.importorskip("jsonschema")
    schema = {"type": "number", **bounds}
    check = schema_validator(schema)
    a = schema_automaton(schema)
    wrong = []
    for t in _texts(schema):
        ok, valid = a.accepts_bytes(t.encode()), check.is_valid(float(t))
        exact = Decimal(t) == Decimal(repr(float(t)))  # (else the float jsonschema compares is another number)
        if (ok and not valid) or (valid and not ok and exact and len(t.partition(".")[2]) <= MAX_DIGITS):
            wrong.append((t, valid))
    assert wrong == []
    assert_sound(schema, n=60, budget=20)


BIG = 4000574633000469673178824704  # a float's exact value; its shortest text, 4.0005746330004697e27, is not it


@pytest.mark.parametrize(
    ("schema", "inside", "outside"),
    [
        # (the bound's shortest text as an integer lies beyond it, and Python's json reads an integer exactly)
        ({"minimum": -BIG}, [str(-BIG), "-4000574633000469600000000000"], ["-4000574633000469700000000000"]),
        ({"maximum": BIG}, [str(BIG), "0.5"], ["4000574633000469700000000000", str(BIG + 1)]),
        ({"exclusiveMinimum": BIG}, ["4000574633000470000000000000"], [str(BIG), str(BIG - 1)]),  # (the next float up)
        # (no float lies between them: the integers do, read exactly; this was refused as too narrow)
        ({"minimum": -23703425490112442, "maximum": -23703425490112441}, ["-23703425490112442", "-23703425490112441"],
         ["-23703425490112443", "-23703425490112440", "-23703425490112441.5"]),
        # (a multiple of 1 written with ".0" is a float's text: 9007199254740992 read so, below the minimum)
        ({"multipleOf": 1, "minimum": 2**53 + 1}, [str(2**53 + 1)], [f"{2**53 + 1}.0", str(2**53)]),
    ],
)  # fmt: skip
def test_bounds_beyond_2_to_the_53_hold_for_integers_read_exactly(schema, inside, outside):
    pytest.importorskip("jsonschema")
    import json

    schema = {"type": "number", **schema}
    check, a = schema_validator(schema), schema_automaton(schema)
    for t in inside + outside:
        assert a.accepts_bytes(t.encode()) == (t in inside), t
        if "." not in t:  # (as the grammar's oracle reads them: an integer's text exactly)
            assert check.is_valid(json.loads(t)) == (t in inside), t
    assert_sound(schema, n=40, budget=40)


def test_sentences_of_fractional_ranges_validate():
    rng = random.Random(5)
    for _ in range(40):
        lo = round(rng.uniform(-50, 50), rng.randint(0, 4))
        hi = round(lo + rng.uniform(0.0001, 3), rng.randint(1, 5))
        schema = {"type": "number", "minimum": lo, "maximum": hi}
        if lo <= hi:
            assert_sound(schema, valid=[lo, hi], n=20, budget=20)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "integer", "multipleOf": 16, "minimum": -2032, "maximum": 2031}, [-2032, 0, 2016], [8, 2032]),
        ({"type": "integer", "multipleOf": 7}, [0, 7, -14, 7 * 12345], [1, -8, 701]),
        ({"type": "number", "multipleOf": 3, "minimum": 0}, [0, 3, 999], [-3, 1]),
        ({"type": "integer", "multipleOf": 5, "maximum": 0}, [0, -5, -100], [5, -3]),
        ({"type": "integer", "multipleOf": 4, "minimum": 10, "exclusiveMaximum": 100000}, [12, 16, 1000], [10, 8]),
    ],
)
def test_integer_multiple_of(schema, valid, invalid):
    """Few multiples: all of them; one sign: a divisibility automaton; else a window near a bound (a subset)."""
    assert_sound(schema, valid=valid, invalid=invalid)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "number", "multipleOf": 0.01, "minimum": 0}, [0, 1230.55, 500.23, 10000.0, 8.25, 99.99],
         [0.07, -1, 0.001]),  # (0.07 / 0.01 is 7.000000000000001 in floating point: jsonschema refuses it)
        ({"type": "number", "multipleOf": 2.5}, [0, 2.5, -5, 10], [1, 3.5]),
        ({"type": "number", "multipleOf": 0.1, "maximum": 1, "exclusiveMinimum": 0}, [0.1, 0.5, 1], [0, 1.1, 0.3]),
        ({"type": "integer", "multipleOf": 0.5, "minimum": 3}, [3, 4, 100], [2, 3.5]),
        ({"type": "number", "multipleOf": 0.0001, "minimum": -1, "maximum": 1}, [0.5, -0.0625, 0.0002],
         [2, 0.00005, 0.0003]),
    ],
)  # fmt: skip
def test_decimal_multiple_of_is_what_jsonschema_computes(schema, valid, invalid):
    """A decimal step: numbers whose division by it is an integer in floating point, as jsonschema divides."""
    assert_sound(schema, valid=valid, invalid=invalid, n=40, budget=40)


def test_fields_of_the_same_decimal_step_and_bounds_share_one_trie():
    """Two fields of one step and bounds walk one lazy trie (each prefix built and lowered once), a field of
    other bounds its own; each stays exact (jsonschema's division)."""
    money = {"type": "number", "multipleOf": 0.01, "minimum": 0}
    schema = {"type": "object", "properties": {"a": money, "b": dict(money), "c": {**money, "maximum": 50}},
              "required": ["a", "b", "c"]}  # fmt: skip
    grammar = schema_to_grammar(schema)
    tries = [n for n in [*grammar.rules, *grammar.lazy] if n.startswith("multiple") and n.endswith("-n")]
    assert len(tries) == 2
    assert_sound(schema, valid=[{"a": 1230.55, "b": 0.5, "c": 49.99}], invalid=[{"a": 0.07, "b": 1, "c": 1},
                 {"a": 1, "b": 1, "c": 50.01}], n=20)  # fmt: skip


def test_integer_steps_bounded_on_one_side_keep_the_few_of_the_other_sign():
    """multipleOf 10 below 100 is every non-positive multiple (the divisibility automaton) and 10 .. 90 too (30
    was refused); the few negative ones above a negative minimum likewise."""
    assert_sound({"exclusiveMaximum": 100, "multipleOf": 10, "type": "number"}, valid=[30, 90, 0, -20],
                 invalid=[100, 95, 110])  # fmt: skip
    assert_sound({"minimum": -35, "multipleOf": 10, "type": "integer"}, valid=[-30, -10, 0, 120], invalid=[-40, 5])


def test_a_number_at_least_zero_may_have_an_exponent():
    """minimum 0 alone: a non-negative mantissa keeps any exponent non-negative (1e-06 was refused)."""
    assert_sound({"type": "number", "minimum": 0}, valid=[1e-06, 0.5, 1.5e10, 0], invalid=[-1e-06, -1])


def test_a_number_multiple_of_one_may_be_written_with_zero_fraction_digits():
    """type number, multipleOf 1: 6000.0 is a multiple of 1 (it was refused); type integer in draft 4 is not."""
    schema = {"type": "number", "minimum": 0, "maximum": 99999999, "multipleOf": 1}
    assert_sound(schema, valid=[6000.0, 6000, 0], invalid=[6000.5, -1.0])
