"""`not`: the values a schema rejects, written as a schema the compiler generates (an `anyOf` of ways to fail).

Exact for `not` of true / false / {}, of `not`, of types, and through `anyOf` / `allOf` (De Morgan); the ways a
value fails a typed schema are the other types, then one keyword broken at a time: a bound crossed (minimum,
maxLength, minItems, maxProperties, ...), a required property left out, a listed property with a value its
schema rejects, an enum's type left or its other values of its types (strings, through the internal `NOT_IN`
keyword; numbers between and beyond its numbers). Where a way to fail has no schema (a pattern not matched, a
format, items that are not all valid) it is left out: the result is a subset of the rejected
values, never one the schema accepts. `oneOf` is negated as "no branch matches, or two do" (each pair's
allOf; with more than _PAIRS branches "no branch matches" alone, a subset). Every function takes the compiler
`c` for its `deref` and budget.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from .json_keywords import KEYWORD_TYPES, NOT_IN, TYPES, VOCABULARY

_KEYWORD_TYPE = {k: t for t, keys in KEYWORD_TYPES for k in keys}
_ALL = ("string", "number", "boolean", "null", "object", "array")  # (integer is a number)
_LOWER = {"minLength": ("string", "maxLength"), "minItems": ("array", "maxItems"),
          "minProperties": ("object", "maxProperties")}  # fmt: skip
_PAIRS = 8  # a oneOf of more branches: negated as none matching only (a subset)
_TUPLE = 64  # an enum's array of more items: no way with an item changed (a subset)
_UPPER = {"maxLength": ("string", "minLength"), "maxItems": ("array", "minItems"),
          "maxProperties": ("object", "minProperties")}  # fmt: skip


def negate(c: Any, schema: Any, path: str, depth: int = 0) -> Any:
    """A schema whose values the schema rejects (False: none found)."""
    c.budget.charge(1, path)
    c.budget.check("max_nesting", depth, path, "`not` nesting depth")
    schema = c.deref(schema, path)
    if schema is False:
        return True
    if schema is True or not (set(schema) & VOCABULARY):
        return False
    keys = set(schema) & VOCABULARY
    ways: list[Any] = []
    if "not" in keys:  # a value fails `not X` and the rest when it matches X, or fails the rest
        rest = {k: v for k, v in schema.items() if k != "not"}
        ways.append(schema["not"])
        ways.append(negate(c, rest, path, depth + 1))
        return _any(ways)
    for key in ("allOf", "anyOf", "oneOf"):
        if key in keys:
            rest = {k: v for k, v in schema.items() if k != key}
            parts = [negate(c, s, f"{path}/{key}/{i}", depth + 1) for i, s in enumerate(schema[key])]
            failed = _any(parts) if key == "allOf" else _all(parts)
            if key == "oneOf":  # (or two branches match)
                failed = _any([failed, *_pairs(c, schema[key], path)])
            return _any([failed, negate(c, rest, path, depth + 1)])
    types = _types(schema)
    # (integer only: the numbers that are not integers have no schema, and `number` would hold the integers)
    ways.append(_of_types([t for t in _ALL if t not in types and not (t == "number" and "integer" in types)]))
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        kinds = {_kind(v) for v in values}
        # (sets of names taken in sorted order: a set of strings iterates in an order that changes with the
        # process's hash seed, and so did the grammar's alternatives and the messages naming them)
        ways.append(_of_types([t for t in sorted(types) if t not in kinds]))
        ways += [_other_values(c, values, kind, path) for kind in sorted(kinds & types)]
    for key, value in schema.items():
        ways.append(_broken(c, key, value, schema, f"{path}/{key}", depth))
    return _any(ways)


def _pairs(c: Any, branches: list, path: str) -> list:
    """The values two of a oneOf's branches match: each pair's allOf (none past _PAIRS branches: a subset)."""
    if len(branches) > _PAIRS:
        return []
    c.budget.charge(len(branches) ** 2, path)
    return [{"allOf": [a, b]} for i, a in enumerate(branches) for b in branches[i + 1 :]]


def _broken(c: Any, key: str, value: Any, schema: dict, path: str, depth: int) -> Any:
    """Values of the keyword's type that break `key` (False: no schema for them)."""
    if key in _LOWER and isinstance(value, int) and value > 0:
        t, other = _LOWER[key]
        return {"type": t, other: value - 1}
    if key in _UPPER and isinstance(value, int):
        t, other = _UPPER[key]
        return {"type": t, other: value + 1}
    lo_x, hi_x = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if key == "minimum" and isinstance(value, (int, float)):  # (draft 4: exclusiveMinimum true makes it strict)
        return {"type": "number", "maximum": value} if lo_x is True else {"type": "number", "exclusiveMaximum": value}
    if key == "maximum" and isinstance(value, (int, float)):
        return {"type": "number", "minimum": value} if hi_x is True else {"type": "number", "exclusiveMinimum": value}
    if key == "exclusiveMinimum" and not isinstance(value, bool):
        return {"type": "number", "maximum": value}
    if key == "exclusiveMaximum" and not isinstance(value, bool):
        return {"type": "number", "minimum": value}
    if key == "required" and isinstance(value, list):
        c.budget.charge(len(value), path)  # (a schema negated once per oneOf branch it overlaps)
        return _any([{"type": "object", "properties": {r: False}} for r in value if isinstance(r, str)])
    if key == "properties" and isinstance(value, dict):
        ways = []
        for name, sub in value.items():
            bad = negate(c, sub, f"{path}/{name}", depth + 1)
            if bad is not False:
                ways.append({"type": "object", "properties": {name: bad}, "required": [name]})
        return _any(ways)
    if key == NOT_IN and isinstance(value, list):
        return {"enum": value} if value else False
    if key == "items" and isinstance(value, (dict, bool)):  # every item rejected: one is (a subset)
        bad = negate(c, value, path, depth + 1)
        return False if bad is False else {"type": "array", "items": bad, "minItems": 1}
    return False


