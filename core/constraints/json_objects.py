"""JSON Schema objects: listed properties, required ones, other members (additional or matching a
`patternProperties` pattern), `minProperties` / `maxProperties` and dependencies. By default the members come
in any order, each listed property at most once (json_members.py: exact, built lazily); `listed_order`
(llama.cpp's layout) writes the listed properties in the order written, other members after them (past
_ORDERED_TRIE_FROM listed properties as json_members' key trie, `ordered`: the same order, its counts exact).

Exact where it can be, a subset of the valid objects where not (never an invalid one):
- a listed property (or a dependency, or a property with dependencies) whose name matches patterns gets its
  schema and theirs (allOf);
- with patterns, other keys (json_keys.py) take the schemas of the patterns they match (exact up to
  _EXACT_SETS patterns, beyond: every pattern's schema at once), additionalProperties when they match none;
  other keys are any string but the listed names, written without escapes;
- a property with a dependentSchemas / schema dependency is not generated (nor any property whose schema is
  false or `not: {}`, nor an optional one whose schema no value fits or is not compiled: `{"type": "object",
  "enum": ["a"]}`); dependentRequired is exact (listed_order: the dependencies are made required);
- other members count once towards minProperties (two could repeat a key). With `listed_order`,
  minProperties beyond the required ones makes the first optional properties required, then asks for one
  more member, and maxProperties caps the other members (refused below the listed properties' count).
Every function takes the compiler `c` (json_schema.SchemaCompiler): its rules, visits and budget.
"""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Any

from .compile import compile_grammar
from .errors import ConstraintError
from .grammar import EMPTY, Grammar, Lit, Node, Ref, Repeat, alt, seq
from .json_keywords import VOCABULARY
from .json_members import COLON, Members, other_keys
from .limits import ConstraintLimitError
from .regex import parse_pattern

SPACE = Ref("space")
COMMA = seq(Lit(","), SPACE)
# listed_order with more listed properties than this: json_members' key trie (`ordered`), not llama.cpp's layout,
# whose each key is a parse per property that may come next (3,000 optional ones passed max_stacks at the first)
_ORDERED_TRIE_FROM = 64


def pattern_automaton(c: Any, node: Node) -> Any:
    """A pattern's (search form, over code points) tiny automaton, made once per pattern and compilation (and
    compiled as far as names lead it)."""
    from .automaton import Automaton

    automaton = c.patterns.get(node)
    if automaton is None:
        automaton = c.patterns[node] = Automaton(compile_grammar(Grammar({"root": node}), c.budget, lazy=True))
    return automaton


