"""JSON Schema to GBNF (then to a grammar, like any GBNF).

    schema_to_gbnf({"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}}, "required": ["a"]})
    ->  a-kv ::= "\\"a\\"" space ":" space a
        a    ::= ([1-9] | [1-9] [0-9]{1,15}) space
        root ::= "{" space a-kv "}" space                      (+ the primitives it uses: space, ...)

What is exact, what is approximated (a subset of the valid documents, never an invalid one) and what is
refused by name: docs/constraints.md, "JSON Schema". In short: the validation keywords of drafts 4 to 2020-12
except `if`/`then`/`else`, `propertyNames`, `contains`, `unevaluatedItems`, `$dynamicRef` and `multipleOf`
other than 1 (each refused naming it and its schema path; `strict=False` ignores it and lists it in
`SchemaCompiler.ignored`); `not` and a `oneOf` whose branches may overlap as a subset (json_negation.py,
json_alternatives.py). Annotations and
keywords no draft defines are ignored, as the spec says (`refuse_unknown=True` refuses the unknown ones).
`$ref` resolves by base URI, plain-name fragment and JSON pointer (json_refs.py).

Generation choices (outputs stay valid, they are a subset): properties come in the order written, other ones
after them; an empty schema at the root means an object; whitespace between tokens is limited (see
`json_any.SPACE_RULE`). `LLAMACPP` options: llama.cpp's choices (closed objects, whole-match patterns).

Limits (limits.py), each refusal naming the JSON pointer: the document nests at most `max_nesting` deep; a
count that must be reached (minLength, minItems, a pattern's {m}) is at most `max_repeat`, and an upper count
beyond it is lowered to it; a number bound needing more than `max_number_digits` digits is refused, one beyond
them on the outer side is lowered to them (every value generated stays within it). References are compiled
once each, from a worklist (no recursion through them); a `$ref` with sibling keywords becomes a rule of its
own, compiled once per (reference, siblings) content, and an `allOf` once per schema object, so repeated or
recursive uses are references to it. Enums of more than 8 values are a trie of their texts. All the work is
charged to the compilation's `Budget`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import ConstraintError
from .gbnf import parse
from .grammar import Alt, Grammar, Lit, Node, Repeat, Seq, node_to_gbnf
from .json_alternatives import alternatives
from .json_any import PRIMITIVES, primitive_rules, with_dependencies
from .json_combinators import merge2
from .json_keywords import (
    ANNOTATIONS,
    KEYWORD_TYPES,
    SUPPORTED,
    TYPES,
    UNSUPPORTED,
    VOCABULARY,
    check_document,
    check_keywords,
    text_depth,
    type_matches,
    value_type,
)
from .json_negation import negate
from .json_numbers import divisible_by, integer_bounds, integer_range, number_range
from .json_objects import object_rule
from .json_refs import DEFAULT_BASE, Resolver
from .json_strings import FORMATS, format_lengths, pattern_gbnf, within_lengths
from .lexicon import word_trie
from .limits import Budget, ConstraintLimits, budget_of
from .regex import parse_pattern

_RESERVED = frozenset({"root", *PRIMITIVES, *(n for rules in FORMATS.values() for n in rules)})
_NAME = re.compile(r"^[a-zA-Z0-9-]+$")
# llama.cpp's generation choices (a subset)
LLAMACPP = {"closed_objects": True, "anchored_patterns": True, "listed_order": True}
_DIVISIBILITY = 1000  # multipleOf up to this many is a divisibility automaton of its remainders (a rule each)
_WINDOW = 256  # else this many multiples nearest a bound (a subset)
_FACTORED = 8  # enums above this many values are written as a trie of their texts (a stack per branch, not value)


def _rule_base(name: str) -> str:
    """A rule name after `name`: its last 40 characters (names are repeated in every reference: a Kubernetes
    schema's URI-long names made most of its GBNF text)."""
    return re.sub(r"[^a-zA-Z0-9-]+", "-", name)[-40:].strip("-") or "value"


def json_literal(value: Any) -> str:
    """A JSON value as a GBNF literal of its compact JSON text."""
    return node_to_gbnf(Lit(json.dumps(value, ensure_ascii=False, separators=(",", ":"))))


class SchemaCompiler:
    """`max_string_length` / `max_items`: optional generation caps for strings, arrays and additional
    properties the schema leaves unbounded (outputs stay valid; a small model cannot ramble forever).
    `limits`: the ConstraintLimits (or a compilation's Budget) bounding the work. `refuse_unknown`: refuse
    keywords no draft defines (by default ignored, as the spec says). `closed_objects`: an object without
    `additionalProperties` gets only its listed properties (by default others may follow them, as the spec
    allows). `anchored_patterns`: a `pattern` is a whole-string match (by default, as the spec says, the string
    contains a match: an unanchored side allows any text there). `LLAMACPP` holds both: llama.cpp's choices."""

    def __init__(
        self,
        schema: Any,
        strict: bool = True,
        max_string_length: int | None = None,
        max_items: int | None = None,
        limits: ConstraintLimits | Budget | None = None,
        refuse_unknown: bool = False,
        closed_objects: bool = False,
        anchored_patterns: bool = False,
        listed_order: bool = False,
    ) -> None:
        self.schema = schema
        self.strict = strict
        self.refuse_unknown = refuse_unknown
        self.closed_objects = closed_objects
        self.anchored_patterns = anchored_patterns
        self.listed_order = listed_order
        self.unknown_keywords: list[str] = []  # JSON pointers of the unknown keywords ignored
        self.max_string_length = max_string_length
        self.max_items = max_items
        self.budget = budget_of(limits)
        self.rules: dict[str, str] = {}
        self.used: set[str] = set()  # primitives and format rules referenced
        self.ignored: list[str] = []  # keywords skipped (strict=False only)
        self.refs: dict[str, str] = {}
        self.pending: list[tuple[str, Any, str, str]] = []  # references not compiled yet: (rule, target, ref, base)
        self.resolver: Resolver | None = None  # the document's identifiers (made by gbnf())
        self.base = DEFAULT_BASE  # the base URI of the schema being compiled
        self.composites: dict[Any, tuple[str, Any]] = {}  # key (ref_key, id) -> (its rule, the schema)
        self.depth = 0  # visits open (nesting of the schema being compiled)
        self.by_body: dict[tuple[str, str], str] = {}  # (base name, body) -> its rule
        self.suffix: dict[str, int] = {}  # base name -> the next number to try after it
        self.any_order_rules = 0  # rules written for objects whose members come in any order (json_objects.py)
        self.key_rules: dict[tuple[str, ...], str] = {}  # listed names -> the rule of a key that is none of them

    # -- output -----------------------------------------------------------------------------------------------

    def gbnf(self) -> str:
        schema = self.schema
        check_document(schema, self.budget)
        self.resolver = Resolver(schema, self.budget)
        self.base = self.resolver.root_base
        if schema is True or (isinstance(schema, dict) and not (set(schema) & VOCABULARY)):
            root = self.use("object")  # llama.cpp's convention: an empty schema asks for an object
        else:
            root = self.visit(schema, "", "#")
        return self.text(root)

    def text(self, root: str) -> str:
        """The GBNF text: `root`, the references still to compile, every rule and the primitives used."""
        while self.pending:  # references, each compiled once, from here: no recursion through them
            name, target, ref, self.base = self.pending.pop()
            self.rules[name] = self.visit(target, name, ref)
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
        """A rule named after `name` for `rhs` (the same rule again when `rhs` was already added so named)."""
        self.budget.charge(1 + len(rhs), "#")
        base = _rule_base(name)
        key = self.by_body.get((base, rhs))
        if key is not None and self.rules.get(key) == rhs:
            return key
        key = self.fresh(base)
        self.by_body[base, rhs] = key
        self.rules[key] = rhs
        return key

    def fresh(self, name: str) -> str:
        """A rule name after `name` that no rule has yet (reserved now: its body is the caller's to set)."""
        base = _rule_base(name)
        n = self.suffix.get(base, 0)
        key = base if n == 0 else f"{base}-{n}"
        while key in _RESERVED or key in self.rules:
            n += 1
            key = f"{base}-{n}"
        self.suffix[base] = n + 1
        self.rules[key] = "\0"
        return key

    def checkpoint(self) -> tuple[int, int]:
        return len(self.rules), len(self.pending)

    def rollback(self, mark: tuple[int, int]) -> None:
        """Forget the rules (references, composites) added since `mark`: a part left out leaves nothing behind
        (no rule reserved for a body never written)."""
        n_rules, n_pending = mark
        self.budget.charge(len(self.rules) + len(self.by_body), "#")
        gone = set(list(self.rules)[n_rules:])
        for k in gone:
            del self.rules[k]
        del self.pending[n_pending:]
        self.refs = {k: v for k, v in self.refs.items() if v not in gone}
        self.composites = {k: v for k, v in self.composites.items() if v[0] not in gone}
        self.by_body = {k: v for k, v in self.by_body.items() if v not in gone}
        self.key_rules = {k: v for k, v in self.key_rules.items() if v not in gone}

    def named(self, rhs: str, name: str) -> str:
        """`rhs` as something that can stand in a sequence: itself when a rule name, else a new rule."""
        return rhs if _NAME.match(rhs) else self.add_rule(name, rhs)

    def unknown(self, path: str, keyword: str, detail: str = "") -> None:
        """A keyword no draft defines (`x-*`, `example`, `links`, ...) or a format this compiler does not know:
        ignored, as the spec says, and listed in `self.unknown_keywords`; `refuse_unknown=True` refuses it."""
        if self.refuse_unknown:
            what = keyword if keyword.startswith("format ") else f"keyword {keyword!r}"
            raise ConstraintError(
                f"JSON Schema {what} at {path} is not a keyword or format of the JSON Schema drafts{detail} (refused"
                " by refuse_unknown=True)"
            )
        self.unknown_keywords.append(f"{path}/{keyword}")

    def unsupported(self, path: str, keyword: str, detail: str = "") -> None:
        msg = f"JSON Schema keyword {keyword!r} at {path} is not supported{detail}"
        if self.strict:
            raise ConstraintError(msg + " (strict=False ignores it)")
        self.ignored.append(msg)

    # -- references -------------------------------------------------------------------------------------------

    def resolve(self, ref: Any, path: str, base: str | None = None) -> tuple[Any, str, str]:
        """(target, its base URI, its absolute name) of a `$ref` met where the base URI is `base` (the current
        one by default): fragment names and relative references resolve as the spec says (json_refs.py)."""
        return self.resolver.resolve(ref, self.base if base is None else base, path)

    def ref_rule(self, ref: str, path: str) -> str:
        target, base, key = self.resolve(ref, path)
        name = self.refs.get(key)
        if name is None:
            tail = key.rsplit("#", 1)[-1]
            base_name = tail.rsplit("/", 1)[-1] if tail else "root-ref"
            name = self.add_rule(base_name or "root-ref", f"\0{key}")  # reserved until compiled
            self.refs[key] = name
            where = key[len(DEFAULT_BASE) :] if key.startswith(DEFAULT_BASE + "#") else key  # the ref, for errors
            self.pending.append((name, target, where, base))
        return name

    def composite(self, key: Any, schema: dict, name: str, build) -> str:
        """A rule for `schema` (a $ref with siblings, an allOf), whose body `build` makes by merging: once per
        `key`, so the same composite met again (recursively too) is a reference to that rule."""
        known = self.composites.get(key)
        if known is not None:
            return known[0]
        rule = self.add_rule(name or "value", f"\0{len(self.composites)}")  # reserved while its body is built
        self.composites[key] = (rule, schema)  # the schema kept alive: an id in a key stays its own
        self.rules[rule] = build()
        return rule

    def ref_key(self, ref: str, rest: dict, schema: dict, path: str) -> Any:
        """What a $ref with siblings means: the reference and the siblings' content (so every {$ref: "#", type:
        object} is one rule), or the schema object when its siblings are not plain JSON."""
        try:
            text = json.dumps(rest, sort_keys=True)
        except (TypeError, ValueError):
            return id(schema)
        self.budget.charge(len(text), path)
        return self.resolve(ref, path)[2], text

    def deref(self, schema: Any, path: str) -> Any:
        """The schema with a top-level $ref replaced by its target (merged with any sibling keywords), following
        a chain of them iteratively: {$ref: A, x} with A = {$ref: B, y} is allOf(B, y, x)."""
        rests, seen = [], set()
        base = self.resolver.base_of(schema, self.base)
        while isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            rests.append({k: v for k, v in schema.items() if k != "$ref" and k in VOCABULARY})
            schema, base, key = self.resolve(ref, path, base)
            if key in seen:
                raise ConstraintError(f"{path}: $ref {ref!r} refers to itself through a chain of references")
            seen.add(key)
            self.budget.check("max_nesting", len(seen), path, "$ref chain length")
        parts = [r for r in reversed(rests) if r]
        return self.merge([schema, *parts], path) if parts else schema

    # -- the visitor ------------------------------------------------------------------------------------------

    def visit(self, schema: Any, name: str, path: str) -> str:
        """GBNF right-hand side for values valid against `schema` (ending with optional space)."""
        self.depth += 1
        outer = self.base
        self.base = self.resolver.base_of(schema, outer)
        try:
            self.budget.check("max_nesting", self.depth, path, "schema nesting depth")
            return self.visit_schema(schema, name, path)
        finally:
            self.depth -= 1
            self.base = outer

    def visit_schema(self, schema: Any, name: str, path: str) -> str:
        if schema is True:
            return self.use("value")
        if schema is False:
            raise ConstraintError(f"{path}: the schema `false` (or `not` of what every value matches) allows no value")
        if not isinstance(schema, dict):
            raise ConstraintError(f"{path}: a schema is an object or a boolean, not {type(schema).__name__}")
        self.budget.charge(1 + len(schema), path)
        self.check_vocabulary(schema, path)
        if "if" in schema or "then" in schema or "else" in schema:
            return self.visit_schema(self.without_if(schema, path), name, path)
        if "not" in schema:
            return self.visit_schema(self.without_not(schema, path), name, path)
        if "$ref" in schema:
            rest = {k: v for k, v in schema.items() if k != "$ref" and k in VOCABULARY}
            if not rest:
                return self.ref_rule(schema["$ref"], path)
            key = self.ref_key(schema["$ref"], rest, schema, path)
            return self.composite(key, schema, name, lambda: self.visit(self.deref(schema, path), name, path))
        if "allOf" in schema:
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            parts = schema["allOf"]
            merged = lambda: self.visit(self.merge([rest, *parts], path), name, path)  # noqa: E731
            return self.composite(id(schema), schema, name, merged)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return alternatives(self, schema, key, name, path)
        if "const" in schema:
            return self.literals([schema["const"]], schema, name, path)
        if "enum" in schema:
            if not schema["enum"]:
                raise ConstraintError(f"{path}/enum: expecting a non-empty list")
            return self.literals(schema["enum"], schema, name, path)
        return self.typed(schema, name, path)

    def check_vocabulary(self, schema: dict, path: str) -> None:
        for key in schema:
            if key in UNSUPPORTED:
                self.unsupported(path, key)
            elif key not in SUPPORTED and key not in ANNOTATIONS:
                self.unknown(path, key)
        check_keywords(schema, path)

    def without_if(self, schema: dict, path: str) -> Any:
        """if / then / else as an anyOf: (if and then) or (what `if` rejects, a subset: json_negation.py, and
        else); then / else without if constrain nothing."""
        rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
        if "if" not in schema:
            return rest
        cond = schema["if"]
        branches = [{"allOf": [cond, schema.get("then", True)]}]
        failing = negate(self, cond, f"{path}/if")
        if failing is not False:
            branches.append({"allOf": [failing, schema.get("else", True)]})
        return {**rest, "anyOf": branches} if "anyOf" not in rest else {"allOf": [rest, {"anyOf": branches}]}

    def without_not(self, schema: dict, path: str) -> Any:
        """The schema with its `not` written as what it leaves (False: nothing): decidable for a `not` of
        false, of true / {} (nothing is left), and of types (the other types)."""
        negated = self.deref(schema["not"], path)
        rest = {k: v for k, v in schema.items() if k != "not"}
        if negated is False:
            return rest
        if negated is True or not (set(negated) & VOCABULARY):
            return False
        failing = negate(self, negated, f"{path}/not")
        if failing is False:
            self.unsupported(path, "not", " (no schema found for the values it rejects)")
            return rest
        return merge2(self, rest, failing, path)

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
            t = next((ty for ty, keys in KEYWORD_TYPES if any(k in schema for k in keys)), None)
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

    def literals(self, values: list, schema: dict, name: str, path: str) -> str:
        t = schema.get("type")
        types = t if isinstance(t, list) else [t] if t else None
        others = {k: v for k, v in schema.items() if k in VOCABULARY - {"type", "enum", "const"}}
        keep = [v for v in values if types is None or any(type_matches(v, x) for x in types)]
        if others:  # the values the other keywords' grammar accepts (valid against them: it is sound)
            keep = self.fitting(others, keep, path)
        if "const" in schema and "enum" in schema:
            keep = [v for v in keep if v == schema["const"]]
        if not keep:
            also = " and keywords" if others else ""
            raise ConstraintError(f"{path}: no value of enum/const fits the schema's type{also}")
        self.use("space")
        decimal = not (self.resolver.draft == 4 and types is not None and "number" not in types)
        texts = list(dict.fromkeys(t for v in keep for t in _spellings(v, decimal)))
        self.budget.charge(sum(map(len, texts)), path)
        if len(texts) > _FACTORED:
            rules = word_trie(texts, lambda: self.fresh(f"{name}-enum" if name else "enum"))
            for rule, node in rules.items():
                self.rules[rule] = node_to_gbnf(node)
            return f"{next(iter(rules))} space"
        lits = [node_to_gbnf(Lit(t)) for t in texts]
        return (lits[0] if len(lits) == 1 else "(" + " | ".join(lits) + ")") + " space"

    def fitting(self, schema: dict, values: list, path: str) -> list:
        """The `values` whose compact JSON text the grammar of `schema` accepts, so each is valid against it
        (a value valid but outside a generation choice of that grammar is left out: a subset)."""
        from .automaton import Automaton
        from .compile import compile_grammar

        automata: dict[str, Automaton] = {}  # per type: the keywords of other types constrain nothing there
        out = []
        for v in values:
            t = "number" if isinstance(v, float) else value_type(v)
            if t not in automata:
                options = {"closed_objects": self.closed_objects, "anchored_patterns": self.anchored_patterns}
                options["listed_order"] = self.listed_order
                sub = SchemaCompiler(self.schema, self.strict, limits=self.budget, **options)
                sub.resolver, sub.base = self.resolver, self.base
                text = sub.text(sub.visit({**schema, "type": t}, "", path))
                automata[t] = Automaton(compile_grammar(parse(text, limits=self.budget)))
                self.ignored += sub.ignored
                self.unknown_keywords += sub.unknown_keywords
            text = json.dumps(v, ensure_ascii=False, separators=(",", ":"))
            self.budget.charge(len(text), path)
            if automata[t].accepts_bytes(text.encode()):
                out.append(v)
        return out

    # -- strings and numbers ----------------------------------------------------------------------------------

    def counts(self, schema: dict, lo_key: str, hi_key: str, path: str, cap: int | None) -> tuple[int, int | None]:
        """(lower, upper) of a count pair like minLength / maxLength: the lower one must be reachable
        (max_repeat); the upper one is lowered to the limit, or to the generation cap (never below the lower)."""
        lo, hi = int(schema.get(lo_key, 0)), schema.get(hi_key)
        hi = None if hi is None else int(hi)
        if hi is not None and hi < lo:
            raise ConstraintError(f"{path}: {hi_key} {hi} is below {lo_key} {lo}")
        self.budget.check("max_repeat", lo, f"{path}/{lo_key}", lo_key)
        limit = self.budget.limits.max_repeat
        if hi is not None and hi > limit:
            hi = limit  # >= lo, checked above
        return lo, _capped(hi, cap, lo)

    def string(self, schema: dict, path: str) -> str:
        fmt, pattern = schema.get("format"), schema.get("pattern")
        lo, hi = self.counts(schema, "minLength", "maxLength", path, self.max_string_length)
        lengths = lo > 0 or schema.get("maxLength") is not None
        self.use("space")
        if fmt is not None and fmt not in FORMATS:  # an annotation only, as the spec says of unknown formats
            self.unknown(path, f"format {fmt!r}", f" (formats known: {', '.join(FORMATS)})")
            fmt = None
        if pattern is not None:
            if fmt is not None:
                self.unsupported(path, "format", " together with pattern")
            node = parse_pattern(pattern, f"{path}/pattern", self.budget, search=not self.anchored_patterns)
            if lengths:
                node = within_lengths(node, lo, hi) or self.no_lengths(node, path, "pattern")
            if self.max_string_length is not None:
                node = _cap_repeats(node, self.max_string_length)
            return f'"\\"" ({pattern_gbnf(node)}) "\\"" space'
        if fmt is not None:
            short, long = format_lengths(fmt)
            if short < lo or (schema.get("maxLength") is not None and (long is None or long > schema["maxLength"])):
                self.unsupported(path, "minLength/maxLength", f" together with format {fmt!r}")
            self.use(fmt)
            return f'"\\"" {fmt} "\\"" space'
        if lo == 0 and hi is None:
            return self.use("string")
        unit = self.use("length-char" if lo > 0 else "char")
        rep = f"{{{lo},}}" if hi is None else f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"
        return f'"\\"" {unit}{rep} "\\"" space'

    def no_lengths(self, node: Node, path: str, what: str) -> Node:
        self.unsupported(path, "minLength/maxLength", f" together with this {what} (its matches cannot all fit)")
        return node

    def number(self, schema: dict, t: str, path: str) -> str:
        step = schema.get("multipleOf")
        if step is not None:
            if float(step).is_integer() and step > 0:
                t = "integer"
            else:
                self.unsupported(path, "multipleOf", f" (only integers are: got {step})")
                step = None
        lo, hi = schema.get("minimum"), schema.get("maximum")
        lo_x, hi_x = schema.get("exclusiveMinimum", False), schema.get("exclusiveMaximum", False)
        if not isinstance(lo_x, bool):  # draft 6+: a number
            lo, lo_x = (lo_x, True) if lo is None or lo_x >= lo else (lo, False)
        if not isinstance(hi_x, bool):
            hi, hi_x = (hi_x, True) if hi is None or hi_x <= hi else (hi, False)
        self.use("space")
        if step is not None and step != 1:
            if lo is not None or hi is not None:
                lo, lo_x, hi, hi_x = self.digits_within_limit(lo, lo_x, hi, hi_x, path)
            return self.multiples(int(step), *integer_bounds(lo, lo_x, hi, hi_x), t, path)
        if lo is None and hi is None:
            return self.use(t)
        lo, lo_x, hi, hi_x = self.digits_within_limit(lo, lo_x, hi, hi_x, path)
        if t == "integer":
            return integer_range(*integer_bounds(lo, lo_x, hi, hi_x)) + " space"
        self.use("decimal-part")
        return number_range(lo, lo_x, hi, hi_x) + " space"

    def multiples(self, k: int, lo: int | None, hi: int | None, t: str, path: str) -> str:
        """The integer multiples of k within lo..hi (integers: a number multiple of k that is one, too): every
        one when there are few or no bound limits them to one sign (digits read by a k-state divisibility
        automaton), else the _WINDOW nearest the lower bound (or the upper one): a subset."""
        first = None if lo is None else -(-lo // k) * k
        last = None if hi is None else hi // k * k
        if first is not None and last is not None and first > last:
            raise ConstraintError(f"{path}: no multiple of {k} within the bounds")
        unsigned = (lo is None or lo <= 0) and (hi is None or hi >= 0) and (lo is None or hi is None)
        if k <= _DIVISIBILITY and unsigned and (first is None or last is None):
            rules, nonzero = divisible_by(k, lambda: self.fresh(f"multiple-of-{k}"))
            self.rules.update(rules)
            sign = "" if lo is not None else '"-" ' if hi is not None else '"-"? '  # (lo <= 0: the positive ones)
            return f'("0" | {sign}{nonzero}) space'
        if first is not None and (last is None or (last - first) // k >= _WINDOW):
            last = first + (_WINDOW - 1) * k
        elif first is None or (last - first) // k >= _WINDOW:
            first = last - (_WINDOW - 1) * k
        self.budget.charge((last - first) // k + 1, f"{path}/multipleOf")
        return self.literals(list(range(first, last + 1, k)), {"type": t}, f"multiple-of-{k}", path)

    def digits_within_limit(self, lo, lo_x: bool, hi, hi_x: bool, path: str) -> tuple:
        """Bounds written with at most max_number_digits integral digits: a bound beyond them on the outer side
        is lowered to the largest such number (every value generated stays within it); one that would force a
        longer number is refused."""
        digits = self.budget.limits.max_number_digits
        top = 10**digits - 1
        if hi is not None and hi > top:
            hi, hi_x = top, False
        if lo is not None and lo < -top:
            lo, lo_x = -top, False
        for bound, key in ((lo, "minimum"), (-hi if hi is not None else None, "maximum")):
            if bound is not None and bound > top:
                self.budget.check("max_number_digits", len(str(int(bound))), f"{path}/{key}", "digits of a bound")
        return lo, lo_x, hi, hi_x

    # -- objects and arrays -----------------------------------------------------------------------------------

    def object(self, schema: dict, name: str, path: str) -> str:
        return object_rule(self, schema, name, path)

    def array(self, schema: dict, name: str, path: str) -> str:
        items, prefix = schema.get("items"), schema.get("prefixItems")
        rest = items
        if isinstance(prefix, dict):  # llama.cpp accepts a single schema there, as `items`
            prefix, rest = None, prefix
        if isinstance(items, list):  # draft 7 tuples
            prefix, rest = items, schema.get("additionalItems")
        lo, hi = self.counts(schema, "minItems", "maxItems", path, self.max_items)
        if schema.get("uniqueItems") is True and (hi is None or hi > 1):
            if lo > 1:  # (two items may be equal: no grammar tells them apart)
                self.unsupported(path, "uniqueItems", f" with minItems {lo} (arrays of one item at most are)")
            hi = 1  # an approximation that is always unique: at most one item
        self.use("space")
        child = f"{name}-item" if name else "item"
        if prefix is not None:
            count = min(len(prefix), hi) if hi is not None else len(prefix)
            refs = []
            for i in range(count):
                label = f"{name}-tuple-{i}" if name else f"tuple-{i}"
                refs.append(self.named(self.visit(prefix[i], label, f"{path}/prefixItems/{i}"), label))
            body = ' "," space '.join(refs)
            extra = lo - count  # minItems beyond the tuple: that many more items of the rest's schema
            if extra > 0:
                sub = rest if rest is not None else True
                more = self.named(self.visit(sub, child, f"{path}/items"), child)
                tail = f'("," space {more}){{{extra - (0 if refs else 1)}}}'
                body = f"{body} {tail}" if refs else f"{more} {tail}"
            return f'"[" space {body} "]" space' if body else '"[" space "]" space'
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
            out = merge2(self, out, self.deref(s, path), path)
        return out


def _spellings(value: Any, decimal: bool = True) -> list[str]:
    """The compact JSON texts written for an enum / const value: a number equal to an integer as that integer
    and, when `decimal`, with ".0" (values compare by value: 2 and 2.0 are the same value; not where a draft-4
    "integer" type is asked for, which 2.0 is not; not beyond 2**53), else its one text."""
    exact = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= 2**53
    if exact and float(value).is_integer():  # (beyond 2**53 a float reads back as another number)
        n = int(value)
        return [str(n), f"{n}.0"] if decimal else [str(n)]
    return [json.dumps(value, ensure_ascii=False, separators=(",", ":"))]


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


def schema_to_gbnf(
    schema: Any, strict: bool = True, limits: ConstraintLimits | Budget | None = None, **options: Any
) -> str:
    """GBNF text for `schema` (a dict or a JSON string); see the module docstring for what is supported.
    `limits` (or a compilation's Budget) bounds the work; `options`: SchemaCompiler's (max_string_length,
    max_items, closed_objects, refuse_unknown)."""
    budget = budget_of(limits)
    if isinstance(schema, (str, bytes)):
        budget.charge(len(schema), "the JSON Schema text")
        try:
            text = schema.decode() if isinstance(schema, bytes) else schema
            budget.check("max_nesting", text_depth(text), "#", "JSON nesting depth")
            schema = json.loads(text)
        except ValueError as e:  # UnicodeDecodeError too
            raise ConstraintError(f"the JSON Schema is not valid JSON: {e}") from None
    return SchemaCompiler(schema, strict, limits=budget, **options).gbnf()


def schema_to_grammar(
    schema: Any, strict: bool = True, limits: ConstraintLimits | Budget | None = None, **options: Any
) -> Grammar:
    budget = budget_of(limits)
    return parse(schema_to_gbnf(schema, strict, budget, **options), limits=budget)
