"""JSON Schema to a grammar (grammar.py), built as nodes; `schema_to_gbnf` prints it as GBNF.

    schema_to_gbnf({"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}}, "required": ["a"]},
                   **LLAMACPP)
    ->  root   ::= "{" space a-kv "}" space
        a      ::= ([1-9] | [1-9] [0-9]{1,15}) space
        a-kv   ::= "\"a\"" space ":" space a                          (+ the primitives it uses: space, ...)

What is exact, what is approximated (a subset of the valid documents, never an invalid one) and what is
refused by name: docs/constraints.md, "JSON Schema". In short: the validation keywords of drafts 4 to 2020-12
except `propertyNames`, `contains`, `unevaluatedItems`, `$dynamicRef` and `multipleOf` other than an integer
(each refused naming it and its schema path; `strict=False` ignores it and lists it in
`SchemaCompiler.ignored`); `not`, `if` and a `oneOf` whose branches may overlap as a subset
(json_negation.py, json_alternatives.py). Annotations and keywords no draft defines are ignored, as the spec
says (`refuse_unknown=True` refuses the unknown ones). `$ref` resolves by base URI, plain-name fragment and JSON
pointer (json_refs.py). Modules: objects json_objects.py and json_members.py, other values json_values.py,
strings and formats json_strings.py, numbers json_numbers.py, combinators json_combinators.py.

Compile work is what the start needs: every schema the document reaches is visited (so a schema that cannot
be compiled is refused now, by name), but an object's members are lazy rules (json_members.py) and the
program is compiled lazily (compile.py), rule by rule as generation reaches them. The grammar's own checks
(left recursion, a finite derivation: grammar_checks.py) run when the $refs and composites refer to each other
in a cycle, the only way they can fail.

Generation choices (outputs stay valid, they are a subset): members in any order (`listed_order`: in the order
written, other ones after them); an empty schema at the root means an object; whitespace between tokens is
limited (see `json_any.SPACE_RULE`). `LLAMACPP` options: llama.cpp's choices (closed objects, whole-match
patterns, listed order).

Limits (limits.py), each refusal naming the JSON pointer: the document nests at most `max_nesting` deep; a
count that must be reached (minLength, minItems, a pattern's {m}) is at most `max_repeat`, and an upper count
beyond it is lowered to it; a number bound needing more than `max_number_digits` digits is refused, one beyond
them on the outer side is lowered to them (every value generated stays within it). References are compiled
once each, from a worklist (no recursion through them); a `$ref` with sibling keywords becomes a rule of its
own, compiled once per (reference, siblings) content, and an `allOf` once per schema object, so repeated or
recursive uses are references to it; a property's schema once per schema object too (`visit_shared`: every
oneOf branch merged with an object's properties lists them again), and an anyOf / oneOf once per list of
branches; a large document's equal parts are one object (json_shared.py), so its copies are compiled once.
Enums of more than 8 values are a trie of their texts. All the work is charged to the compilation's `Budget`;
a lazy rule's work, done during generation, to its own.
"""

from __future__ import annotations

import json
import re
from functools import partial
from typing import Any

from .errors import ConstraintError
from .grammar import EMPTY, Grammar, LazyRule, Lit, Node, Ref, alt
from .grammar_checks import check_grammar, has_cycle
from .json_alternatives import alternatives
from .json_any import PRIMITIVES, primitive_nodes, with_dependencies
from .json_combinators import canonical, conditional_cases, merge2
from .json_formats import FORMATS, format_nodes
from .json_keywords import (
    ANNOTATIONS,
    DRAFT3_ONLY,
    SUPPORTED,
    TYPES,
    UNSUPPORTED,
    VOCABULARY,
    check_document,
    check_keywords,
    implied_type,
    text_depth,
)
from .json_negation import negate
from .json_objects import object_rule
from .json_refs import DEFAULT_BASE, Resolver
from .json_shared import shared_copy, values_key
from .json_values import array, literals, number, string
from .limits import Budget, ConstraintLimits, budget_of

_RESERVED = frozenset({"root", *PRIMITIVES, *(n for rules in FORMATS.values() for n in rules)})
# llama.cpp's generation choices (a subset)
LLAMACPP = {"closed_objects": True, "anchored_patterns": True, "listed_order": True}
_BASES: dict[str, str] = {}  # name -> its rule base name (names repeat across compilations: a bounded memo)


