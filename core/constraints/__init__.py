"""Constrained decoding: GBNF grammars, JSON, JSON Schema and lexicons, compiled to byte-level pushdown
automata and walked over a token trie of the vocabulary (see docs/constraints.md).

    from llamay.constraints import json_schema_constraint
    c = json_schema_constraint({"type": "object", ...}, tokenizer)
    st = c.start()
    c.accepts(st, tok)      # fast: one token's bytes through the automaton
    c.allowed(st)           # TokenMask of every allowed token (EOS only when the grammar is complete)
    st = c.advance(st, tok)

The sampler (`llamay.sampling.Sampler(cfg, constraint=c)`) samples first and checks the token with
`accepts`; only when it is rejected does it compute the mask and sample again among the allowed tokens.
Compiled constraints are cached (by source text, vocabulary and limits), so a repeated schema costs nothing to
rebuild and keeps its warm mask caches.

Every builder takes `limits` (a `ConstraintLimits`; the defaults otherwise): the work a source may cost is
bounded, at compile time and per token, and a refusal is a `ConstraintLimitError` naming the limit and where
(docs/constraints.md has the table). Building is safe in a worker thread while another thread samples with
other constraints: it shares nothing mutable but the cache, which is locked, and caches nothing half-built.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from .compile import Program, compile_grammar
from .constraint import FINISHED, GrammarConstraint, TokenMask
from .errors import ConstraintError
from .gbnf import parse as parse_gbnf
from .grammar import Grammar
from .json_any import json_gbnf
from .json_keywords import check_document
from .json_schema import LLAMACPP, schema_to_gbnf, schema_to_grammar
from .lexicon import lexicon_grammar
from .limits import DEFAULT_LIMITS, Budget, ConstraintLimitError, ConstraintLimits
from .spec import ConstraintSpec, gbnf_grammar, json_object, json_schema, word_list
from .trailing_space import without_trailing_space
from .vocab import ConstraintVocab


class Constraint(Protocol):
    """What the sampler calls. States are opaque, immutable values (keep one to roll back)."""

    def start(self) -> Any: ...
    def allowed(self, state: Any) -> TokenMask: ...
    def accepts(self, state: Any, token: int) -> bool: ...
    def advance(self, state: Any, token: int) -> Any: ...
    def is_complete(self, state: Any) -> bool: ...


_CACHE: OrderedDict[tuple, GrammarConstraint] = OrderedDict()
_CACHE_SIZE = 16
_CACHE_LOCK = threading.Lock()  # builders may run in worker threads; the compile itself runs outside the lock


def _cached(key: tuple, vocab: ConstraintVocab, build: Callable[[], Program], limits: ConstraintLimits | None):
    limits = limits or DEFAULT_LIMITS
    key = (*key, id(vocab), limits)
    with _CACHE_LOCK:
        c = _CACHE.get(key)
        if c is not None and c.vocab is vocab and not _worn(c):
            _CACHE.move_to_end(key)
            return c
    c = GrammarConstraint(build(), vocab, name=key[0], limits=limits)  # when this raises, nothing is kept
    with _CACHE_LOCK:
        other = _CACHE.get(key)
        # built meanwhile by another thread: share its caches
        if other is not None and other.vocab is vocab and not _worn(other):
            c = other
        else:
            _CACHE[key] = c
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return c


def _worn(c: GrammarConstraint) -> bool:
    """A cached lazy program past half its rule or size limit is built anew for the next request: its rules
    grow with every walk that reaches new ones (unique items: a few hundred an item; an object's members in
    any order: a rule per set of them written, its names' trie in it, so the size grows faster than the rule
    count), and a schema served long enough would otherwise reach max_rules or max_positions and refuse every
    request then on. Generations holding it keep it."""
    prog, limits = c.program, c.limits
    return len(prog.rule_names) > limits.max_rules // 2 or len(prog.kind) > limits.max_positions // 2


def _vocab(tokenizer: Any) -> ConstraintVocab:
    return tokenizer if isinstance(tokenizer, ConstraintVocab) else ConstraintVocab.for_tokenizer(tokenizer)


def _from_gbnf(
    text: str, limits: ConstraintLimits | Budget | None, root: str = "root", ending: bool = False
) -> Callable[[], Program]:
    """The builder of `text`'s program; `ending`: the output ends with its root value (trailing_space.py)."""

    def build() -> Program:
        budget = limits if isinstance(limits, Budget) else Budget(limits)
        grammar = parse_gbnf(text, root, budget)
        return compile_grammar(without_trailing_space(grammar) if ending else grammar, budget)

    return build