def _other_values(c: Any, values: list, kind: str, path: str) -> Any:
    """The values of one kind an enum leaves out: the other strings (NOT_IN), the numbers between and beyond
    its numbers (exclusive bounds), the other boolean, arrays of other lengths and of a length only one value has
    with an item changed (False: none, or no schema)."""
    mine = [v for v in values if _kind(v) == kind]
    if kind == "array":
        return _other_arrays(c, mine, path)
    if kind == "string":
        return {"type": "string", NOT_IN: sorted(set(mine))}
    if kind == "number":
        points = sorted({v for v in mine if abs(v) < 2**53})
        if len(points) != len(set(mine)):
            return False
        bounds = [None, *points, None]
        return _any([{"type": "number", **({"exclusiveMinimum": lo} if lo is not None else {}),
                      **({"exclusiveMaximum": hi} if hi is not None else {})}
                     for lo, hi in pairwise(bounds)])  # fmt: skip
    if kind == "boolean":
        return _of_types([]) if set(mine) == {True, False} else {"const": not mine[0]}
    return False


def _other_arrays(c: Any, mine: list, path: str) -> Any:
    """Arrays none of `mine`: of a length none has, or of a length one alone has (at most _TUPLE) and another item
    at some index (a subset: of a length two share, none)."""
    c.budget.charge(1 + sum(map(len, mine)), path)
    by_length: dict[int, list] = {}
    for v in mine:
        by_length.setdefault(len(v), []).append(v)
    ways: list[Any] = []
    lengths = sorted(by_length)
    for lo, hi in pairwise([-1, *lengths, None]):
        if hi is None or hi - lo > 1:
            ways.append({"type": "array", "minItems": lo + 1, **({"maxItems": hi - 1} if hi is not None else {})})
    for n, vs in by_length.items():
        if len(vs) == 1 and n <= _TUPLE:
            c.budget.charge(n * n, path)  # (n ways of n items)
            for i, item in enumerate(vs[0]):
                items = [True] * i + [{"not": {"const": item}}] + [True] * (n - i - 1)
                ways.append({"type": "array", "minItems": n, "maxItems": n, "items": items})
    return _any(ways)


def _types(schema: dict) -> set[str]:
    """The types a schema's values may have (integer counted as number when number is there)."""
    t = schema.get("type")
    if t is None:
        return set(_ALL)
    types = {t} if isinstance(t, str) else set(t)
    return {x for x in types if x in TYPES}


def _kind(value: Any) -> str:
    from .json_keywords import value_type

    kind = value_type(value)
    return "number" if kind == "integer" else kind


def _of_types(types: list[str]) -> Any:
    return False if not types else {"type": types[0] if len(types) == 1 else types}


def _any(ways: list[Any]) -> Any:
    ways = [w for w in ways if w is not False]
    if any(w is True for w in ways):
        return True
    return False if not ways else ways[0] if len(ways) == 1 else {"anyOf": ways}


def _all(parts: list[Any]) -> Any:
    if any(p is False for p in parts):
        return False
    parts = [p for p in parts if p is not True]
    return True if not parts else parts[0] if len(parts) == 1 else {"allOf": parts}
