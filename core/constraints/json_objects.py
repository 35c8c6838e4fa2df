"""JSON Schema objects as GBNF: listed properties (in any order within groups of ANY_ORDER, the groups in the
order written; past ANY_ORDER_RULES rules in a schema, in the order written) with other members (additional or
matching a `patternProperties` pattern) anywhere between them, with `minProperties` / `maxProperties` (other
members counted: those come after the listed ones, in the order written; `listed_order`: always after them, as
llama.cpp writes them).

Exact where it can be, a subset of the valid objects where not (never an invalid one):
- a listed property whose name matches patterns gets its schema and theirs (allOf);
- keys generated for patterns are JSON strings containing a match, valued by every pattern's schema at once
  (so a key matching several patterns satisfies them all); a pattern that could match a listed name is
  refused (its keys could repeat a listed property);
- with patterns, keys matching none of them (additionalProperties) are not generated: their complement is
  no grammar; additional keys otherwise are any string but the listed names (written without escapes);
- dependentRequired / dependencies make the dependencies required; a property with a dependentSchemas /
  schema dependency is not generated (nor any property whose schema is false or `not: {}`, nor an optional
  one whose schema no value fits or is not compiled: `{"type": "object", "enum": ["a"]}`);
- minProperties beyond the required ones makes the first optional properties required, then asks for one
  more member (two could repeat a key: refused); maxProperties caps the other members (refused below the
  listed properties' count).
Every function takes the compiler `c` (json_schema.SchemaCompiler): its rules, visits and budget.
"""

from __future__ import annotations

from typing import Any

from .compile import compile_grammar
from .errors import ConstraintError
from .grammar import Grammar, Node
from .json_keywords import VOCABULARY
from .json_strings import key_excluding, pattern_gbnf
from .limits import ConstraintLimitError
from .regex import parse_pattern


def repetition(lo: int, hi: int | None) -> str:
    """The GBNF quantifier for lo..hi copies ("" for exactly one)."""
    if (lo, hi) == (1, 1):
        return ""
    short = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
    if short:
        return short
    return f"{{{lo},}}" if hi is None else f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def _matches(node: Node, name: str, c: Any) -> bool:
    """Whether the pattern (search form, over code points) matches `name`: through a tiny automaton."""
    from .automaton import Automaton

    program = compile_grammar(Grammar({"root": node}), c.budget)
    return Automaton(program).accepts_bytes(name.encode("utf-8", "surrogatepass"))


def matches_nothing(c: Any, schema: Any, path: str) -> bool:
    """Whether the schema is `false` or `not` of a schema every value matches."""
    if schema is False:
        return True
    if not isinstance(schema, dict) or "not" not in schema:
        return False
    negated = c.deref(schema["not"], path)
    return negated is True or (isinstance(negated, dict) and not (set(negated) & VOCABULARY))


def object_rule(c: Any, schema: dict, name: str, path: str) -> str:
    props, is_required, patterns, nodes, addl = _listed(c, schema, path)
    forbidden = _dependencies(c, schema, props, is_required, addl, path)
    forbidden += [p for p in props if matches_nothing(c, props[p], path)]  # never generated, never an extra key
    for p in forbidden:
        if p in is_required:
            raise ConstraintError(f"{path}: required property {p!r} allows no value")
        props.pop(p, None)
    extra_allowed = bool(patterns) or addl is True or isinstance(addl, dict)
    extra_lo, extra_hi = _counts(c, schema, props, is_required, extra_allowed, path)
    if extra_hi == 0:
        extra_allowed = False
    c.use("space")
    if not props and not forbidden and not patterns and addl is True and not extra_lo and extra_hi is None:
        return c.use("object")  # any object
    child = (lambda s: f"{name}-{s}") if name else (lambda s: s)
    items = []
    for pname, pschema in props.items():
        mark = c.checkpoint()
        try:
            value = c.visit(pschema, child(pname), f"{path}/properties/{pname}")
        except ConstraintLimitError:
            raise
        except ConstraintError:
            if pname in is_required:
                raise
            c.rollback(mark)  # an optional property no value fits (or not compiled): never generated, a subset
            continue
        kv = f'{_literal(pname)} space ":" space {c.named(value, child(pname))}'
        items.append((c.add_rule(child(f"{pname}-kv"), kv), pname in is_required))
    extra = None
    if extra_allowed and patterns:
        extra = _pattern_members(c, patterns, nodes, child, path)
    elif extra_allowed:
        extra = _additional(c, addl, [*props, *forbidden], child, path)
    cost = sum(1 << len(items[i : i + ANY_ORDER]) for i in range(0, len(items), ANY_ORDER))
    free = len(items) > 1 and c.any_order_rules + cost <= ANY_ORDER_RULES
    if free and not c.listed_order and not extra_lo and extra_hi is None and c.max_items is None:
        c.any_order_rules += cost
        body = any_order(c, items, extra, child, path)
    else:
        body = members(c, items, extra, child, extra_lo, extra_hi)
    return f'"{{" space {body} "}}" space'