def grammar_constraint(
    gbnf: str, tokenizer: Any, root: str = "root", limits: ConstraintLimits | None = None
) -> GrammarConstraint:
    """A GBNF grammar (llama.cpp's format) over the tokenizer's vocabulary."""
    if not isinstance(gbnf, str):
        raise ConstraintError(f"a GBNF grammar is text, not {type(gbnf).__name__}")
    return _cached(("grammar", gbnf, root), _vocab(tokenizer), _from_gbnf(gbnf, limits, root), limits)


def json_constraint(
    tokenizer: Any,
    root: str = "object",
    max_string_length: int | None = None,
    max_items: int | None = None,
    limits: ConstraintLimits | None = None,
) -> GrammarConstraint:
    """Any JSON object (root="value": any JSON value); the caps bound strings and containers."""
    text = json_gbnf(root, max_string_length, max_items)
    return _cached(("json", text), _vocab(tokenizer), _from_gbnf(text, limits, ending=True), limits)


def json_schema_constraint(
    schema: Any,
    tokenizer: Any,
    strict: bool = True,
    max_string_length: int | None = None,
    max_items: int | None = None,
    limits: ConstraintLimits | None = None,
    refuse_unknown: bool = False,
    closed_objects: bool = False,
    anchored_patterns: bool = False,
    listed_order: bool = False,
) -> GrammarConstraint:
    """JSON valid against `schema` (a dict or JSON text); unsupported keywords raise unless strict=False;
    keywords no draft defines are ignored unless refuse_unknown=True; closed_objects=True generates no property
    beyond the listed ones where `additionalProperties` is absent (the spec allows them); anchored_patterns=True
    generates a `pattern` as a whole-string match (the spec: the string contains a match); listed_order=True
    writes properties in the order listed (by default small objects take them in any order).
    `max_string_length` / `max_items` cap what the schema leaves unbounded (outputs stay valid)."""
    options = {"max_string_length": max_string_length, "max_items": max_items, "refuse_unknown": refuse_unknown,
               "closed_objects": closed_objects, "anchored_patterns": anchored_patterns,
               "listed_order": listed_order}  # fmt: skip
    key, build = json_schema_build(schema, strict, limits, options)
    return _cached(key, _vocab(tokenizer), build, limits)


