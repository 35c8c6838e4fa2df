"""oneOf / allOf reasoning (json_combinators.py): work proportional to products of the schema's sizes is charged
to the compilation's Budget before it is done."""

from __future__ import annotations

import pytest

from llamay.constraints import ConstraintLimitError, ConstraintLimits, schema_to_grammar


def test_overlapping_branches_charge_their_required_lists_per_pair():
    """Branches that may overlap are compared pairwise (excludes, negation): n^2 pairs each walking a long
    `required` shared through a $ref (60 x 60 x 60 took 6 s and was never charged; 300 x 300 took minutes)."""
    shared = {"type": "object", "required": [f"p{i}" for i in range(60)]}
    schema = {"$defs": {"a": shared}, "oneOf": [{"$ref": "#/$defs/a"}] * 60}
    with pytest.raises(ConstraintLimitError) as e:
        schema_to_grammar(schema, limits=ConstraintLimits(max_work=100_000))
    assert e.value.limit == "max_work"