def _listed(c: Any, schema: dict, path: str) -> tuple[dict, set, dict, dict, Any]:
    """(listed properties with their schemas, the required ones, patterns, their nodes, additionalProperties
    as generated: True where the spec's default applies)."""
    props = dict(schema.get("properties", {}))
    required = list(dict.fromkeys(schema.get("required", [])))
    patterns = schema.get("patternProperties") or {}
    addl = schema.get("additionalProperties")
    if "unevaluatedProperties" in schema and schema["unevaluatedProperties"] is not False:
        c.unsupported(path, "unevaluatedProperties", " (only false is)")
    if schema.get("unevaluatedProperties") is False and addl is None:
        addl = False
    if addl is None and (not c.closed_objects or not (props or patterns)):
        addl = True  # the spec's default: any other property (after the listed ones)
    nodes = {p: parse_pattern(p, f"{path}/patternProperties/{p}", c.budget, search=True) for p in patterns}
    for r in required:
        if r not in props:
            matched = any(_matches(n, r, c) for n in nodes.values())
            if addl is False and not matched:
                raise ConstraintError(f"{path}: required property {r!r} is forbidden by additionalProperties")
            props[r] = addl if isinstance(addl, dict) and not matched else True
    for p, n in nodes.items():
        c.budget.charge(len(props), f"{path}/patternProperties")
        hits = [x for x in props if _matches(n, x, c)]
        for x in hits:
            props[x] = {"allOf": [props[x], patterns[p]]}
        if hits:
            c.unsupported(f"{path}/patternProperties", "patternProperties", f": {p!r} matches the listed {hits[0]!r}")
    return props, set(required), patterns, nodes, addl


def _dependencies(c: Any, schema: dict, props: dict, is_required: set, addl: Any, path: str) -> list[str]:
    """dependentRequired / dependencies (draft 4-7) / dependentSchemas as a subset: a property's dependencies
    become required (so they are there whenever it is); a property with a dependent schema is never generated
    (unless required: refused). Returns the properties never generated."""
    required_by: dict[str, list] = dict(schema.get("dependentRequired", {}))
    schemas: dict[str, Any] = dict(schema.get("dependentSchemas", {}))
    for k, v in schema.get("dependencies", {}).items():
        (required_by if isinstance(v, list) else schemas)[k] = v
    forbidden = []
    for k, deps in required_by.items():
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise ConstraintError(f"{path}: the dependencies of {k!r} must be a list of property names")
        missing = [d for d in deps if d not in props]
        if missing and addl is False:
            forbidden.append(k)  # (its dependencies can never be there: neither can it)
            continue
        for d in deps:
            props.setdefault(d, addl if isinstance(addl, dict) else True)
            is_required.add(d)
    for k, sub in schemas.items():
        if sub is True or (isinstance(sub, dict) and not (set(sub) & VOCABULARY)):
            continue
        if k in is_required:
            c.unsupported(path, "dependentSchemas", f" of the required {k!r}")  # (strict=False: ignored)
            continue
        forbidden.append(k)
    return forbidden