def json_schema_build(
    schema: Any, strict: bool, limits: ConstraintLimits | None, options: dict[str, Any]
) -> tuple[tuple, Callable[[], Program]]:
    """json_schema_constraint's cache key and program builder (a `json_schema` spec compiles with them when it
    is made, and hands that program to its first build)."""
    if not isinstance(schema, (str, bytes)):
        check_document(schema, Budget(limits))  # (its depth first: json.dumps recurses per level)
    try:
        text = schema if isinstance(schema, (str, bytes)) else json.dumps(schema, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise ConstraintError(f"the JSON Schema is not JSON: {e}") from None
    key = ("json-schema", text, strict, *sorted(options.items()))

    def build() -> Program:
        budget = Budget(limits)  # one budget for the schema and its grammar; rules built later have their own
        grammar = schema_to_grammar(schema, strict, budget, defer_checks=True, **options)
        return compile_grammar(without_trailing_space(grammar), budget)  # (no whitespace after the value)

    return key, build


def cached_constraint(
    key: tuple, tokenizer: Any, build: Callable[[], Program], limits: ConstraintLimits | None
) -> GrammarConstraint:
    """The cached constraint of `key` for the tokenizer's vocabulary, else one of `build()`'s program (kept)."""
    return _cached(key, _vocab(tokenizer), build, limits)


def lexicon_constraint(
    words: list[str],
    tokenizer: Any,
    separator: str | None = None,
    min_count: int = 1,
    max_count: int | None = 1,
    limits: ConstraintLimits | None = None,
) -> GrammarConstraint:
    """One of `words` (or min..max of them joined by `separator`)."""
    if not isinstance(words, (list, tuple)) or not all(isinstance(w, str) for w in words):
        raise ConstraintError("a lexicon is a list of words (strings)")
    key = ("lexicon", tuple(words), separator, min_count, max_count)

    def build() -> Program:
        budget = Budget(limits)
        return compile_grammar(lexicon_grammar(words, separator, min_count, max_count, budget), budget)

    return _cached(key, _vocab(tokenizer), build, limits)


def warm_up(tokenizer: Any) -> None:
    """Make constraints ready for `tokenizer` before a first request: its vocabulary's tables built and the
    backend's `pda` kernel compiled or loaded (numba compiles it on first use: about a minute on a cold cache,
    which the first request with a grammar or a schema would otherwise wait for). Nothing is cached but those."""
    c = GrammarConstraint(compile_grammar(parse_gbnf('root ::= "a"')), _vocab(tokenizer), name="warm-up")
    c.allowed(c.start())


def constraint_from_request(
    params: dict[str, Any], tokenizer: Any, limits: ConstraintLimits | None = None
) -> GrammarConstraint | None:
    """The constraint an API request asks for, or None. Understands llama.cpp's `grammar` and `json_schema`
    fields and OpenAI's `response_format` ({"type": "json_object"}, {"type": "json_schema", "json_schema":
    {"schema": ...}}, also llama.cpp's {"type": "json_object", "schema": ...}); the browser engine passes its
    options the same way. `limits` bound the work (ConstraintLimitError past one). Schemas are generated with
    llama.cpp's choices (`LLAMACPP`: objects without `additionalProperties` closed, patterns whole matches), a
    subset of the valid documents: a model that may add properties or text rambles on to its token limit."""
    fmt = params.get("response_format")
    if fmt:
        kind = fmt.get("type") if isinstance(fmt, dict) else fmt
        if kind == "json_object":
            schema = fmt.get("schema") if isinstance(fmt, dict) else None
            if schema:
                return json_schema_constraint(schema, tokenizer, limits=limits, **LLAMACPP)
            return json_constraint(tokenizer, limits=limits)
        if kind == "json_schema":
            spec = (fmt.get("json_schema") if isinstance(fmt, dict) else None) or {}
            if not isinstance(spec, dict):
                raise ConstraintError("response_format json_schema must be an object with a `schema`")
            schema = spec.get("schema", fmt.get("schema"))
            if schema is None:
                raise ConstraintError("response_format json_schema needs json_schema.schema")
            return json_schema_constraint(schema, tokenizer, limits=limits, **LLAMACPP)
        if kind not in ("text", None):
            raise ConstraintError(f"unknown response_format type {kind!r} (text, json_object, json_schema)")
    if params.get("json_schema") is not None:
        return json_schema_constraint(params["json_schema"], tokenizer, limits=limits, **LLAMACPP)
    if params.get("grammar"):
        return grammar_constraint(params["grammar"], tokenizer, limits=limits)
    if params.get("lexicon"):
        words = params["lexicon"]
        if not isinstance(words, list):
            raise ConstraintError("lexicon must be a list of words")
        return lexicon_constraint(words, tokenizer, limits=limits)
    return None


__all__ = [
    "DEFAULT_LIMITS",
    "FINISHED",
    "LLAMACPP",
    "Budget",
    "Constraint",
    "ConstraintError",
    "ConstraintLimitError",
    "ConstraintLimits",
    "ConstraintSpec",
    "ConstraintVocab",
    "Grammar",
    "GrammarConstraint",
    "Program",
    "TokenMask",
    "compile_grammar",
    "constraint_from_request",
    "gbnf_grammar",
    "grammar_constraint",
    "json_constraint",
    "json_gbnf",
    "json_object",
    "json_schema",
    "json_schema_constraint",
    "lexicon_constraint",
    "lexicon_grammar",
    "parse_gbnf",
    "schema_to_gbnf",
    "schema_to_grammar",
    "warm_up",
    "word_list",
]
