"""uniqueItems (json_unique.py): enums and booleans exact, plain strings told apart by their first character (a
subset), checked against jsonschema; other items keep at most one."""

from __future__ import annotations

import pytest

from llamay.constraints import ConstraintError, schema_to_grammar
from tests.constraints.helpers import assert_sound, schema_automaton


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True},
         [[], ["a"], ["example", "migration"], ["", "x"], ["é", "a"], ["visual studio", "programming"]],
         [["a", "a"], ["", ""]]),
        ({"type": "array", "items": {"enum": ["a", "b", 1, 1.0]}, "uniqueItems": True, "minItems": 2},
         [["a", "b"], ["b", 1, "a"]], [["a", "a"], [1, 1.0], ["a"]]),
        ({"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}, [[True, False], []], [[True, True]]),
        ({"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 5}, "uniqueItems": True,
          "maxItems": 3}, [["ab", "cd"]], [["ab", "ab"], ["a"], ["ab", "cd", "ef", "gh"]]),
        ({"type": "array", "items": {"const": "x"}, "uniqueItems": True}, [[], ["x"]], [["x", "x"]]),
    ],
)  # fmt: skip
def test_unique_arrays(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid, n=60, budget=80)


def test_strings_sharing_a_first_character_are_not_generated_together():
    """A subset: two strings with one first character could be equal, so the second is never written."""
    a = schema_automaton({"type": "array", "items": {"type": "string"}, "uniqueItems": True})
    assert a.accepts_bytes(b'["tag1","other"]')
    assert not a.accepts_bytes(b'["tag1","tag2"]') and not a.accepts_bytes(b'["\\u0061","a"]')


def test_other_items_keep_at_most_one_and_more_are_refused():
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    a = schema_automaton(schema)
    assert a.accepts_bytes(b"[1]") and not a.accepts_bytes(b"[1,2]")
    with pytest.raises(ConstraintError, match="uniqueItems"):
        schema_to_grammar({**schema, "minItems": 2})
