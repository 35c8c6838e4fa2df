"""JSON Schema to GBNF (then to a grammar, like any GBNF).

    schema_to_gbnf({"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}}, "required": ["a"]})
    ->  a-kv ::= "\\"a\\"" space ":" space a
        a    ::= ([1-9] | [1-9] [0-9]{1,15}) space
        root ::= "{" space a-kv "}" space                      (+ the primitives it uses: space, ...)

Supported: `type` (one or a list), `properties` / `required` / `additionalProperties`, `enum`, `const`,
`anyOf`, `oneOf` (when its branches cannot overlap: different types, or objects told apart by a required
`const` property), `allOf` (merged), `$ref` into the document (`#/$defs/...`, `#/definitions/...`, `#`, also
recursive), `items` / `prefixItems` / `additionalItems`, `minItems` / `maxItems`, string `pattern` / `format`
(date, time, date-time, uuid, email, hostname, ipv4, uri) / `minLength` / `maxLength`, number bounds
(`minimum`, `maximum`, `exclusive*`), `multipleOf: 1`, `minProperties` / `maxProperties` where the required
properties already satisfy them. Annotations (`title`, `description`, `default`, `examples`, ...) are ignored.
Any other keyword is an error naming it and its schema path; `strict=False` ignores it instead and lists it in
`SchemaCompiler.ignored`.

Generation choices, as in llama.cpp (outputs stay valid, they are a subset): properties come in the order
written; without `additionalProperties` no other property is generated; an empty schema at the root means an
object; whitespace between tokens is limited (see `json_any.SPACE_RULE`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import ConstraintError
from .gbnf import parse
from .grammar import Alt, Grammar, Lit, Node, Repeat, Seq, node_to_gbnf
from .json_any import PRIMITIVES, primitive_rules, with_dependencies
from .json_numbers import integer_bounds, integer_range, number_range
from .json_strings import FORMATS, key_excluding, pattern_gbnf
from .regex import parse_pattern

ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$comment", "$schema", "$id", "deprecated", "readOnly",
    "writeOnly", "contentMediaType", "contentEncoding", "$anchor", "$defs", "definitions",
})  # fmt: skip
SUPPORTED = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
    "additionalItems", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "$ref",
    "minProperties", "maxProperties", "unevaluatedProperties",
})  # fmt: skip
TYPES = ("string", "number", "integer", "boolean", "null", "object", "array")
_KEYWORD_TYPES = (
    ("object", ("properties", "additionalProperties", "required", "minProperties", "maxProperties")),
    ("array", ("items", "prefixItems", "additionalItems", "minItems", "maxItems")),
    ("string", ("pattern", "format", "minLength", "maxLength")),
    ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")),
)
_RESERVED = frozenset({"root", *PRIMITIVES, *(n for rules in FORMATS.values() for n in rules)})
_NAME = re.compile(r"^[a-zA-Z0-9-]+$")


def _value_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    if isinstance(v, float):
        return "number"
    return {str: "string", type(None): "null", list: "array", dict: "object"}.get(type(v), "?")


def _type_matches(value: Any, t: str) -> bool:
    vt = _value_type(value)
    return vt == t or (t == "number" and vt == "integer")


def json_literal(value: Any) -> str:
    """A JSON value as a GBNF literal of its compact JSON text."""
    return node_to_gbnf(Lit(json.dumps(value, ensure_ascii=False, separators=(",", ":"))))


class SchemaCompiler:
    """`max_string_length` / `max_items`: optional generation caps for strings, arrays and additional
    properties the schema leaves unbounded (outputs stay valid; a small model cannot ramble forever)."""

    def __init__(
        self, schema: Any, strict: bool = True, max_string_length: int | None = None, max_items: int | None = None
    ) -> None:
        self.schema = schema
        self.strict = strict
        self.max_string_length = max_string_length
        self.max_items = max_items
        self.rules: dict[str, str] = {}
        self.used: set[str] = set()  # primitives and format rules referenced
        self.ignored: list[str] = []  # keywords skipped (strict=False only)
        self.refs: dict[str, str] = {}

    # -- output -----------------------------------------------------------------------------------------------

    def gbnf(self) -> str:
        schema = self.schema
        if schema is True or (isinstance(schema, dict) and not (set(schema) - ANNOTATIONS)):
            root = self.use("object")  # llama.cpp's convention: an empty schema asks for an object
        else:
            root = self.visit(schema, "", "#")
        rules = {"root": root, **self.rules}
        primitives = primitive_rules(self.max_string_length, self.max_items)
        for name in sorted(with_dependencies(n for n in self.used if n in PRIMITIVES)):
            rules[name] = primitives[name]
        for fmt in sorted(n for n in self.used if n in FORMATS):
            rules.update(FORMATS[fmt])
        return "".join(f"{name} ::= {rhs}\n" for name, rhs in rules.items())

    # -- rules and names --------------------------------------------------------------------------------------

    def use(self, name: str) -> str:
        self.used.add(name)
        return name

    def add_rule(self, name: str, rhs: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-") or "value"
        key, n = base, 0
        while key in _RESERVED or (key in self.rules and self.rules[key] != rhs):
            n += 1
            key = f"{base}-{n}"
        self.rules[key] = rhs
        return key

    def named(self, rhs: str, name: str) -> str:
        """`rhs` as something that can stand in a sequence: itself when a rule name, else a new rule."""
        return rhs if _NAME.match(rhs) else self.add_rule(name, rhs)

    def unsupported(self, path: str, keyword: str, detail: str = "") -> None:
        msg = f"JSON Schema keyword {keyword!r} at {path} is not supported{detail}"
        if self.strict:
            raise ConstraintError(msg + " (strict=False ignores it)")
        self.ignored.append(msg)

    # -- references -------------------------------------------------------------------------------------------

    def resolve(self, ref: Any, path: str) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise ConstraintError(f"$ref {ref!r} at {path}: only references into the same document (#...) work")
        node = self.schema
        pointer = ref[1:]
        for raw in pointer.split("/")[1:] if pointer else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            try:
                node = node[int(part)] if isinstance(node, list) else node[part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise ConstraintError(f"$ref {ref!r} at {path}: {part!r} is not in the schema") from None
        return node

    def ref_rule(self, ref: str, path: str) -> str:
        name = self.refs.get(ref)
        if name is None:
            target = self.resolve(ref, path)
            base = ref.rsplit("/", 1)[-1] if "/" in ref else "root-ref"
            name = self.add_rule(base, "")  # reserved now: recursive references find it
            self.refs[ref] = name
            self.rules[name] = self.visit(target, name, ref)
        return name

    def deref(self, schema: Any, path: str) -> Any:
        """The schema with a top-level $ref replaced by its target (merged with any sibling keywords)."""
        for _ in range(64):
            if not (isinstance(schema, dict) and "$ref" in schema):
                return schema
            target = self.resolve(schema["$ref"], path)
            rest = {k: v for k, v in schema.items() if k != "$ref" and k not in ANNOTATIONS}
            schema = self.merge([target, rest], path) if rest else target
        raise ConstraintError(f"{path}: $ref chain too long (a reference cycle?)")

    # -- the visitor ------------------------------------------------------------------------------------------

    def visit(self, schema: Any, name: str, path: str) -> str:
        """GBNF right-hand side for values valid against `schema` (ending with optional space)."""
        if schema is True:
            return self.use("value")
        if schema is False:
            raise ConstraintError(f"{path}: the schema `false` allows no value")
        if not isinstance(schema, dict):
            raise ConstraintError(f"{path}: a schema is an object or a boolean, not {type(schema).__name__}")
        for key in schema:
            if key not in SUPPORTED and key not in ANNOTATIONS:
                self.unsupported(path, key)
        if "$ref" in schema:
            rest = {k: v for k, v in schema.items() if k != "$ref" and k not in ANNOTATIONS}
            if not rest:
                return self.ref_rule(schema["$ref"], path)
            return self.visit(self.deref(schema, path), name, path)
        if "allOf" in schema:
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            parts = schema["allOf"]
            if not isinstance(parts, list):
                raise ConstraintError(f"{path}/allOf: expecting a list of schemas")
            return self.visit(self.merge([rest, *parts], path), name, path)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.alternatives(schema, key, name, path)
        if "const" in schema:
            return self.literals([schema["const"]], schema, path)
        if "enum" in schema:
            if not isinstance(schema["enum"], list) or not schema["enum"]:
                raise ConstraintError(f"{path}/enum: expecting a non-empty list")
            return self.literals(schema["enum"], schema, path)
        return self.typed(schema, name, path)

    def typed(self, schema: dict, name: str, path: str) -> str:
        t = schema.get("type")
        if isinstance(t, list):
            if not t or any(x not in TYPES for x in t):
                raise ConstraintError(f"{path}/type: unknown type in {t!r}")
            if len(t) > 1:
                alts = [self.named(self.typed({**schema, "type": x}, f"{name}-{x}", path), f"{name}-{x}") for x in t]
                return " | ".join(alts)
            t = t[0]
        if t is None:
            t = next((ty for ty, keys in _KEYWORD_TYPES if any(k in schema for k in keys)), None)
            if t is None:
                return self.use("value")
        if t not in TYPES:
            raise ConstraintError(f"{path}/type: unknown type {t!r}")
        if t == "string":
            return self.string(schema, path)
        if t in ("number", "integer"):
            return self.number(schema, t, path)
        if t in ("boolean", "null"):
            return self.use(t)
        if t == "object":
            return self.object(schema, name, path)
        return self.array(schema, name, path)

    def literals(self, values: list, schema: dict, path: str) -> str:
        t = schema.get("type")
        types = t if isinstance(t, list) else [t] if t else None
        checked = {"type", "enum", "const"} | ANNOTATIONS
        others = sorted(set(schema) - checked)
        if others:
            self.unsupported(path, others[0], " together with enum/const")
        keep = [v for v in values if types is None or any(_type_matches(v, x) for x in types)]
        if "const" in schema and "enum" in schema:
            keep = [v for v in keep if v == schema["const"]]
        if not keep:
            raise ConstraintError(f"{path}: no value of enum/const fits the schema's type")
        self.use("space")
        lits = [json_literal(v) for v in keep]
        return (lits[0] if len(lits) == 1 else "(" + " | ".join(lits) + ")") + " space"

    def alternatives(self, schema: dict, key: str, name: str, path: str) -> str:
        branches = schema[key]
        if not isinstance(branches, list) or not branches:
            raise ConstraintError(f"{path}/{key}: expecting a non-empty list of schemas")
        rest = {k: v for k, v in schema.items() if k != key and k not in ANNOTATIONS}
        if key == "oneOf":
            self.check_exclusive(branches, rest, path)
        alts = []
        for i, branch in enumerate(branches):
            sub = self.merge([rest, branch], f"{path}/{key}/{i}") if rest else branch
            label = f"{name}-{i}" if name else f"alternative-{i}"
            alts.append(self.named(self.visit(sub, label, f"{path}/{key}/{i}"), label))
        return " | ".join(dict.fromkeys(alts))

    # -- strings and numbers ----------------------------------------------------------------------------------

    def string(self, schema: dict, path: str) -> str:
        fmt, pattern = schema.get("format"), schema.get("pattern")
        lo, hi = schema.get("minLength", 0), schema.get("maxLength")
        lengths = lo > 0 or hi is not None
        self.use("space")
        if pattern is not None:
            if lengths or fmt is not None:
                self.unsupported(path, "minLength/maxLength/format", " together with pattern")
            node = parse_pattern(pattern, f"{path}/pattern")
            if self.max_string_length is not None:
                node = _cap_repeats(node, self.max_string_length)
            return f'"\\"" ({pattern_gbnf(node)}) "\\"" space'
        if fmt is not None:
            if fmt not in FORMATS:
                self.unsupported(path, "format", f" for {fmt!r} (known: {', '.join(FORMATS)})")
            else:
                if lengths:
                    self.unsupported(path, "minLength/maxLength", f" together with format {fmt!r}")
                self.use(fmt)
                return f'"\\"" {fmt} "\\"" space'
        if hi is not None and hi < lo:
            raise ConstraintError(f"{path}: maxLength {hi} is below minLength {lo}")
        hi = _capped(hi, self.max_string_length, lo)
        if lo == 0 and hi is None:
            return self.use("string")
        self.use("char")
        rep = f"{{{lo},}}" if hi is None else f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"
        return f'"\\"" char{rep} "\\"" space'

    def number(self, schema: dict, t: str, path: str) -> str:
        step = schema.get("multipleOf")
        if step is not None:
            if step == 1:
                t = "integer"
            else:
                self.unsupported(path, "multipleOf", f" (only 1 is: got {step})")
        lo, hi = schema.get("minimum"), schema.get("maximum")
        lo_x, hi_x = schema.get("exclusiveMinimum", False), schema.get("exclusiveMaximum", False)
        if not isinstance(lo_x, bool):  # draft 6+: a number
            lo, lo_x = (lo_x, True) if lo is None or lo_x >= lo else (lo, False)
        if not isinstance(hi_x, bool):
            hi, hi_x = (hi_x, True) if hi is None or hi_x <= hi else (hi, False)
        self.use("space")
        if lo is None and hi is None:
            return self.use(t)
        if t == "integer":
            return integer_range(*integer_bounds(lo, lo_x, hi, hi_x)) + " space"
        self.use("decimal-part")
        return number_range(lo, lo_x, hi, hi_x) + " space"

    # -- objects and arrays -----------------------------------------------------------------------------------

    def object(self, schema: dict, name: str, path: str) -> str:
        props = dict(schema.get("properties", {}))
        required = list(schema.get("required", []))
        addl = schema.get("additionalProperties")
        if schema.get("unevaluatedProperties") is False and addl is None:
            addl = False
        elif "unevaluatedProperties" in schema and schema["unevaluatedProperties"] is not False:
            self.unsupported(path, "unevaluatedProperties", " (only false is)")
        for r in required:
            if r not in props:
                if addl is False:
                    raise ConstraintError(f"{path}: required property {r!r} is forbidden by additionalProperties")
                props[r] = addl if isinstance(addl, dict) else True
        extra_allowed = addl is True or isinstance(addl, dict)
        lo, hi = schema.get("minProperties", 0), schema.get("maxProperties")
        if lo > len(required):
            self.unsupported(path, "minProperties", f" beyond the {len(required)} required properties")
        if hi is not None and (extra_allowed or hi < len(props)):
            self.unsupported(path, "maxProperties", " below the number of properties that may appear")
        self.use("space")
        if not props and not isinstance(addl, dict) and addl is not False:
            return self.use("object")  # any object
        child = (lambda s: f"{name}-{s}") if name else (lambda s: s)
        items = []
        for pname, pschema in props.items():
            value = self.visit(pschema, child(pname), f"{path}/properties/{pname}")
            kv = f'{json_literal(pname)} space ":" space {self.named(value, child(pname))}'
            items.append((self.add_rule(child(f"{pname}-kv"), kv), pname in required))
        extra = None
        if extra_allowed:
            value = self.visit(addl, child("additional-value"), f"{path}/additionalProperties")
            key_rule = child("additional-k")
            if props:
                for rule, rhs in key_excluding(list(props), key_rule, self.max_string_length).items():
                    self.rules[rule] = rhs
            else:
                key_rule = self.use("string")
            extra = self.add_rule(child("additional-kv"), f'{key_rule} ":" space {self.named(value, child("add"))}')
        return f'"{{" space {self.members(items, extra, child)} "}}" space'

    def members(self, items: list[tuple[str, bool]], extra: str | None, child) -> str:
        """Object members in order (optional ones may be left out), comma-separated, then `extra` ones."""
        rest: list[str] = [""] * (len(items) + 1)  # rest[i]: items[i:] after at least one member
        cap = "*" if self.max_items is None else f"{{0,{self.max_items}}}"
        tail = f'( "," space {extra} ){cap}' if extra else ""
        rest[len(items)] = tail
        for i in range(len(items) - 1, -1, -1):
            kv, req = items[i]
            piece = f'"," space {kv}' if req else f'( "," space {kv} )?'
            body = f"{piece} {rest[i + 1]}".strip()
            rest[i] = self.add_rule(child(f"{kv}-rest"), body) if i > 0 and not req else body
        alts = []
        for i, (kv, req) in enumerate(items):
            alts.append(f"{kv} {rest[i + 1]}".strip())
            if req:
                return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"
        if extra:
            alts.append(f"{extra} {tail}")
        return "(" + " | ".join(alts) + ")?" if alts else ""

    def array(self, schema: dict, name: str, path: str) -> str:
        items, prefix = schema.get("items"), schema.get("prefixItems")
        rest = items
        if isinstance(prefix, dict):  # llama.cpp accepts a single schema there, as `items`
            prefix, rest = None, prefix
        if isinstance(items, list):  # draft 7 tuples
            prefix, rest = items, schema.get("additionalItems")
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        if hi is not None and hi < lo:
            raise ConstraintError(f"{path}: maxItems {hi} is below minItems {lo}")
        hi = _capped(hi, self.max_items, lo)
        if schema.get("uniqueItems") is True and (hi is None or hi > 1):
            self.unsupported(path, "uniqueItems", " (only with maxItems <= 1)")
        self.use("space")
        child = f"{name}-item" if name else "item"
        if prefix is not None:
            count = min(len(prefix), hi) if hi is not None else len(prefix)
            count = max(count, lo)
            refs = []
            for i in range(count):
                sub = prefix[i] if i < len(prefix) else rest if rest is not None else True
                where = f"{path}/prefixItems/{i}" if i < len(prefix) else f"{path}/items"
                label = f"{name}-tuple-{i}" if name else f"tuple-{i}"
                refs.append(self.named(self.visit(sub, label, where), label))
            return '"[" space ' + ' "," space '.join(refs) + (' "]" space' if refs else '"]" space')
        if rest is False or hi == 0:
            return '"[" space "]" space'
        item = self.named(self.visit(True if rest is None else rest, child, f"{path}/items"), child)
        more_lo, more_hi = max(lo - 1, 0), None if hi is None else hi - 1
        rep = (
            "*" if (more_lo, more_hi) == (0, None) else "+" if (more_lo, more_hi) == (1, None)
            else "?" if (more_lo, more_hi) == (0, 1) else f"{{{more_lo},}}" if more_hi is None
            else f"{{{more_lo}}}" if more_lo == more_hi else f"{{{more_lo},{more_hi}}}"
        )  # fmt: skip
        more = "" if more_hi == 0 else f' ("," space {item}){rep}'
        body = f"{item}{more}"
        return f'"[" space {body} "]" space' if lo > 0 else f'"[" space ({body})? "]" space'

    # -- combinators ------------------------------------------------------------------------------------------

    def merge(self, schemas: list, path: str) -> Any:
        out: Any = True
        for s in schemas:
            out = _merge2(self, out, self.deref(s, path), path)
        return out

    def check_exclusive(self, branches: list, rest: dict, path: str) -> None:
        """oneOf needs each output to match exactly one branch: refuse branches that could overlap."""
        subs = [self.deref(self.merge([rest, b], path) if rest else b, path) for b in branches]
        gen = [_types(self, s, path, generated=True) for s in subs]
        val = [_types(self, s, path, generated=False) for s in subs]
        for i in range(len(subs)):
            for j in range(len(subs)):
                if (
                    i != j
                    and gen[i] & val[j]
                    and not (gen[i] & val[j] <= {"object"} and _discriminated(self, subs, path))
                ):
                    self.unsupported(f"{path}/oneOf", "oneOf", f": branches {i} and {j} may both match")
                    return


def _cap_repeats(node: Node, cap: int) -> Node:
    """A pattern with its unbounded repetitions bounded by `cap` (a subset of its matches)."""
    if isinstance(node, Repeat):
        hi = max(node.min, cap) if node.max is None else node.max
        return Repeat(_cap_repeats(node.item, cap), node.min, hi)
    if isinstance(node, Seq):
        return Seq(tuple(_cap_repeats(i, cap) for i in node.items))
    if isinstance(node, Alt):
        return Alt(tuple(_cap_repeats(o, cap) for o in node.options))
    return node


def _capped(hi: int | None, cap: int | None, lo: int) -> int | None:
    """The upper bound with a generation cap applied (never below the lower bound)."""
    if cap is None:
        return hi
    cap = max(cap, lo)
    return cap if hi is None else min(hi, cap)


def _merge2(c: SchemaCompiler, a: Any, b: Any, path: str) -> Any:
    """allOf of two schemas as one (sound for the keywords supported here)."""
    if a is True:
        return b
    if b is True:
        return a
    if a is False or b is False:
        raise ConstraintError(f"{path}: allOf with the schema `false` allows no value")
    out = dict(a)
    for k, v in b.items():
        if k not in out or out[k] == v or k in ANNOTATIONS - {"$defs", "definitions"}:
            out.setdefault(k, v)
        else:
            out[k] = _merge_keyword(k, out[k], v, path)
    if "properties" in a or "properties" in b:
        out["properties"], excluded = _merge_properties(a, b)
        lost = [r for r in out.get("required", []) if r in excluded]
        if lost:
            raise ConstraintError(f"{path}: allOf requires {lost[0]!r}, which another part forbids")
    return out


def _merge_keyword(k: str, av: Any, v: Any, path: str) -> Any:
    """Both parts of an allOf have keyword k (with different values): the value both together mean."""
    if k == "type":
        ta = {av} if isinstance(av, str) else set(av)
        tb = {v} if isinstance(v, str) else set(v)
        both = ta & tb
        if ("integer" in ta and "number" in tb) or ("integer" in tb and "number" in ta):
            both.add("integer")
        if not both:
            raise ConstraintError(f"{path}: allOf with incompatible types {av!r} and {v!r}")
        return sorted(both) if len(both) > 1 else both.pop()
    if k == "required":
        return list(av) + [x for x in v if x not in av]
    if k == "enum":
        common = [x for x in av if x in v]
        if not common:
            raise ConstraintError(f"{path}: allOf with enums that share no value")
        return common
    if k in ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"):
        return max(av, v)
    if k in ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"):
        return min(av, v)
    if k in ("items", "additionalItems", "additionalProperties") and not isinstance(av, list):
        if av is False or v is False:
            return False
        return v if av is True else av if v is True else {"allOf": [av, v]}
    if k in ("$defs", "definitions", "properties"):
        return {**av, **v}
    if k == "anyOf":
        return [{"allOf": [x, y]} for x in av for y in v]
    raise ConstraintError(f"{path}: allOf with different values for {k!r} cannot be merged")


def _merge_properties(a: dict, b: dict) -> tuple[dict, set]:
    pa, pb = a.get("properties", {}), b.get("properties", {})
    addl_a, addl_b = a.get("additionalProperties"), b.get("additionalProperties")
    props, excluded = {}, set()
    for name in [*pa, *(n for n in pb if n not in pa)]:
        ca = pa.get(name, addl_a)
        cb = pb.get(name, addl_b)
        if ca is False or cb is False:
            excluded.add(name)
            continue
        parts = [x for x in (ca, cb) if x not in (None, True)]
        props[name] = True if not parts else parts[0] if len(parts) == 1 else {"allOf": parts}
    return props, excluded


def _types(c: SchemaCompiler, schema: Any, path: str, generated: bool, depth: int = 0) -> set[str]:
    """JSON types of the values a schema generates (generated=True) or accepts (False); integer is number."""
    every = {"string", "number", "boolean", "null", "object", "array"}
    schema = c.deref(schema, path)
    if schema is True or depth > 16:
        return every
    if schema is False:
        return set()
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return {"number" if _value_type(v) == "integer" else _value_type(v) for v in values}
    t = schema.get("type")
    out = every if t is None else {"number" if x == "integer" else x for x in ([t] if isinstance(t, str) else t)}
    if t is None and generated:
        inferred = next((ty for ty, keys in _KEYWORD_TYPES if any(k in schema for k in keys)), None)
        if inferred:
            out = {inferred}
    for key in ("anyOf", "oneOf"):
        if key in schema:
            out = out & set().union(*(_types(c, s, path, generated, depth + 1) for s in schema[key]))
    for s in schema.get("allOf", []):
        out = out & _types(c, s, path, generated, depth + 1)
    return out


def _discriminated(c: SchemaCompiler, subs: list, path: str) -> bool:
    """Every branch an object with a required property fixed (const / one-value enum) to a distinct value."""
    fixed_per_branch = []
    for s in subs:
        if not isinstance(s, dict):
            return False
        props, fixed = s.get("properties", {}), {}
        for k in s.get("required", []):
            p = c.deref(props.get(k), path)
            if isinstance(p, dict) and ("const" in p or len(p.get("enum", [])) == 1):
                fixed[k] = json.dumps(p["const"] if "const" in p else p["enum"][0], sort_keys=True)
        fixed_per_branch.append(fixed)
    common = set.intersection(*(set(f) for f in fixed_per_branch))
    return any(len({f[k] for f in fixed_per_branch}) == len(subs) for k in common)


def schema_to_gbnf(schema: Any, strict: bool = True, **caps: int | None) -> str:
    """GBNF text for `schema` (a dict or a JSON string); see the module docstring for what is supported.
    `caps`: max_string_length / max_items (see SchemaCompiler)."""
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise ConstraintError(f"the JSON Schema is not valid JSON: {e}") from None
    return SchemaCompiler(schema, strict, **caps).gbnf()


def schema_to_grammar(schema: Any, strict: bool = True, **caps: int | None) -> Grammar:
    return parse(schema_to_gbnf(schema, strict, **caps))
