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
Compiled constraints are cached (by source text and vocabulary), so a repeated schema costs nothing to rebuild
and keeps its warm mask caches.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Protocol

from .compile import Program, compile_grammar
from .constraint import FINISHED, GrammarConstraint, TokenMask
from .errors import ConstraintError
from .gbnf import parse as parse_gbnf
from .grammar import Grammar
from .json_any import json_gbnf
from .json_schema import schema_to_gbnf, schema_to_grammar
from .lexicon import lexicon_grammar
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


def _cached(key: tuple, vocab: ConstraintVocab, build) -> GrammarConstraint:
    key = (*key, id(vocab))
    c = _CACHE.get(key)
    if c is None or c.vocab is not vocab:
        c = GrammarConstraint(build(), vocab, name=key[0])
        _CACHE[key] = c
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    _CACHE.move_to_end(key)
    return c


def _vocab(tokenizer: Any) -> ConstraintVocab:
    return tokenizer if isinstance(tokenizer, ConstraintVocab) else ConstraintVocab.for_tokenizer(tokenizer)


def grammar_constraint(gbnf: str, tokenizer: Any, root: str = "root") -> GrammarConstraint:
    """A GBNF grammar (llama.cpp's format) over the tokenizer's vocabulary."""
    return _cached(("grammar", gbnf, root), _vocab(tokenizer), lambda: compile_grammar(parse_gbnf(gbnf, root)))


def json_constraint(
    tokenizer: Any, root: str = "object", max_string_length: int | None = None, max_items: int | None = None
) -> GrammarConstraint:
    """Any JSON object (root="value": any JSON value); the caps bound strings and containers."""
    text = json_gbnf(root, max_string_length, max_items)
    return _cached(("json", text), _vocab(tokenizer), lambda: compile_grammar(parse_gbnf(text)))


def json_schema_constraint(
    schema: Any,
    tokenizer: Any,
    strict: bool = True,
    max_string_length: int | None = None,
    max_items: int | None = None,
) -> GrammarConstraint:
    """JSON valid against `schema` (a dict or JSON text); unsupported keywords raise unless strict=False.
    `max_string_length` / `max_items` cap what the schema leaves unbounded (outputs stay valid)."""
    text = schema_to_gbnf(schema, strict, max_string_length=max_string_length, max_items=max_items)
    return _cached(("json-schema", text), _vocab(tokenizer), lambda: compile_grammar(parse_gbnf(text)))


def lexicon_constraint(
    words: list[str], tokenizer: Any, separator: str | None = None, min_count: int = 1, max_count: int | None = 1
) -> GrammarConstraint:
    """One of `words` (or min..max of them joined by `separator`)."""
    key = ("lexicon", tuple(words), separator, min_count, max_count)
    return _cached(
        key, _vocab(tokenizer), lambda: compile_grammar(lexicon_grammar(words, separator, min_count, max_count))
    )


def constraint_from_request(params: dict[str, Any], tokenizer: Any) -> GrammarConstraint | None:
    """The constraint an API request asks for, or None. Understands llama.cpp's `grammar` and `json_schema`
    fields and OpenAI's `response_format` ({"type": "json_object"}, {"type": "json_schema", "json_schema":
    {"schema": ...}}, also llama.cpp's {"type": "json_object", "schema": ...}); the browser engine passes its
    options the same way."""
    fmt = params.get("response_format")
    if fmt:
        kind = fmt.get("type") if isinstance(fmt, dict) else fmt
        if kind == "json_object":
            schema = fmt.get("schema") if isinstance(fmt, dict) else None
            return json_schema_constraint(schema, tokenizer) if schema else json_constraint(tokenizer)
        if kind == "json_schema":
            spec = fmt.get("json_schema") or {}
            schema = spec.get("schema", fmt.get("schema"))
            if schema is None:
                raise ConstraintError("response_format json_schema needs json_schema.schema")
            return json_schema_constraint(schema, tokenizer)
        if kind not in ("text", None):
            raise ConstraintError(f"unknown response_format type {kind!r} (text, json_object, json_schema)")
    if params.get("json_schema") is not None:
        return json_schema_constraint(params["json_schema"], tokenizer)
    if params.get("grammar"):
        return grammar_constraint(params["grammar"], tokenizer)
    if params.get("lexicon"):
        return lexicon_constraint(list(params["lexicon"]), tokenizer)
    return None


__all__ = [
    "FINISHED",
    "Constraint",
    "ConstraintError",
    "ConstraintVocab",
    "Grammar",
    "GrammarConstraint",
    "Program",
    "TokenMask",
    "compile_grammar",
    "constraint_from_request",
    "grammar_constraint",
    "json_constraint",
    "json_gbnf",
    "json_schema_constraint",
    "lexicon_constraint",
    "lexicon_grammar",
    "parse_gbnf",
    "schema_to_gbnf",
    "schema_to_grammar",
]