def _matches(node: Node, name: str, c: Any) -> bool:
    """Whether the pattern matches `name` (charged by its length: every pattern meets every listed name)."""
    c.budget.charge(1 + len(name) // 8, "patternProperties")  # (a step is about 8 bytes of the automaton)
    return pattern_automaton(c, node).accepts_bytes(name.encode("utf-8", "surrogatepass"))


def matches_nothing(c: Any, schema: Any, path: str) -> bool:
    """Whether the schema is `false` or `not` of a schema every value matches."""
    if schema is False:
        return True
    if not isinstance(schema, dict) or "not" not in schema:
        return False
    negated = c.deref(schema["not"], path)
    return negated is True or (isinstance(negated, dict) and not (set(negated) & VOCABULARY))


def object_rule(c: Any, schema: dict, name: str, path: str, tail: bool = False) -> Node:
    """The object's grammar; `tail`: only its members after a first one written before them, in the listed
    order, with the closing brace (json_unique_objects.py writes that first member itself)."""
    schema = _names_listed(c, schema, path) or schema
    props, is_required, patterns, nodes, addl = _listed(c, schema, path)
    deps: dict[str, list[str]] = {}
    forbidden = _dependencies(c, schema, props, is_required, addl, deps, path, patterns, nodes)
    forbidden += [p for p in props if matches_nothing(c, props[p], path)]  # never generated, never an extra key
    for p in forbidden:
        if p in is_required:
            raise ConstraintError(f"{path}: required property {p!r} allows no value")
        props.pop(p, None)
    extra_allowed = bool(patterns) or addl is True or isinstance(addl, dict)
    lo, hi = int(schema.get("minProperties", 0)), schema.get("maxProperties")
    c.use("space")
    child = (lambda s: f"{name}-{s}") if name else (lambda s: s)
    key_node = name_node = None
    if constrains(schema.get("propertyNames", True)):
        names = schema["propertyNames"]
        name_node = _names_pattern(c, names, path) if patterns and extra_allowed else None
        extras = extra_allowed and name_node is None
        key_node = _property_names(c, names, props, is_required, forbidden, extras, child, path)
        extra_allowed = extra_allowed and (
            name_node is not None or (key_node is not False and (key_node is None or not patterns))
        )
    anything = not props and not forbidden and not patterns and addl is True and not lo and hi is None
    if anything and key_node is None and not tail:
        return c.use("object")  # any object
    items: list[tuple[str, Node]] = []
    for pname, pschema in props.items():
        mark = c.checkpoint()
        try:
            value = c.named(c.visit_shared(pschema, child(pname), f"{path}/properties/{pname}"), child(pname))
        except ConstraintLimitError:
            raise
        except ConstraintError as e:
            if pname in is_required:
                raise
            c.rollback(mark)  # an optional property no value fits (or not compiled): never generated, a subset
            c.left_out.append(f"{path}/properties/{pname}: {e}")
            forbidden.append(pname)
            continue
        items.append((pname, value))
    extra = None
    if extra_allowed and key_node:  # (other keys: the names propertyNames allows, none of them listed)
        value = c.named(c.visit(addl, child("additional-value"), f"{path}/additionalProperties"), child("add"))
        extra = ("pattern", c.named(seq(key_node, Lit(":"), SPACE, value), child("named-kv")))
    elif extra_allowed and patterns:
        extra = ("patterns", _pattern_keys(c, patterns, nodes, addl, child, path, name_node))
    elif extra_allowed:
        value = c.visit(addl, child("additional-value"), f"{path}/additionalProperties")
        extra = ("additional", c.named(value, child("add")))
    if tail or (c.listed_order and len(items) <= _ORDERED_TRIE_FROM):
        return _in_order(c, schema, items, is_required, extra, [*props, *forbidden], child, path, tail)
    return _any_order(c, items, forbidden, is_required, deps, extra, lo, hi, child, path, c.listed_order)


def _names_listed(c: Any, schema: dict, path: str) -> dict | None:
    """propertyNames an enum / const of names beside patternProperties, as those names listed with the schemas
    they take (their own and the patterns they match, else additionalProperties) and no other key: exact
    (other keys were never written there: a key had to match both a pattern and the names). None otherwise."""
    where = f"{path}/propertyNames"
    if not schema.get("patternProperties") or "propertyNames" not in schema or "unevaluatedProperties" in schema:
        return None
    names = c.deref(schema["propertyNames"], where)
    if not isinstance(names, dict) or len(set(names) & {"enum", "const"}) != 1:
        return None
    if set(names) & VOCABULARY - {"enum", "const", "type"} or names.get("type", "string") != "string":
        return None
    values = [names["const"]] if "const" in names else names["enum"]
    values = list(dict.fromkeys(v for v in values if isinstance(v, str))) if isinstance(values, list) else []
    patterns, props, addl = schema["patternProperties"], schema.get("properties", {}), schema.get(_ADDL)
    c.budget.charge(len(values) * (1 + len(patterns)), where)
    if addl is None:  # (as _listed: the spec's default, or closed_objects' choice)
        addl = not c.closed_objects
    nodes = {p: parse_pattern(p, f"{path}/patternProperties/{p}", c.budget, True, c.patterns) for p in patterns}
    listed = {}
    for n in values:
        if n in props:
            hits = [patterns[p] for p, node in nodes.items() if _matches(node, n, c)]
            listed[n] = {"allOf": [props[n], *hits]} if hits else props[n]
        elif (sub := unlisted_schema(c, n, patterns, nodes, addl)) is not None:
            listed[n] = sub
    rest = {k: v for k, v in schema.items() if k not in _NAMED}
    return {**rest, "properties": listed, _ADDL: False}


_ADDL = "additionalProperties"
_NAMED = ("propertyNames", "patternProperties", _ADDL, "properties")


def constrains(schema: Any) -> bool:
    """Whether a (sub)schema constrains anything (not true, not {}, not only annotations)."""
    return schema is not True and not (isinstance(schema, dict) and not set(schema) & VOCABULARY)


def _names_pattern(c: Any, names: Any, path: str) -> Node | None:
    """propertyNames that is a pattern only: its node (search form), which other keys must match (json_keys.py:
    with patternProperties), else None."""
    names = c.deref(names, f"{path}/propertyNames")
    if not isinstance(names, dict) or not isinstance(names.get("pattern"), str):
        return None
    if set(names) & VOCABULARY - {"pattern", "type"} or names.get("type", "string") != "string":
        return None
    return parse_pattern(names["pattern"], f"{path}/propertyNames/pattern", c.budget, True, c.patterns)


def _property_names(c: Any, names: Any, props: dict, is_required: set, forbidden: list, extras: bool, child,
                    path: str) -> Any:  # fmt: skip
    """propertyNames: the listed properties whose name it refuses are never written (a required one: refused);
    other keys are the strings it allows, written as it writes them (the key node; False: no other key; None:
    not compiled, ignored with strict=False), when no listed name is one of them (else they could repeat it)."""
    from .json_values import fitting

    where = f"{path}/propertyNames"
    names = c.deref(names, where)
    if not constrains(names):
        return None
    allowed = fitting(c, {**names, "type": "string"}, list(props), where) if props and names is not False else []
    for p in list(props):
        if p not in allowed:
            if p in is_required:
                raise ConstraintError(f"{path}: required property {p!r} is not a name propertyNames allows")
            props.pop(p)
            forbidden.append(p)
    if names is False or not extras:
        return False
    if allowed:
        c.unsupported(path, "propertyNames", f" with listed properties it allows ({allowed[0]!r}): other keys could"
                      " repeat them")  # fmt: skip
        return None
    return c.visit({**names, "type": "string"}, child("key"), where)


def _any_order(c: Any, items: list, forbidden: list, is_required: set, deps: dict, extra, lo: int, hi, child,
               path: str, ordered: bool = False) -> Node:  # fmt: skip
    """The members in any order (json_members.py): exact on the listed properties and their counts; `ordered`:
    in the order listed, other members after them (json_members.Members)."""
    written = {p for p, _ in items}
    for p in list(written):  # a property whose dependency can never be written can never be written either
        if any(d not in written for d in deps.get(p, ())):
            if p in is_required:
                raise ConstraintError(f"{path}: required property {p!r} depends on one that allows no value")
            written.discard(p)
    items = [(p, v) for p, v in items if p in written]
    excluded = [p for p in forbidden if p not in written] + [p for p in deps if p not in written and p not in forbidden]
    most = len(items) + (1 if extra else 0)  # (other members count once: two may share a key)
    if lo > most:
        c.unsupported(path, "minProperties", f" {lo} beyond the {most} distinct members that can be generated")
        lo = 0
    if hi is not None and len(is_required) > hi:
        raise ConstraintError(f"{path}: {len(is_required)} required properties are more than maxProperties {hi}")
    m = Members(
        c, c.prefix(child("members")), items, excluded, is_required, deps, extra, lo, hi, c.max_items, ordered=ordered
    )
    return seq(Lit("{"), SPACE, m.entry(), Lit("}"), SPACE)


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
    nodes = {p: parse_pattern(p, f"{path}/patternProperties/{p}", c.budget, True, c.patterns) for p in patterns}
    for p, n in nodes.items():
        c.budget.charge(len(props), f"{path}/patternProperties")
        for x in [x for x in props if _matches(n, x, c)]:  # (a listed name is never another member's key)
            props[x] = {"allOf": [props[x], patterns[p]]}
    for r in required:
        if r not in props:
            props[r] = unlisted_schema(c, r, patterns, nodes, addl)
            if props[r] is None:
                raise ConstraintError(f"{path}: required property {r!r} is forbidden by additionalProperties")
    return props, set(required), patterns, nodes, addl


def unlisted_schema(c: Any, name: str, patterns: dict, nodes: dict, addl: Any) -> Any:
    """The schema a member not in `properties` takes: those of the patterns its name matches, else
    additionalProperties (None: not allowed)."""
    c.budget.charge(len(nodes), "patternProperties")
    hits = [patterns[p] for p, n in nodes.items() if _matches(n, name, c)]
    if hits:
        return hits[0] if len(hits) == 1 else {"allOf": hits}
    return None if addl is False else addl if isinstance(addl, dict) else True


def _dependencies(c: Any, schema: dict, props: dict, is_required: set, addl: Any, out: dict, path: str,
                  patterns: dict, nodes: dict) -> list[str]:  # fmt: skip
    """dependentRequired / dependencies (draft 4-7) / dependentSchemas: a property's dependencies become listed
    properties, in `out` (exact: json_members.py), or (listed_order) required, a subset; a property with a
    dependent schema is never generated (unless required: refused), a subset. Returns the properties never
    generated."""
    required_by: dict[str, list] = dict(schema.get("dependentRequired", {}))
    schemas: dict[str, Any] = dict(schema.get("dependentSchemas", {}))
    for k, v in schema.get("dependencies", {}).items():
        (required_by if isinstance(v, list) else schemas)[k] = v
    forbidden = []
    for k, deps in required_by.items():
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise ConstraintError(f"{path}: the dependencies of {k!r} must be a list of property names")
        others = {d: unlisted_schema(c, d, patterns, nodes, addl) for d in [k, *deps] if d not in props}
        if any(others[d] is None for d in deps if d in others):
            forbidden.append(k)  # (a dependency can never be there: neither can it)
            continue
        for d, sub in others.items():  # (listed now: their schemas as other members; k itself exact too)
            if sub is not None:
                props[d] = sub
        if c.listed_order:
            is_required.update(deps)
        out[k] = deps
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


def _pattern_keys(c: Any, patterns: dict, nodes: dict, addl: Any, child, path: str, names: Node | None) -> Any:
    """The keys of other members (json_keys.py): each valued by the schemas of the patterns it matches (of up
    to _EXACT_SETS patterns, one value per set of them; of more, every pattern's schema at once, a subset), a
    key matching none by additionalProperties when it allows any; every key a match of `names` (propertyNames'
    pattern) when given."""
    from itertools import combinations

    from .json_keys import PatternKeys

    schemas = list(patterns.values())
    values: dict[frozenset, Node | None] = {}
    every = range(len(schemas))
    exact = len(schemas) <= _EXACT_SETS
    # every set of patterns only when they are few: there are 2^n - 1 (40 patterns took all memory)
    sets = [frozenset(q) for n in range(1, len(schemas) + 1) for q in combinations(every, n)] if exact else []
    for q in sets or [frozenset(every)]:
        mark = c.checkpoint()
        parts = [schemas[i] for i in sorted(q)]
        try:
            node = c.visit(parts[0] if len(parts) == 1 else {"allOf": parts}, child("pattern-value"),
                           f"{path}/patternProperties")  # fmt: skip
            values[q] = c.named(node, child("pattern-value"))
        except ConstraintLimitError:
            raise
        except ConstraintError as e:
            c.rollback(mark)
            c.left_out.append(f"{path}/patternProperties: keys matching {len(q)} of them: {e}")
            values[q] = None
    additional = None
    if addl is True or isinstance(addl, dict):
        additional = c.named(c.visit(addl, child("additional-value"), f"{path}/additionalProperties"), child("add"))
    value = lambda q: values.get(q if exact else frozenset(every))  # noqa: E731
    return PatternKeys(c, list(nodes.values()), value, additional, names)


_EXACT_SETS = 3  # patterns up to this many: a value per set of them a key matches


# -- listed order (llama.cpp's layout) ---------------------------------------------------------------------------


def _in_order(c: Any, schema: dict, items: list, is_required: set, extra, names: list, child, path: str,
              tail: bool = False) -> Node:  # fmt: skip
    """The listed properties in the order written (optional ones may be left out), other members after them
    (`tail`: after a member written before them, with the closing brace)."""
    props = dict(items)
    extra_lo, extra_hi = _counts(c, schema, props, is_required, extra is not None, path)
    if extra_hi == 0:
        extra = None
    kvs = [(c.named(seq(Lit(encode_basestring(p)), COLON, v), child(f"{p}-kv")), p in is_required) for p, v in items]
    member = None
    if extra is not None and extra[0] == "pattern":
        member = extra[1]
    elif extra is not None and extra[0] == "patterns":
        keys = other_keys(c, c.prefix(child("pattern-k")), names, None, extra[1])
        member = c.named(keys, child("pattern-kv"))
    elif extra is not None:
        member = c.named(other_keys(c, c.prefix(child("additional-k")), names, extra[1]), child("additional-kv"))
    if tail:
        return seq(members(c, kvs, member, child, extra_lo, extra_hi, tail=True), Lit("}"), SPACE)
    return seq(Lit("{"), SPACE, members(c, kvs, member, child, extra_lo, extra_hi), Lit("}"), SPACE)


def repetition(item: Node, lo: int, hi: int | None) -> Node:
    return item if (lo, hi) == (1, 1) else Repeat(item, lo, hi)


def members(
    c: Any, items: list[tuple[Node, bool]], extra: Node | None, child, extra_lo: int = 0, extra_hi=None,
    tail: bool = False,
) -> Node:  # fmt: skip
    """Object members in order (optional ones may be left out), comma-separated, then extra_lo..extra_hi `extra`
    ones (capped by the compiler's max_items); extra_lo > 0 only when every item is required. `tail`: the members
    after one written before them (each after a comma)."""
    rest: list[Node] = [EMPTY] * (len(items) + 1)  # rest[i]: items[i:] after at least one member
    cap = extra_hi if c.max_items is None else c.max_items if extra_hi is None else min(extra_hi, c.max_items)
    cap = None if cap is None else max(cap, extra_lo)
    rest[len(items)] = repetition(seq(COMMA, extra), extra_lo, cap) if extra is not None else EMPTY
    for i in range(len(items) - 1, -1, -1):
        kv, req = items[i]
        piece = seq(COMMA, kv) if req else Repeat(seq(COMMA, kv), 0, 1)
        body = seq(piece, rest[i + 1])
        rest[i] = c.named(body, "rest") if i > 0 and not req else body
    if tail:
        return rest[0]
    alts = []
    for i, (kv, req) in enumerate(items):
        alts.append(seq(kv, rest[i + 1]))
        if req:
            return alt(*alts)
    if extra is not None:
        first_lo = max(extra_lo - 1, 0)
        first_hi = None if cap is None else max(cap - 1, first_lo)
        more = [] if first_hi == 0 else [repetition(seq(COMMA, extra), first_lo, first_hi)]
        alts.append(seq(extra, *more))
        if extra_lo > 0:  # (no items then: the members are the extra ones only)
            return alt(*alts)
    return Repeat(alt(*alts), 0, 1) if alts else EMPTY
