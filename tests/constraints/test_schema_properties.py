"""Property: every schema within the limits compiles under the default ConstraintLimits, and every sentence
of its grammar is valid against it by `jsonschema`. Hypothesis writes the schemas: nested objects, arrays,
tuples, alternatives, references, bounded strings and numbers, including counts beyond the 1024 copies the
compiler writes out (powers of two and blocks), counts beyond max_repeat (lowered) and bounds beyond
max_number_digits (lowered)."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay.constraints import DEFAULT_LIMITS, compile_grammar, schema_to_grammar
from llamay.constraints.limits import Budget
from tests.constraints.helpers import sentences

BIG = DEFAULT_LIMITS.max_repeat
NAMES = st.sampled_from(["a", "b", "id", "name", "tags", "x-y", "é"])


@st.composite
def strings(draw) -> dict:
    s: dict = {"type": "string"}
    lo = draw(st.one_of(st.integers(0, 4), st.integers(1025, 1100)))
    if draw(st.booleans()):
        s["minLength"] = lo
    if draw(st.booleans()):
        s["maxLength"] = draw(st.one_of(st.integers(lo, lo + 3000), st.just(BIG * 10)))
    return s


@st.composite
def numbers(draw) -> dict:
    s: dict = {"type": draw(st.sampled_from(["integer", "number"]))}
    edge = st.one_of(st.integers(-(10**38), 10**38), st.integers(-50, 50))
    lo, hi = sorted((draw(edge), draw(edge)))
    hi += hi == lo  # an exclusive bound needs room above it
    if draw(st.booleans()):
        s["minimum"] = lo
    if draw(st.booleans()):
        s["maximum"] = draw(st.one_of(st.just(hi), st.just(10**60)))  # 10**60: beyond the digits, lowered
    if s["type"] == "number" and draw(st.booleans()) and "minimum" in s:
        s["exclusiveMinimum"] = s.pop("minimum")
    return s


PATTERNS = ["^[a-c]{1100,1200}$", "^(ab|c){2,1500}$", "^x[0-9]{0,3000}y$", "^[a-z]+-\\d{2000}$"]
VALUES = st.one_of(
    strings(),
    numbers(),
    st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(PATTERNS)),
    st.builds(
        lambda v: {"enum": v}, st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=3)), min_size=1, max_size=4)
    ),
    st.builds(lambda v: {"const": v}, st.one_of(st.booleans(), st.none(), st.text(max_size=4))),
    st.sampled_from([{"type": "boolean"}, {"type": "null"}]),
)
LEAVES = st.one_of(VALUES, st.just({"$ref": "#/$defs/shared"}))  # $defs/shared is one of VALUES


@st.composite
def objects(draw, children) -> dict:
    props = draw(st.dictionaries(NAMES, children, max_size=3))
    s: dict = {"type": "object", "properties": props}
    s["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    s["additionalProperties"] = draw(st.one_of(st.just(False), st.just(True), children))
    return s


@st.composite
def arrays(draw, children) -> dict:
    s: dict = {"type": "array"}
    if draw(st.booleans()):
        s["prefixItems"] = draw(st.lists(children, min_size=1, max_size=3))
        s["minItems"] = draw(st.integers(0, len(s["prefixItems"]) + 3))
        s["items"] = draw(children)
    else:
        s["items"] = draw(children)
        s["minItems"] = draw(st.integers(0, 3))
        s["maxItems"] = draw(st.one_of(st.integers(s["minItems"], s["minItems"] + 1500), st.just(BIG * 10)))
    return s


SCHEMAS = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        objects(children),
        arrays(children),
        st.builds(lambda xs: {"anyOf": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda s: {"allOf": [s, {"description": "merged"}]}, children),
        st.builds(lambda s: {"$ref": "#/$defs/shared", "description": "annotated"}, children),
    ),
    max_leaves=6,
)


def validator(schema):
    jsonschema = pytest.importorskip("jsonschema")
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.native_only
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(body=SCHEMAS, shared=VALUES, seed=st.integers(0, 2**16))
def test_schemas_within_the_limits_compile_and_their_sentences_validate(body, shared, seed):
    schema = {"$defs": {"shared": shared}, **body} if isinstance(body, dict) else body
    budget = Budget()
    program = compile_grammar(schema_to_grammar(schema, limits=budget), budget)
    assert budget.work <= DEFAULT_LIMITS.max_work
    check = validator(schema)
    for s in sentences(program, random.Random(seed), 4, budget=200):
        check.validate(json.loads(s))