def _counts(c: Any, schema: dict, props: dict, is_required: set, extra_allowed: bool, path: str) -> tuple:
    """minProperties / maxProperties: the first optional properties made required (is_required grows), then
    (fewest, most) other members; most None: no bound."""
    lo, hi = int(schema.get("minProperties", 0)), schema.get("maxProperties")
    need = lo - len(is_required)
    for pname in props:
        if need <= 0:
            break
        if pname not in is_required:
            is_required.add(pname)
            need -= 1
    extra_lo = max(need, 0)
    extra_hi = None if hi is None else int(hi) - len(props)
    if extra_hi is not None and extra_hi < 0:
        c.unsupported(path, "maxProperties", f" below the {len(props)} properties that may appear")
        extra_hi = 0
    if extra_lo > 1 or (extra_lo and (not extra_allowed or (extra_hi is not None and extra_hi < extra_lo))):
        # (two other members could have one key: only one more member is sure to count)
        c.unsupported(path, "minProperties", f" beyond the listed properties (by {extra_lo})")
        extra_lo = 0
    return extra_lo, extra_hi


def _literal(name: str) -> str:
    from .json_schema import json_literal

    return json_literal(name)


def _additional(c: Any, addl: Any, props: list[str], child, path: str) -> str:
    value = c.visit(addl, child("additional-value"), f"{path}/additionalProperties")
    names = tuple(sorted(set(props)))
    key_rule = c.key_rules.get(names)
    if key_rule is None and props:  # one exclusion per set of names (Kubernetes objects share theirs)
        key_rule = c.key_rules[names] = c.fresh(child("additional-k"))
        c.budget.charge(sum(map(len, props)), f"{path}/additionalProperties")
        fresh = lambda: c.fresh("k")  # noqa: E731  (short: one rule per character of the names)
        for rule, rhs in key_excluding(list(names), key_rule, c.max_string_length, fresh).items():
            c.budget.charge(len(rhs), f"{path}/additionalProperties")
            c.rules[rule] = rhs
    elif not props:
        key_rule = c.use("string")
    return c.add_rule(child("additional-kv"), f'{key_rule} ":" space {c.named(value, child("add"))}')


def _pattern_members(c: Any, patterns: dict, nodes: dict, child, path: str) -> str:
    """One member whose key contains a match of a pattern, valued by every pattern's schema."""
    every = list(patterns.values())
    value_schema = every[0] if len(every) == 1 else {"allOf": every}
    value = c.named(c.visit(value_schema, child("pattern-value"), f"{path}/patternProperties"), child("pattern-value"))
    keys = []
    for i, node in enumerate(nodes.values()):
        key = c.add_rule(child(f"pattern-key-{i}"), f'"\\"" ({pattern_gbnf(node)}) "\\"" space')
        keys.append(key)
    key_rule = keys[0] if len(keys) == 1 else c.add_rule(child("pattern-key"), " | ".join(keys))
    return c.add_rule(child("pattern-kv"), f'{key_rule} ":" space {value}')


ANY_ORDER = 6  # listed properties take any order within groups of this many (2^n rules each), groups in order
ANY_ORDER_RULES = 4096  # ... while a schema's any-order rules stay within this many (the later objects: in order)


