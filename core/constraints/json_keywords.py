"""What JSON Schema keywords there are and what their values must be, checked before a value is used: a
malformed schema is an error naming the keyword and its JSON pointer, never a TypeError deep in the compiler.
`check_document` walks the whole document once, iteratively, charging the compilation for its size and
refusing one nested beyond `max_nesting` (so the recursive compiler and json.dumps stay within their depth).
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

from .errors import ConstraintError
from .limits import Budget

# keywords the spec defines that constrain nothing (annotations, identifiers, containers of definitions)
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$comment", "$schema", "$id", "id", "deprecated", "readOnly",
    "writeOnly", "contentMediaType", "contentEncoding", "contentSchema", "$anchor", "$dynamicAnchor",
    "$recursiveAnchor", "$vocabulary", "$defs", "definitions",
})  # fmt: skip
# (internal) a string none of these: what json_negation.py writes for the strings an enum / const leaves out
NOT_IN = "\x00notIn"
SUPPORTED = frozenset({
    NOT_IN,
    "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
    "additionalItems", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "$ref",
    "minProperties", "maxProperties", "unevaluatedProperties", "patternProperties", "not", "dependencies",
    "dependentRequired", "dependentSchemas", "if", "then", "else", "propertyNames", "contains", "minContains",
    "maxContains",
})  # fmt: skip
# validation keywords of drafts 4 to 2020-12 not (or not always) compiled: a schema using them is refused by name
# (strict=False ignores them, generating what the rest allows, which may then break them)
UNSUPPORTED = frozenset({
    "unevaluatedItems", "$dynamicRef",
    "$recursiveRef", "disallow", "extends", "divisibleBy",
})  # fmt: skip
VOCABULARY = SUPPORTED | UNSUPPORTED  # the keywords that constrain; any other is ignored, as the spec says
DRAFT3_ONLY = frozenset({"disallow", "extends", "divisibleBy"})  # keywords of draft 3 only: unknown in the others


def validation_keys(schema: dict) -> dict:
    """`schema` without annotations and unknown keywords (the part of it that constrains)."""
    return {k: v for k, v in schema.items() if k in VOCABULARY}


TYPES = ("string", "number", "integer", "boolean", "null", "object", "array")
KEYWORD_TYPES = (
    (
        "object",
        (
            "properties",
            "additionalProperties",
            "required",
            "minProperties",
            "maxProperties",
            "patternProperties",
            "propertyNames",
        ),
    ),
    ("array", ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains")),
    ("string", ("pattern", "format", "minLength", "maxLength", NOT_IN)),
    ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")),
)


_COUNTS = ("minLength", "minItems", "minProperties")  # (0: no constraint; `minimum: 0` is one)


def implied_type(schema: dict, formats: Any) -> str | None:
    """The type a schema without `type` is generated as: the first whose keywords it has (None: any value). A
    keyword that constrains nothing (`properties: {}`, `required: []`, `minItems: 0`; not `contains: {}`)
    implies nothing, nor does a format not in `formats` (an annotation). The compiler and the oneOf overlap
    checks (json_combinators) both ask this: a branch must never generate a type the checks did not count."""
    for t, keys in KEYWORD_TYPES:
        for k in keys:
            if k not in schema:
                continue
            v = schema[k]
            empty = k != "contains" and (v is True or (isinstance(v, (dict, list)) and not v))
            if empty or (k in _COUNTS and v == 0):
                continue
            if k == "format" and v not in formats:
                continue
            return t
    return None


# what each keyword's value must be (checked before the value is used, so a malformed schema is an error naming
# the keyword, never a TypeError): kinds are below
KEYWORD_KINDS = {
    "type": "type", "enum": "list", "properties": "schema-map", "required": "strings", "additionalProperties": "schema",
    "items": "schema-or-list", "prefixItems": "schema-or-list", "additionalItems": "schema", "uniqueItems": "bool",
    "minLength": "count", "maxLength": "count", "minItems": "count", "maxItems": "count", "minProperties": "count",
    "maxProperties": "count", "pattern": "string", "format": "string", "minimum": "number", "maximum": "number",
    "exclusiveMinimum": "number-or-bool", "exclusiveMaximum": "number-or-bool", "multipleOf": "number",
    "anyOf": "schemas", "oneOf": "schemas", "allOf": "schemas", "$ref": "string", "unevaluatedProperties": "schema",
    "$defs": "schema-map", "definitions": "schema-map", "patternProperties": "schema-map", "not": "schema",
    "dependencies": "schema-map", "dependentRequired": "schema-map", "dependentSchemas": "schema-map",
    "if": "schema", "then": "schema", "else": "schema", NOT_IN: "strings", "propertyNames": "schema",
    "contains": "schema", "minContains": "count", "maxContains": "count",
}  # fmt: skip


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


_KIND_CHECKS = {
    "type": (lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
             "a type name or a list of them"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "schema-map": (lambda v: isinstance(v, dict), "an object of schemas"),
    "strings": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of strings"),
    "schema": (lambda v: isinstance(v, (bool, dict)), "a schema (an object or a boolean)"),
    "schema-or-list": (lambda v: isinstance(v, (bool, dict, list)), "a schema or a list of schemas"),
    "schemas": (lambda v: isinstance(v, list), "a list of schemas"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "count": (lambda v: _is_number(v) and v >= 0 and float(v).is_integer(), "a non-negative integer"),
    "string": (lambda v: isinstance(v, str), "a string"),
    "number": (lambda v: _is_number(v), "a finite number"),
    "number-or-bool": (lambda v: isinstance(v, bool) or _is_number(v), "a finite number (or, draft 4, a boolean)"),
}  # fmt: skip


_CHECKS = {key: _KIND_CHECKS[kind] for key, kind in KEYWORD_KINDS.items()}  # (one lookup per key: every visit checks)


def check_keywords(schema: dict, path: str) -> None:
    """Refuse a keyword whose value has the wrong kind (`KEYWORD_KINDS`)."""
    for key, value in schema.items():
        check = _CHECKS.get(key)
        if check is not None and not check[0](value):
            raise ConstraintError(f"{path}/{key}: expecting {check[1]}, not {json.dumps(value)[:40]}")


def check_document(schema: Any, budget: Budget) -> int:
    """Charge the budget for every value of the document and refuse one nested beyond max_nesting (iterative:
    the recursive compiler below and json.dumps then stay within their depth). The number of values."""
    limit = budget.limits.max_nesting
    count, depth, level = 0, 0, [schema]  # (a level at a time, no paths: the walk below names the refusal)
    while level and depth < limit:
        count, depth, below = count + len(level), depth + 1, []
        for value in level:
            if isinstance(value, dict):
                below.extend(value.values())
            elif isinstance(value, list):
                below.extend(value)
        level = below
    if not level:  # (within the limit: every value counted, the depth reached)
        budget.charge(count, "#")
        budget.check("max_nesting", depth, "#", "schema nesting depth")
        return count
    _check_deep_document(schema, budget)
    raise AssertionError("unreachable: _check_deep_document refuses")  # (it always raises)


def _check_deep_document(schema: Any, budget: Budget) -> None:
    """check_document of a document nested beyond max_nesting: the first value found that deep named."""
    limit = budget.limits.max_nesting
    todo: list[tuple[Any, int, tuple | None]] = [(schema, 1, None)]  # (value, depth, its path as a linked list)
    count, deepest, where = 0, 0, None
    while todo:
        value, depth, link = todo.pop()
        count += 1
        if depth > deepest:
            deepest, where = depth, link
            if depth > limit:
                break
        if isinstance(value, dict):
            todo.extend((v, depth + 1, (link, k)) for k, v in value.items())
        elif isinstance(value, list):
            todo.extend((v, depth + 1, (link, i)) for i, v in enumerate(value))
    budget.charge(count, "#")
    budget.check("max_nesting", deepest, lambda: _pointer(where), "schema nesting depth")


def _pointer(link: tuple | None) -> str:
    parts = []
    while link is not None:
        link, key = link
        parts.append(str(key).replace("~", "~0").replace("/", "~1"))
    return "#" + "".join("/" + p for p in reversed(parts))


def value_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    if isinstance(v, float):
        return "number"
    return {str: "string", type(None): "null", list: "array", dict: "object"}.get(type(v), "?")


def has_type(value: Any, types: list[str]) -> bool:
    """Whether the value has one of `types` (an integer is a number too)."""
    vt = value_type(value)
    return vt in types or (vt == "integer" and "number" in types)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def text_depth(text: str) -> int:
    """How deep JSON text nests (brackets outside strings), found without parsing it: json.loads recurses in C
    once per level, past any recursion limit under Pyodide, so a deep text is measured first."""
    steps = (1 if c in "[{" else -1 for c in _BRACKETS.findall(_STRING.sub("", text)))
    return max(accumulate(steps, initial=0))
