"""JSON Schema combinators the compiler reasons about: `allOf` merged into one schema (sound for the keywords
supported), and the checks that make `oneOf` safe to generate as `anyOf` (branches that cannot both match).
Every function takes the compiler (`c`) for its `deref` and its budget: merging is charged as it goes.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii
from typing import Any

from .errors import ConstraintError
from .json_keywords import NOT_IN, VOCABULARY, check_keywords, implied_type, value_type
from .limits import ConstraintLimitError


def merge2(c: Any, a: Any, b: Any, path: str) -> Any:
    """allOf of two schemas as one (sound for the keywords supported here)."""
    if a is True:
        return b
    if b is True:
        return a
    if a is False or b is False:
        raise ConstraintError(f"{path}: allOf with the schema `false` allows no value")
    for part in (a, b):
        if not isinstance(part, dict):
            raise ConstraintError(f"{path}: allOf of a {type(part).__name__}, not a schema")
        if id(part) not in c.checked:  # (each schema object checked once: merges meet the same ones again)
            check_keywords(part, path)
            c.checked[id(part)] = part  # (kept alive: the id stays its own)
    c.budget.charge(len(a) + len(b), path)
    if any(k in a for k in _CONDITIONAL) and any(a.get(k) != b.get(k) for k in _CONDITIONAL if k in b):
        b = c.without_if(b, path)  # (one if / then / else per schema: b's as the anyOf it means)
        return merge2(c, a, b, path)
    out = dict(a)
    for k, v in b.items():
        if k not in out or out[k] == v or k not in VOCABULARY:  # (annotations: the first part's kept)
            out.setdefault(k, v)
        elif k == "items" and isinstance(out[k], list) != isinstance(v, list):
            continue  # (a tuple and a schema for every item: _tuple_and_items)
        else:
            out[k] = merge_keyword(c, k, out[k], v, path)
    _tuple_and_items(c, a, b, out, path)
    for x, y in ((a, b), (b, a)):
        if y.get("patternProperties") and x.get("additionalProperties") not in (None, True):
            raise ConstraintError(f"{path}: allOf of patternProperties and another part's additionalProperties"
                                  " cannot be merged")  # fmt: skip
    if "properties" in a or "properties" in b:
        c.budget.charge(len(a.get("properties", ())) + len(b.get("properties", ())), path)  # (its loop below)
        out["properties"], excluded = merge_properties(a, b)
        lost = [r for r in out.get("required", []) if r in excluded]
        if lost:
            raise ConstraintError(f"{path}: allOf requires {lost[0]!r}, which another part forbids")
    return out


def _tuple_and_items(c: Any, a: dict, b: dict, out: dict, path: str) -> None:
    """allOf of a tuple (`prefixItems`, or a list `items` before 2020-12) and an `items` schema: every item is
    valid against both, so each tuple entry and the rest take that schema (kept apart, the tuple's items were
    not checked against it: allOf [{items: string}, {prefixItems: [true]}] accepted [1])."""
    for t, e in ((a, b), (b, a)):
        each = e.get("items")
        if isinstance(each, list) or "prefixItems" in e or each is None or each is True:
            continue
        if isinstance(t.get("prefixItems"), list):
            tuple_key, rest_key = "prefixItems", "items"
        elif isinstance(t.get("items"), list):
            tuple_key, rest_key = "items", "additionalItems"
        else:
            continue
        c.budget.charge(len(t[tuple_key]), path)
        out[tuple_key] = [{"allOf": [x, each]} for x in t[tuple_key]]
        rest = t.get(rest_key)
        both = False if rest is False or each is False else each if rest in (None, True) else {"allOf": [rest, each]}
        out[rest_key] = both
        return


_BOUNDS = {
    **dict.fromkeys(("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"), max),
    **dict.fromkeys(("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"), min),
}  # the tighter of two bounds


def _merge_types(av: Any, v: Any, path: str) -> Any:
    ta = {av} if isinstance(av, str) else set(av)
    tb = {v} if isinstance(v, str) else set(v)
    both = ta & tb
    if ("integer" in ta and "number" in tb) or ("integer" in tb and "number" in ta):
        both.add("integer")
    if not both:
        raise ConstraintError(f"{path}: allOf with incompatible types {av!r} and {v!r}")
    return sorted(both) if len(both) > 1 else both.pop()


def merge_keyword(c: Any, k: str, av: Any, v: Any, path: str) -> Any:
    """Both parts of an allOf have keyword k (with different values): the value both together mean."""
    if k == "type":
        return _merge_types(av, v, path)
    if k in _BOUNDS and isinstance(av, bool) and isinstance(v, bool):  # draft 4: exclusive in either, in both
        return av or v  # (a subset where the other's bound is the looser one)
    if k in _BOUNDS and not isinstance(av, bool) and not isinstance(v, bool):
        return _BOUNDS[k](av, v)
    if k in ("required", "enum", NOT_IN):
        return _merge_lists(c, k, av, v, path)
    if k in ("items", "additionalItems", "additionalProperties") and not isinstance(av, list):
        if av is False or v is False:
            return False
        return v if av is True else av if v is True else {"allOf": [av, v]}
    if k in ("$defs", "definitions", "properties"):
        return {**av, **v}
    if k == "patternProperties":  # a pattern in both: both its schemas
        return {**av, **{p: {"allOf": [av[p], s]} if p in av else s for p, s in v.items()}}
    if k == "not":  # neither: not either
        return {"anyOf": [av, v]}
    if k == "allOf":
        return [*av, *v]
    if k == "propertyNames":  # names both allow
        return {"allOf": [av, v]}
    if k == "anyOf":  # every pair a branch, merged and compiled later: charged now by the schemas it holds
        xs, ys = [_parts(x) for x in av], [_parts(y) for y in v]
        wx = sum(_size(c, p, path) for x in xs for p in x)
        wy = sum(_size(c, p, path) for y in ys for p in y)
        c.budget.charge(len(av) * len(v) + len(v) * wx + len(av) * wy, f"{path}/anyOf")
        return [{"allOf": [*x, *y]} for x in xs for y in ys]
    raise ConstraintError(f"{path}: allOf with different values for {k!r} cannot be merged")


def _parts(s: Any) -> list:
    """The schemas a branch is the allOf of: the parts of one made by merging anyOf lists (only `allOf`), or
    itself (so a product of products stays one flat allOf, not a nest of them)."""
    return list(s["allOf"]) if isinstance(s, dict) and len(s) == 1 and isinstance(s.get("allOf"), list) else [s]


def _size(c: Any, schema: Any, path: str) -> int:
    """The JSON values in `schema` ($refs not followed): a branch holding it merges and visits at least that
    many (measured once per schema object, the walk charged)."""
    known = c.sizes.get(id(schema))
    if known is not None:
        return known[0]
    n, todo = 0, [schema]
    while todo:
        x = todo.pop()
        n += 1
        if isinstance(x, dict):
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
    c.budget.charge(n, path)
    c.sizes[id(schema)] = (n, schema)  # (kept alive: the id stays its own)
    return n


def _merge_lists(c: Any, k: str, av: list, v: list, path: str) -> list:
    c.budget.charge(len(av) * len(v), f"{path}/{k}")
    if k == "required":
        return list(av) + [x for x in v if x not in av]
    if k == NOT_IN:  # none of these strings, nor of those
        return sorted(set(av) | set(v))
    common = [x for x in av if x in v]  # (enum)
    if not common:
        raise ConstraintError(f"{path}: allOf with enums that share no value")
    return common


_CONDITIONAL = ("if", "then", "else")
_OTHER_TYPES = ["string", "number", "boolean", "null", "array"]  # (than object: integer is a number)


def conditional_cases(c: Any, parts: list, path: str) -> list:
    """allOf parts whose `if` tests one property's values (`{properties: {p: {const | enum}}}`, with `required:
    [p]` in all of them or in none) written as one anyOf of the cases of p, each with the `then` of the tests it
    passes and the `else` of the others: p absent (or not an object), p one of the values (a case per set of
    tests they pass), p another value. Exact, and a case per value set, where merging the parts' conditions
    two by two made 2 ** n branches (or was refused)."""
    tests: dict[str, list] = {}
    for i, part in enumerate(parts):
        part = c.deref(part, path)
        tested = _tested(c, part.get("if"), path) if isinstance(part, dict) else None
        if tested is not None:
            tests.setdefault(tested[0], []).append((i, part, *tested[1:]))
    chain = max(tests.values(), key=len, default=[])
    if len(chain) < 2 or len({required for *_, required in chain}) > 1:
        return parts
    p, required = next(k for k, v in tests.items() if v is chain), chain[0][-1]
    c.budget.charge(sum(len(values) for _, _, values, _ in chain) * len(chain), path)
    passed: dict[str, set[int]] = {}
    for n, (_, _, values, _) in enumerate(chain):
        for v in sorted(values):  # (a set of texts: its order changes with the process's hash seed, not the cases')
            passed.setdefault(v, set()).add(n)
    groups: dict[frozenset, list] = {}
    for v, ns in passed.items():
        groups.setdefault(frozenset(ns), []).append(json.loads(v))
    then = [part.get("then", True) for _, part, _, _ in chain]
    other = [part.get("else", True) for _, part, _, _ in chain]
    every = set(range(len(chain)))
    cases: list[tuple[dict, set]] = [({"type": "object", "required": [p], "properties": {p: {"enum": vs}}}, set(ns))
                                     for ns, vs in groups.items()]  # fmt: skip
    every_value = [json.loads(v) for v in passed]
    cases.append(({"type": "object", "required": [p], "properties": {p: {"not": {"enum": every_value}}}}, set()))
    if required:
        cases += [({"type": "object", "properties": {p: False}}, set()), ({"type": _OTHER_TYPES}, every)]
    else:
        cases.append(({"properties": {p: False}}, every))
    branches = [{"allOf": [case, *(then[n] if n in ns else other[n] for n in sorted(every))]} for case, ns in cases]
    kept = {i: {k: v for k, v in part.items() if k not in _CONDITIONAL} for i, part, _, _ in chain}
    first = chain[0][0]
    out = [kept.get(i, part) for i, part in enumerate(parts)]
    out.insert(first + 1, {"anyOf": branches})
    return out


def _tested(c: Any, cond: Any, path: str) -> tuple[str, set, bool] | None:
    """(p, the canonical texts of its values, whether p is required) of an `if` that tests one property against
    a const / enum and nothing else; None for any other."""
    cond = c.deref(cond, path) if cond is not None else None
    if not isinstance(cond, dict) or not set(cond) & VOCABULARY <= {"properties", "required"}:
        return None
    props = cond.get("properties")
    if not isinstance(props, dict) or len(props) != 1:
        return None
    p, sub = next(iter(props.items()))
    if cond.get("required") not in (None, [p]):
        return None
    sub = c.deref(sub, path)
    if not isinstance(sub, dict) or len(set(sub) & VOCABULARY) != 1 or not set(sub) & {"const", "enum"}:
        return None
    return p, _fixed(c, sub, path), cond.get("required") == [p]


def merge_properties(a: dict, b: dict) -> tuple[dict, set]:
    pa, pb = a.get("properties", {}), b.get("properties", {})
    addl_a, addl_b = a.get("additionalProperties"), b.get("additionalProperties")
    props, excluded = {}, set()
    for name in [*pa, *(n for n in pb if n not in pa)]:
        ca = pa.get(name, addl_a)
        cb = pb.get(name, addl_b)
        if ca is False or cb is False:
            excluded.add(name)
            props[name] = False  # (kept: the property is forbidden, not unknown)
            continue
        parts = [x for x in (ca, cb) if x not in (None, True)]
        props[name] = True if not parts else parts[0] if len(parts) == 1 else {"allOf": parts}
    return props, excluded


def types_of(c: Any, schema: Any, path: str, generated: bool, depth: int = 0) -> set[str]:
    """JSON types of the values a schema generates (generated=True) or accepts (False); integer is number."""
    every = {"string", "number", "boolean", "null", "object", "array"}
    c.budget.charge(1, path)
    schema = c.deref(schema, path)
    if schema is True or depth > 16:
        return every
    if schema is False:
        return set()
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return {"number" if value_type(v) == "integer" else value_type(v) for v in values}
    t = schema.get("type")
    out = every if t is None else {"number" if x == "integer" else x for x in ([t] if isinstance(t, str) else t)}
    if t is None and generated:
        from .json_formats import FORMATS

        inferred = implied_type(schema, FORMATS)
        if inferred:
            out = {inferred}
    for key in ("anyOf", "oneOf"):
        if key in schema:
            out = out & set().union(*(types_of(c, s, path, generated, depth + 1) for s in schema[key]))
    for s in schema.get("allOf", []):
        out = out & types_of(c, s, path, generated, depth + 1)
    return out


def discriminated(c: Any, subs: list, path: str, required: bool = True) -> str | None:
    """The property that tells every branch apart: an object property each branch requires (with required=False:
    lists) and fixes (const / enum) to values no other branch allows. None: no such property."""
    fixed_per_branch = []
    for s in subs:
        if not isinstance(s, dict):
            return None
        c.budget.charge(len(s.get("required", ()) if required else s.get("properties", ())), path)  # (its loop)
        props, fixed = s.get("properties", {}), {}
        for k in s.get("required", []) if required else props:
            values = _fixed(c, props.get(k), path)
            if values:
                fixed[k] = values
        fixed_per_branch.append(fixed)
    common = set.intersection(*(set(f) for f in fixed_per_branch))
    for k in sorted(common):
        seen: set = set()
        total = 0
        for f in fixed_per_branch:
            seen |= f[k]
            total += len(f[k])
        if len(seen) == total:  # (pairwise disjoint)
            return k
    return None


def excludes(c: Any, a: Any, b: Any, path: str) -> bool:
    """Whether no object valid against `a` is valid against `b`: a requires a property b forbids (b has it
    `false` / `not: {}`, or b's additionalProperties is false without it among b's properties or patterns), or
    both require a property fixed (const / enum) to values they do not share."""
    from .json_objects import matches_nothing

    if not (isinstance(a, dict) and isinstance(b, dict)):
        return False
    props_a, props_b = a.get("properties", {}), b.get("properties", {})
    required_a, required_b = a.get("required", []), b.get("required", [])
    # (called for every pair of oneOf branches: a long `required` shared through $refs costs per pair)
    c.budget.charge(len(required_a) + len(required_b), path)
    required_b = {p for p in required_b if isinstance(p, str)}
    for p in required_a:
        if not isinstance(p, str):
            continue
        if p in props_b:
            if matches_nothing(c, c.deref(props_b[p], path), path):
                return True
        elif b.get("additionalProperties") is False and not b.get("patternProperties"):
            return True
        if p in required_b and _disjoint(c, props_a.get(p), props_b.get(p), path):
            return True
    return False


def _disjoint(c: Any, a: Any, b: Any, path: str) -> bool:
    """Whether no value is valid against both schemas (False: not known): const / enum values they do not
    share, or patterns no string matches both of (one of the schemas allowing strings alone)."""
    va, vb = _fixed(c, a, path), _fixed(c, b, path)
    if va is not None and vb is not None:
        return not va & vb
    a, b = c.deref(a, path), c.deref(b, path)
    if not (isinstance(a, dict) and isinstance(b, dict) and "pattern" in a and "pattern" in b):
        return False
    if {"string"} not in (types_of(c, a, path, generated=False), types_of(c, b, path, generated=False)):
        return False  # (a pattern constrains strings alone)
    from .json_string_product import patterns_disjoint
    from .regex import parse_pattern

    try:
        nodes = [parse_pattern(s["pattern"], f"{path}/pattern", c.budget, True, c.patterns) for s in (a, b)]
    except ConstraintLimitError:
        raise
    except ConstraintError:  # (a pattern not compiled: not known)
        return False
    return patterns_disjoint(c, *nodes, path)


def canonical(value: Any) -> str:
    """A JSON value's text, the same for values JSON Schema holds equal (1 and 1.0; objects in any key order)."""
    if isinstance(value, str):  # (json.dumps' own text of a string, without making an encoder for sort_keys)
        return encode_basestring_ascii(value)
    exact = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= 2**53
    if exact and float(value).is_integer():
        return str(int(value))
    return json.dumps(value, sort_keys=True)


def fixed_values(c: Any, schema: Any, path: str) -> set | None:
    """The canonical texts of the values a const / enum schema allows (at most), None when it is not one."""
    return _fixed(c, schema, path)


def _fixed(c: Any, schema: Any, path: str) -> set | None:
    """The JSON texts a const / enum schema allows (at most), None when it is not one: an allOf (a property
    merged from parts) allows only what each of its const / enum parts does."""
    schema = c.deref(schema, path)
    if not isinstance(schema, dict):
        return None
    parts = [_fixed(c, p, path) for p in schema.get("allOf", []) if isinstance(schema.get("allOf"), list)]
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(values, list):
        parts.append({canonical(v) for v in values})
    parts = [p for p in parts if p is not None]
    return set.intersection(*parts) if parts else None