def any_order(c: Any, items: list[tuple[str, bool]], extra: str | None, child, path: str) -> str:
    """Object members with the listed ones in any order within groups of ANY_ORDER (the groups in the order
    written), each at most once (the required ones once), and `extra` ones anywhere between: one rule per
    group and set of its members written so far."""
    groups = [items[i : i + ANY_ORDER] for i in range(0, len(items), ANY_ORDER)]
    c.budget.charge(sum((len(g) + 3) << len(g) for g in groups), f"{path}/properties")
    names = [[c.fresh(child("any-order")) for _ in range(1 << len(g))] for g in groups]
    for k, group in enumerate(groups):
        required = sum(1 << i for i, (_, req) in enumerate(group) if req)
        done_all = names[k + 1][0] if k + 1 < len(groups) else '""'  # (the next group, or the end)
        for done in range(1 << len(group)):  # after at least one member, `done` the group's ones written
            alts = [f'"," space {kv} {names[k][done | 1 << i]}' for i, (kv, _) in enumerate(group) if not done >> i & 1]
            if extra:
                alts.append(f'"," space {extra} {names[k][done]}')
            if done & required == required:
                alts.append(done_all)
            c.rules[names[k][done]] = " | ".join(alts)
    first = [f"{extra} {names[0][0]}"] if extra else []
    for k, group in enumerate(groups):  # the first member: from the first group with a required one at the latest
        first += [f"{kv} {names[k][1 << i]}" for i, (kv, _) in enumerate(group)]
        if any(req for _, req in group):
            return "(" + " | ".join(first) + ")"
    return "(" + " | ".join(first) + ")?"


def members(c: Any, items: list[tuple[str, bool]], extra: str | None, child, extra_lo: int = 0, extra_hi=None) -> str:
    """Object members in order (optional ones may be left out), comma-separated, then extra_lo..extra_hi `extra`
    ones (capped by the compiler's max_items); extra_lo > 0 only when every item is required. Uncounted `extra`
    ones go anywhere between the listed ones (but after them with `listed_order`)."""
    rest: list[str] = [""] * (len(items) + 1)  # rest[i]: items[i:] after at least one member
    cap = extra_hi if c.max_items is None else c.max_items if extra_hi is None else min(extra_hi, c.max_items)
    cap = None if cap is None else max(cap, extra_lo)
    if extra and items and not extra_lo and cap is None and not c.listed_order:
        return _interleaved(c, items, extra, child)
    tail = f'( "," space {extra} ){repetition(extra_lo, cap)}' if extra else ""
    rest[len(items)] = tail
    for i in range(len(items) - 1, -1, -1):
        kv, req = items[i]
        piece = f'"," space {kv}' if req else f'( "," space {kv} )?'
        body = f"{piece} {rest[i + 1]}".strip()
        rest[i] = c.add_rule(child(f"{kv}-rest"), body) if i > 0 and not req else body
    alts = []
    for i, (kv, req) in enumerate(items):
        alts.append(f"{kv} {rest[i + 1]}".strip())
        if req:
            return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"
    if extra:
        first_lo = max(extra_lo - 1, 0)
        first_hi = None if cap is None else max(cap - 1, first_lo)
        more = "" if first_hi == 0 else f' ( "," space {extra} ){repetition(first_lo, first_hi)}'
        alts.append(f"{extra}{more}")
        if extra_lo > 0:  # (no items then: the members are the extra ones only)
            return alts[-1] if len(alts) == 1 else "(" + " | ".join(alts) + ")"
    return "(" + " | ".join(alts) + ")?" if alts else ""


def _interleaved(c: Any, items: list[tuple[str, bool]], extra: str, child) -> str:
    """Listed members in order, any number of `extra` ones before, between and after them."""
    more = c.add_rule(child("extras"), f'( "," space {extra} )*')
    rest: list[str] = [""] * (len(items) + 1)
    for i in range(len(items) - 1, -1, -1):
        kv, req = items[i]
        piece = f'"," space {kv} {more}' if req else f'( "," space {kv} {more} )?'
        body = f"{piece} {rest[i + 1]}".strip()
        rest[i] = c.add_rule(child(f"{kv}-rest"), body) if i > 0 and not req else body
    alts = [f"{extra} {more} {rest[0]}".strip()]
    for i, (kv, req) in enumerate(items):
        alts.append(f"{kv} {more} {rest[i + 1]}".strip())
        if req:
            return "(" + " | ".join(alts) + ")"
    return "(" + " | ".join(alts) + ")?"
