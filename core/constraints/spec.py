"""Constraints named before a model is at hand (the library's `llamay.constraints.json_schema(schema)`): a spec
holds the source and options, and is compiled against a model's vocabulary when generation starts, through
the cached builders of this package (a spec used twice with one model compiles once).

`json_schema` takes the name of this package's submodule: the package imports the submodule first, then binds
the name to this function (`llamay.constraints.json_schema(schema)`, as the library spells it); the submodule's
code is still reached by `from llamay.constraints.json_schema import ...`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .compile import Program
from .constraint import GrammarConstraint
from .errors import ConstraintError
from .limits import ConstraintLimits


@dataclass(frozen=True, eq=False)
class ConstraintSpec:
    """A constraint not yet compiled: `build(tokenizer)` compiles it for that vocabulary."""

    kind: str  # what the builder makes, for messages: "json_schema", "json_object", "gbnf_grammar", "word_list"
    builder: Callable[..., GrammarConstraint]
    args: tuple[Any, ...]
    options: dict[str, Any]

    def build(self, tokenizer: Any) -> GrammarConstraint:
        return self.builder(*self.args, tokenizer, **self.options)

    def __repr__(self) -> str:
        return f"llamay.constraints.{self.kind}(...)"


def json_schema(
    schema: Any,
    *,
    strict: bool = True,
    max_string_length: int | None = None,
    max_items: int | None = None,
    limits: ConstraintLimits | None = None,
    refuse_unknown: bool = False,
    closed_objects: bool = False,
    anchored_patterns: bool = False,
    listed_order: bool = False,
) -> ConstraintSpec:
    """JSON valid against `schema` (a dict or JSON text); the schema is compiled now, so a schema this package
    cannot compile is an error here, not at the first token. Its first build takes that program (the schema is
    compiled once, not again for the model); a build that finds the constraint cached, or a later one, does not
    need it (json_schema_constraint's cache, as a direct call would)."""
    from . import cached_constraint, json_schema_build

    options = {"max_string_length": max_string_length, "max_items": max_items, "refuse_unknown": refuse_unknown,
               "closed_objects": closed_objects, "anchored_patterns": anchored_patterns,
               "listed_order": listed_order}  # fmt: skip
    key, build = json_schema_build(schema, strict, limits, options)
    first = [build()]

    def program() -> Program:
        try:
            return first.pop()  # (atomic: two threads building at once take it once)
        except IndexError:
            return build()

    return ConstraintSpec("json_schema", cached_constraint, (key,), {"build": program, "limits": limits})


def json_object(
    *,
    root: str = "object",
    max_string_length: int | None = None,
    max_items: int | None = None,
    limits: ConstraintLimits | None = None,
) -> ConstraintSpec:
    """Any JSON object (root="value": any JSON value)."""
    from . import json_constraint

    if root not in ("object", "value"):
        raise ConstraintError(f"json_object: root must be 'object' or 'value', not {root!r}")
    opts = {"root": root, "max_string_length": max_string_length, "max_items": max_items, "limits": limits}
    return ConstraintSpec("json_object", json_constraint, (), opts)


def gbnf_grammar(text: str, *, root: str = "root", limits: ConstraintLimits | None = None) -> ConstraintSpec:
    """A GBNF grammar (llama.cpp's format); parsed now, so a syntax error is raised here."""
    from . import grammar_constraint, parse_gbnf

    if not isinstance(text, str):
        raise ConstraintError(f"a GBNF grammar is text, not {type(text).__name__}")
    parse_gbnf(text, root, limits)
    return ConstraintSpec("gbnf_grammar", grammar_constraint, (text,), {"root": root, "limits": limits})


def word_list(
    words: Sequence[str],
    *,
    separator: str | None = None,
    min_count: int = 1,
    max_count: int | None = 1,
    limits: ConstraintLimits | None = None,
) -> ConstraintSpec:
    """One of `words` (or min_count..max_count of them joined by `separator`)."""
    from . import lexicon_constraint

    if isinstance(words, str) or not all(isinstance(w, str) for w in words):
        raise ConstraintError("word_list takes a list of words (strings)")
    opts = {"separator": separator, "min_count": min_count, "max_count": max_count, "limits": limits}
    return ConstraintSpec("word_list", lexicon_constraint, (list(words),), opts)


def compiled(constraint: Any, tokenizer: Any) -> Any:
    """What the sampler takes: a spec compiled for `tokenizer`, a compiled constraint as it is, or None."""
    if constraint is None or not isinstance(constraint, ConstraintSpec):
        if constraint is not None and not all(hasattr(constraint, m) for m in ("start", "accepts", "advance")):
            raise ConstraintError(
                f"a constraint is made by llamay.constraints (json_schema, json_object, gbnf_grammar, word_list), "
                f"not {type(constraint).__name__}"
            )
        return constraint
    return constraint.build(tokenizer)