def _rule_base(name: str) -> str:
    """A rule name after `name`: its last 40 characters (names are repeated in every reference: a Kubernetes
    schema's URI-long names made most of its GBNF text)."""
    base = _BASES.get(name)
    if base is None:
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", name)[-40:].strip("-") or "value"
        if len(_BASES) < 100_000:
            _BASES[name] = base
    return base


def json_literal(value: Any) -> Node:
    """A JSON value as a literal of its compact JSON text."""
    return Lit(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


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
        self.rules: dict[str, Node] = {}
        self.lazy: dict[str, LazyRule] = {}  # rules built on first use (json_members.py)
        self.key_tries: dict[frozenset, object] = {}  # listed names -> the Members whose other-key rules serve
        self.used: set[str] = set()  # primitives and format rules referenced
        self.ignored: list[str] = []  # keywords skipped (strict=False only)
        self.left_out: list[str] = []  # optional properties and anyOf / oneOf branches not generated, and why
        self.refs: dict[str, str] = {}
        self.pending: list[tuple[str, Any, str, str]] = []  # references not compiled yet: (rule, target, ref, base)
        self.resolver: Resolver | None = None  # the document's identifiers (made by grammar())
        self.base = DEFAULT_BASE  # the base URI of the schema being compiled
        self.composites: dict[Any, tuple[str, Any]] = {}  # key (ref_key, id) -> (its rule, the schema)
        self.depth = 0  # visits open (nesting of the schema being compiled)
        self.by_body: dict[tuple[str, Node], str] = {}  # (base name, body) -> its rule
        self.patterns: dict[Any, Any] = {}  # a pattern's nodes (regex.py) and automaton, string products
        self.checked: dict[int, dict] = {}  # schema objects whose keyword values were checked (visits, merge2)
        self.sizes: dict[int, tuple[int, Any]] = {}  # schema objects' sizes (json_combinators._size)
        self.fitted: dict[str, dict] = {}  # (json_values.fitting) keywords' text -> their automaton per type
        self.memo: dict[tuple, Any] = {}  # pure results met again (json_values: enum texts, tries), by content
        self.undo: list[tuple[dict, Any]] = []  # (table, key) added to refs / composites / by_body, for rollback
        self.suffix: dict[str, int] = {}  # base name -> the next number to try after it
        self.taken: set[str] = set()  # names reserved as prefixes of lazy rules' names
        # references between the rules of $refs and composites (`context`: the one being built), so the grammar's
        # checks run only when they can fail: when these rules refer to each other in a cycle (recursion)
        self.context = ["root"]
        self.edges: dict[Any, set[Any]] = {}
        # schema objects visited (by id, and the base URI met at): (the schema, kept alive so the id stays its
        # own; its node; how deep below it the visit went). A schema object met again (the properties of every
        # oneOf branch merged with them) is its node again, not a visit again. Each visit is a node of `edges`
        # (its key), between the rule it is in and the rules it refers to, so a node met again refers to them too.
        self.visited: dict[tuple[int, str], tuple[dict, Node, int]] = {}
        self.deepest = 0  # the deepest visit open since the outermost one began

    # -- output -----------------------------------------------------------------------------------------------

    def schema_grammar(self, defer_checks: bool = False) -> Grammar:
        """The grammar of the schema (its lazy rules unbuilt), checked (grammar_checks.py) when recursive: now,
        or (`defer_checks`, for a caller that compiles it at once) by compile_grammar, which makes them on the
        program when it compiles eagerly (llama.cpp's layout: the grammar walked once, not twice)."""
        values = check_document(self.schema, self.budget)
        schema, flat = shared_copy(self.schema, values)  # (its copies one object: json_shared.py)
        self.schema = schema
        self.resolver = Resolver(schema, self.budget, flat)
        self.base = self.resolver.root_base
        if schema is True or (isinstance(schema, dict) and not (set(schema) & VOCABULARY)):
            root = self.use("object")  # llama.cpp's convention: an empty schema asks for an object
        else:
            root = self.visit(schema, "", "#")
        grammar = self.grammar(root)
        if has_cycle(self.edges):
            grammar.owed = partial(check_grammar, grammar, self.budget)
            if not defer_checks:
                grammar.check()
        self.budget = Budget(self.budget.limits)  # lazy rules' own (build_lazy)
        return grammar

    def build_lazy(self, build) -> Node:
        """A lazy rule's body: its work bounded on its own (it is built during generation)."""
        self.budget.work = 0  # (self.budget is the lazy rules' own since schema_grammar)
        return build()

    def gbnf(self) -> str:
        """GBNF text of the schema's grammar (every lazy rule built: see Grammar.to_gbnf)."""
        budget = self.budget
        return self.schema_grammar().to_gbnf(lambda n: budget.charge(n, "the GBNF text"))

    def grammar(self, root: Node) -> Grammar:
        """The grammar: `root`, the references still to compile, every rule and the primitives used."""
        while self.pending:  # references, each compiled once, from here: no recursion through them
            name, target, ref, self.base = self.pending.pop()
            self.context = [name]
            self.rules[name] = self.visit(target, name, ref)
        self.context = ["root"]
        rules = {"root": root, **self.rules}
        # (llama.cpp's layout writes llama.cpp's numbers too: no leading zero in an exponent)
        primitives = primitive_nodes(self.max_string_length, self.max_items, json_exponent=not self.listed_order)
        for name in sorted(with_dependencies(n for n in self.used if n in PRIMITIVES)):
            rules[name] = primitives[name]
        for fmt in sorted(n for n in self.used if n in FORMATS):
            rules.update(format_nodes(fmt))
        self.rules = rules  # (lazy rules add to it as they are built)
        return Grammar(rules, "root", self.lazy)

    def sub_compiler(self) -> SchemaCompiler:
        """A compiler of other schemas of this document, with the same options, budget and identifiers."""
        options = {"closed_objects": self.closed_objects, "anchored_patterns": self.anchored_patterns,
                   "listed_order": self.listed_order}  # fmt: skip
        sub = SchemaCompiler(self.schema, self.strict, limits=self.budget, **options)
        sub.resolver, sub.base, sub.fitted, sub.memo = self.resolver, self.base, self.fitted, self.memo
        return sub

    # -- rules and names --------------------------------------------------------------------------------------

    def use(self, name: str) -> Ref:
        self.used.add(name)
        return Ref(name)

    def add_rule(self, name: str, body: Node) -> str:
        """A rule named after `name` for `body` (the same rule again when `body` was already added so named)."""
        self.budget.charge(1, "#")
        base = _rule_base(name)
        key = self.by_body.get((base, body))
        if key is not None and self.rules.get(key) == body:
            return key
        key = self.fresh(base)
        self.by_body[base, body] = key
        self.undo.append((self.by_body, (base, body)))
        self.rules[key] = body
        return key

    def fresh(self, name: str) -> str:
        """A rule name after `name` that no rule has yet (reserved now: its body is the caller's to set)."""
        base = _rule_base(name)
        n = self.suffix.get(base, 0)
        key = base if n == 0 else f"{base}-{n}"
        while key in _RESERVED or key in self.rules or key in self.lazy or key in self.taken:
            n += 1
            key = f"{base}-{n}"
        self.suffix[base] = n + 1
        self.rules[key] = _RESERVED_BODY
        return key

    def prefix(self, name: str) -> str:
        """A name after `name` that no rule has, reserved as the prefix of lazy rules' names (json_members.py)."""
        key = self.fresh(name)
        del self.rules[key]
        self.taken.add(key)
        return key

    def fresh_lazy(self, name: str) -> str:
        """A name for a lazy rule (json_members.py): `name` itself unless a rule has it."""
        key, n = name, 0
        while key in self.rules or key in self.lazy or key in _RESERVED:
            n += 1
            key = f"{name}-{n}"
        return key

    def add_lazy(self, name: str, build, witness: Node = EMPTY) -> str:
        """A lazy rule named after `name` (fresh_lazy), its body `build()`'s on first use, with its own budget
        (build_lazy); `witness` derives a finite string when the body does (grammar.py). Its name."""
        key = self.fresh_lazy(name)
        self.lazy[key] = LazyRule(lambda: self.build_lazy(build), witness)
        return key

    def has_rule(self, name: str) -> bool:
        """Whether a rule (built or lazy) has `name`: one made earlier may have been rolled back since."""
        return name in self.rules or name in self.lazy

    def checkpoint(self) -> tuple[int, int, int, int]:
        return len(self.rules), len(self.pending), len(self.lazy), len(self.undo)

    def rollback(self, mark: tuple[int, int, int, int]) -> None:
        """Forget the rules (references, composites) added since `mark`: a part left out leaves nothing behind
        (no rule reserved for a body never written). In time proportional to what is forgotten (the newest
        rules are last in their dicts; the other additions are in the undo log)."""
        n_rules, n_pending, n_lazy, n_undo = mark
        self.budget.charge(1 + len(self.rules) - n_rules + len(self.undo) - n_undo, "#")
        while len(self.rules) > n_rules:
            self.rules.popitem()
        while len(self.lazy) > n_lazy:
            self.lazy.popitem()
        del self.pending[n_pending:]
        while len(self.undo) > n_undo:
            table, key = self.undo.pop()
            table.pop(key, None)

    def named(self, node: Node, name: str) -> Ref:
        """`node` as something that can stand in a sequence: itself when a reference, else a new rule's."""
        return node if isinstance(node, Ref) else Ref(self.add_rule(name, node))

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

    def ref_rule(self, ref: str, path: str) -> Ref:
        target, base, key = self.resolve(ref, path)
        name = self.refs.get(key)
        if name is None:
            tail = key.rsplit("#", 1)[-1]
            base_name = tail.rsplit("/", 1)[-1] if tail else "root-ref"
            name = self.fresh(base_name or "root-ref")  # reserved until compiled
            self.refs[key] = name
            self.undo.append((self.refs, key))
            where = key[len(DEFAULT_BASE) :] if key.startswith(DEFAULT_BASE + "#") else key  # the ref, for errors
            self.pending.append((name, target, where, base))
        self.edge(name)
        return Ref(name)

    def composite(self, key: Any, schema: dict, name: str, build) -> Ref:
        """A rule for `schema` (a $ref with siblings, an allOf), whose body `build` makes by merging: once per
        `key`, so the same composite met again (recursively too) is a reference to that rule."""
        known = self.composites.get(key)
        if known is None:
            rule = self.fresh(name or "value")  # reserved while its body is built
            self.composites[key] = (rule, schema)  # the schema kept alive: an id in a key stays its own
            self.undo.append((self.composites, key))
            self.edge(rule)
            self.context.append(rule)
            try:
                self.rules[rule] = build()
            finally:
                self.context.pop()
            return Ref(rule)
        self.edge(known[0])
        return Ref(known[0])

    def edge(self, rule: Any) -> None:
        """The rule (or visit: `visited`) being built refers to `rule`."""
        self.edges.setdefault(self.context[-1], set()).add(rule)

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
        if not isinstance(schema, dict) or "$ref" not in schema:  # (most schemas: nothing to follow, no base to find)
            return schema
        rests, seen = [], set()
        base = self.resolver.base_of(schema, self.base)
        while isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            if not self.resolver.ref_siblings_ignored:
                rests.append({k: v for k, v in schema.items() if k != "$ref" and k in VOCABULARY})
            schema, base, key = self.resolve(ref, path, base)
            if key in seen:
                raise ConstraintError(f"{path}: $ref {ref!r} refers to itself through a chain of references")
            seen.add(key)
            self.budget.check("max_nesting", len(seen), path, "$ref chain length")
        parts = [r for r in reversed(rests) if r]
        return self.merge([schema, *parts], path) if parts else schema

    # -- the visitor ------------------------------------------------------------------------------------------

    def visit(self, schema: Any, name: str, path: str) -> Node:
        """The grammar of values valid against `schema` (ending with optional space)."""
        self.depth += 1
        deepest, self.deepest = self.deepest, self.depth
        outer = self.base
        self.base = self.resolver.base_of(schema, outer)
        try:
            self.budget.check("max_nesting", self.depth, path, "schema nesting depth")
            return self.visit_schema(schema, name, path)
        finally:
            self.depth -= 1
            self.deepest = max(deepest, self.deepest)
            self.base = outer

    def visit_shared(self, schema: Any, name: str, path: str) -> Node:
        """`visit`, once per schema object (and base URI): a property's schema, met again in every oneOf branch
        merged with the object's properties (or a copy of it: json_shared.py), is its node again."""
        if type(schema) is not dict:
            return self.visit(schema, name, path)
        key = (id(schema), self.base)
        seen = self.visited.get(key)  # (met again: its node, without a closure made for the visit)
        if seen is not None:
            return self.again(key, seen, path)
        return self.shared(key, schema, lambda: self.visit(schema, name, path), path)

    def shared(self, key: Any, keep: Any, build, path: str) -> Node:
        """`build()`, once per `key` (ids of objects `keep` holds, so each stays its own). The visit is a node
        of `edges` (its key) between the rule it is in and the rules it refers to, so a node met again refers
        to them too; its depth below is checked again from where it is met (the same refusals)."""
        seen = self.visited.get(key)
        if seen is None:
            self.edge(key)
            self.context.append(key)
            deepest, self.deepest = self.deepest, self.depth  # (how deep this visit goes, not its siblings)
            try:
                node = build()
            finally:
                self.context.pop()
                below, self.deepest = self.deepest - self.depth, max(deepest, self.deepest)
            self.visited[key] = (keep, node, below)
            self.undo.append((self.visited, key))  # (rolled back with the rules it refers to)
            return node
        return self.again(key, seen, path)

    def again(self, key: Any, seen: tuple, path: str) -> Node:
        """A shared visit met again: its node, its depth below checked from here, its edge."""
        _, node, below = seen
        self.budget.check("max_nesting", self.depth + below, path, "schema nesting depth")
        self.deepest = max(self.deepest, self.depth + below)
        self.edge(key)
        return node

    def visit_schema(self, schema: Any, name: str, path: str) -> Node:
        if schema is True:
            return self.use("value")
        if schema is False:
            raise ConstraintError(f"{path}: the schema `false` (or `not` of what every value matches) allows no value")
        if not isinstance(schema, dict):
            raise ConstraintError(f"{path}: a schema is an object or a boolean, not {type(schema).__name__}")
        self.budget.charge(1 + len(schema), path)
        self.check_vocabulary(schema, path)
        if "$ref" in schema and self.resolver.ref_siblings_ignored and len(set(schema) & VOCABULARY) > 1:
            # (drafts 4 to 7 ignore a $ref's siblings: its target, compiled here as a $ref with siblings always
            # was, so a oneOf branch it fails in is left out, not the whole schema)
            key = (self.resolve(schema["$ref"], path)[2], "siblings ignored")
            return self.composite(key, schema, name, lambda: self.visit(self.deref(schema, path), name, path))
        again = self.rewritten(schema, path)
        if again is not None:
            return self.visit_schema(again, name, path)
        if "$ref" in schema:
            rest = {k: v for k, v in schema.items() if k != "$ref" and k in VOCABULARY}
            if not rest:
                return self.ref_rule(schema["$ref"], path)
            key = self.ref_key(schema["$ref"], rest, schema, path)
            return self.composite(key, schema, name, lambda: self.visit(self.deref(schema, path), name, path))
        if "allOf" in schema:
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            parts = schema["allOf"]
            merged = lambda: self.visit(self.merge(conditional_cases(self, [rest, *parts], path), path), name, path)  # noqa: E731
            return self.composite(id(schema), schema, name, merged)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                # (once per list of branches and the other keywords' values: a copy of the same anyOf met
                # again, its annotations aside, is the same alternatives)
                known = (key, values_key(schema, VOCABULARY), self.base)
                return self.shared(known, schema, partial(alternatives, self, schema, key, name, path), path)
        if "const" in schema:
            return literals(self, [schema["const"]], schema, name, path)
        if "enum" in schema:
            if not schema["enum"]:
                raise ConstraintError(f"{path}/enum: expecting a non-empty list")
            return literals(self, schema["enum"], schema, name, path)
        return self.typed(schema, name, path)

    def rewritten(self, schema: dict, path: str) -> Any:
        """The schema written with other keywords (if / then / else, not, dependent schemas), or None."""
        if "if" in schema or "then" in schema or "else" in schema:
            return self.without_if(schema, path)
        if "not" in schema:
            return self.without_not(schema, path)
        if "dependencies" in schema or "dependentSchemas" in schema:
            return without_dependent_schemas(self, schema, path)
        return None

    def check_vocabulary(self, schema: dict, path: str) -> None:
        for key in schema if not schema.keys() <= _PLAIN else ():  # (most schemas: nothing to say of their keys)
            if (key in DRAFT3_ONLY and not self.resolver.draft3) or (key in _CONDITIONAL and self.resolver.draft == 4):
                self.unknown(path, key)
            elif key in UNSUPPORTED:
                self.unsupported(path, key)
            elif key not in SUPPORTED and key not in ANNOTATIONS:
                self.unknown(path, key)
        if id(schema) not in self.checked:  # (each schema object checked once: visits meet the same ones again)
            check_keywords(schema, path)
            self.checked[id(schema)] = schema  # (kept alive: the id stays its own)

    def without_if(self, schema: dict, path: str) -> Any:
        """if / then / else as an anyOf: (if and then) or (what `if` rejects, a subset: json_negation.py, and
        else); then / else without if constrain nothing, nor do all three in drafts 3 and 4 (draft 7 made them)."""
        rest = {k: v for k, v in schema.items() if k not in _CONDITIONAL}
        if "if" not in schema or self.resolver.draft == 4:
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
        kept = _enum_without(self, rest, negated, path)
        if kept is not None:
            return kept
        failing = negate(self, negated, f"{path}/not")
        if failing is False:
            self.unsupported(path, "not", " (no schema found for the values it rejects)")
            return rest
        return merge2(self, rest, failing, path)

    def typed(self, schema: dict, name: str, path: str) -> Node:
        t = schema.get("type")
        if isinstance(t, list):
            if not t or any(x not in TYPES for x in t):
                raise ConstraintError(f"{path}/type: unknown type in {t!r}")
            if len(t) > 1:
                alts = [self.named(self.typed({**schema, "type": x}, f"{name}-{x}", path), f"{name}-{x}") for x in t]
                return alt(*alts)
            t = t[0]
        if t is None:  # (a format this compiler does not know constrains nothing: it implies no type either)
            t = implied_type(schema, FORMATS)
            if t is None:
                if schema.get("format") is not None and schema["format"] not in FORMATS:
                    self.unknown(path, f"format {schema['format']!r}", f" (formats known: {', '.join(FORMATS)})")
                return self.use("value")
        if t not in TYPES:
            raise ConstraintError(f"{path}/type: unknown type {t!r}")
        if t == "string":
            return string(self, schema, path)
        if t in ("number", "integer"):
            return number(self, schema, t, path)
        if t in ("boolean", "null"):
            return self.use(t)
        if t == "object":
            return object_rule(self, schema, name, path)
        return array(self, schema, name, path)

    # -- combinators ------------------------------------------------------------------------------------------

    def merge(self, schemas: list, path: str) -> Any:
        out: Any = True
        for s in schemas:
            out = merge2(self, out, self.deref(s, path), path)
        return out


def without_dependent_schemas(c: SchemaCompiler, schema: dict, path: str) -> dict | None:
    """A schema with at most _SPLIT dependent schemas (`dependentSchemas`, or a schema in draft 4-7's
    `dependencies`) as the anyOf of the ways each property is there or not: {P: D} is "no P" or "P, and D"
    (exact); None with more (json_objects.py then never writes those properties: a subset). {P: {not: {required:
    [X]}}} is "no P" or "no X", counted once with {X: {not: {required: [P]}}} (two properties that exclude each
    other)."""
    c.budget.charge(1 + len(schema.get("dependencies", ())) + len(schema.get("dependentSchemas", ())), path)
    deps = {k: v for k, v in schema.get("dependencies", {}).items() if not isinstance(v, list)}
    deps.update(schema.get("dependentSchemas", {}))
    deps = {k: v for k, v in deps.items() if v is not True and not (isinstance(v, dict) and not set(v) & VOCABULARY)}
    pairs = {frozenset((k, x)): None for k, x in ((k, _excluded(c, d, path)) for k, d in deps.items()) if x}
    deps = {k: d for k, d in deps.items() if not _excluded(c, d, path)}
    if not (deps or pairs) or len(deps) + len(pairs) > _SPLIT:
        return None
    rest = {k: v for k, v in schema.items() if k not in ("dependencies", "dependentSchemas")}
    lists = {k: v for k, v in schema.get("dependencies", {}).items() if isinstance(v, list)}
    if lists:
        rest["dependencies"] = lists
    branches: list[Any] = [rest]
    for k, d in deps.items():
        branches = [x for b in branches for x in ({"allOf": [b, {"properties": {k: False}}]},
                                                  {"allOf": [b, d, {"required": [k]}]})]  # fmt: skip
    for pair in pairs:
        branches = [{"allOf": [b, {"properties": {n: False}}]} for b in branches for n in sorted(pair)]
    return {"anyOf": branches}


def _excluded(c: SchemaCompiler, dependent: Any, path: str) -> str | None:
    """X of a dependent schema `{not: {required: [X]}}` (nothing else), else None."""
    dependent = c.deref(dependent, path)
    if not isinstance(dependent, dict) or set(dependent) & VOCABULARY != {"not"}:
        return None
    negated = c.deref(dependent["not"], path)
    if not isinstance(negated, dict) or set(negated) & VOCABULARY != {"required"}:
        return None
    names = negated["required"]
    return names[0] if isinstance(names, list) and len(names) == 1 and isinstance(names[0], str) else None


def _enum_without(c: SchemaCompiler, rest: dict, negated: dict, path: str) -> Any:
    """An enum / const without the values of a `not` that is an enum / const too (exact), None otherwise."""
    values = [rest["const"]] if "const" in rest else rest.get("enum")
    out = [negated["const"]] if "const" in negated else negated.get("enum")
    if not isinstance(values, list) or not isinstance(out, list) or set(negated) & VOCABULARY - {"enum", "const"}:
        return None
    c.budget.charge(len(values) + len(out), path)
    gone = {canonical(v) for v in out}
    left = [v for v in values if canonical(v) not in gone]
    return {**{k: v for k, v in rest.items() if k not in ("enum", "const")}, "enum": left} if left else False


_CONDITIONAL = ("if", "then", "else")
_PLAIN = (SUPPORTED | ANNOTATIONS) - UNSUPPORTED - DRAFT3_ONLY - set(_CONDITIONAL)  # keywords no draft tells apart
_SPLIT = 2  # dependent schemas written as an anyOf at most (2 ** _SPLIT branches)
_RESERVED_BODY = Lit("\0reserved")  # the body of a rule name reserved until its body is set


def _loaded(schema: Any, budget: Budget) -> Any:
    if isinstance(schema, (str, bytes)):
        budget.charge(len(schema), "the JSON Schema text")
        try:
            text = schema.decode() if isinstance(schema, bytes) else schema
            budget.check("max_nesting", text_depth(text), "#", "JSON nesting depth")
            return json.loads(text)
        except ValueError as e:  # UnicodeDecodeError too
            raise ConstraintError(f"the JSON Schema is not valid JSON: {e}") from None
    return schema


def schema_to_grammar(
    schema: Any,
    strict: bool = True,
    limits: ConstraintLimits | Budget | None = None,
    defer_checks: bool = False,
    **options: Any,
) -> Grammar:
    """The grammar of `schema` (a dict or a JSON string), its lazy rules built when first needed (compile it
    with `compile_grammar`: lazily); see the module docstring for what is supported. `limits` (or a
    compilation's Budget) bounds the work; `options`: SchemaCompiler's (max_string_length, max_items,
    closed_objects, anchored_patterns, listed_order, refuse_unknown). `defer_checks`: a recursive schema's
    grammar checks are left to compile_grammar (`Grammar.owed`), for a caller that compiles it at once."""
    budget = budget_of(limits)
    return SchemaCompiler(_loaded(schema, budget), strict, limits=budget, **options).schema_grammar(defer_checks)


def schema_to_gbnf(
    schema: Any, strict: bool = True, limits: ConstraintLimits | Budget | None = None, **options: Any
) -> str:
    """GBNF text for `schema`, every lazy rule built (an object of n properties in any order has a rule per set
    of them written: a large one passes `max_work`; `listed_order=True` has none)."""
    budget = budget_of(limits)
    return SchemaCompiler(_loaded(schema, budget), strict, limits=budget, **options).gbnf()
