"""anyOf / oneOf as alternatives: each branch (merged with the schema's other keywords) a rule; a branch
nothing satisfies is left out. oneOf needs each output to match exactly one branch: branches that may both
match a value (json_combinators.py tells the rest apart) are generated each without the values of the others
(json_negation.py), a subset; with no branch left that way the oneOf is refused (strict=False: as anyOf).
Every function takes the compiler `c` (json_schema.SchemaCompiler).
"""

from __future__ import annotations

from typing import Any

from .errors import ConstraintError
from .grammar import Node, alt
from .json_combinators import discriminated, excludes, fixed_values, types_of
from .json_keywords import VOCABULARY
from .json_negation import negate
from .json_objects import matches_nothing
from .limits import ConstraintLimitError


def alternatives(c: Any, schema: dict, key: str, name: str, path: str) -> Node:
    """The grammar of the schema's `key` (anyOf or oneOf): one alternative per branch kept."""
    options = schema[key]
    if not options:
        raise ConstraintError(f"{path}/{key}: expecting a non-empty list of schemas")
    rest = {k: v for k, v in schema.items() if k != key and k in VOCABULARY}
    overlapping = overlaps(c, options, rest, path) if key == "oneOf" else {}
    if overlapping:  # a property every branch lists with values no other allows: required, it tells them apart
        options = _with_discriminator(c, options, rest, path) or options
        overlapping = overlaps(c, options, rest, path)
    try:
        return _branches(c, options, rest, overlapping, key, name, path)
    except ConstraintLimitError:
        raise
    except ConstraintError as e:
        if not overlapping:
            raise
        c.unsupported(path, "oneOf", f" (no branch is left without the values of the others: {e})")
        return _branches(c, options, rest, {}, key, name, path)  # (strict=False: as anyOf)


def _branches(c: Any, options: list, rest: dict, overlapping: dict, key: str, name: str, path: str) -> Node:
    """The alternatives, branch i without the values of its `overlapping[i]` branches."""
    alts, first_error = [], None
    for i, branch in enumerate(options):
        if matches_nothing(c, branch, path):
            continue  # (in a oneOf too: it can never be the one branch that matches)
        mark = c.checkpoint()
        try:
            others = [negate(c, options[j], f"{path}/{key}/{j}") for j in overlapping.get(i, ())]
            if any(o is False for o in others):  # (no schema for its values outside another branch)
                raise ConstraintError(f"{path}/oneOf: branch {i} may match another branch")
            parts = [rest, branch, *others] if rest else [branch, *others]
            sub = c.merge(parts, f"{path}/{key}/{i}") if len(parts) > 1 else branch
            label = f"{name}-{i}" if name else f"alternative-{i}"
            alts.append(c.named(c.visit(sub, label, f"{path}/{key}/{i}"), label))
        except ConstraintLimitError:
            raise
        except ConstraintError as e:  # a branch no value fits (or not compiled): left out, a subset
            c.rollback(mark)
            c.left_out.append(f"{path}/{key}/{i}: {e}")
            first_error = first_error or e
            continue
    if not alts and first_error is not None:
        raise first_error
    if not alts:
        raise ConstraintError(f"{path}/{key}: no branch allows a value")
    return alt(*alts)


def _with_discriminator(c: Any, options: list, rest: dict, path: str) -> list | None:
    """The branches with the property that tells them apart made required (a subset: each value then matches
    its branch alone), or None when no listed property does."""
    subs = [c.deref(c.merge([rest, b], path) if rest else b, path) for b in options]
    if not all(isinstance(s, dict) and types_of(c, s, path, generated=True) <= {"object"} for s in subs):
        return None
    key = discriminated(c, subs, path, required=False)
    if key is None:
        return None
    return [c.merge([b, {"required": [key]}], path) for b in options]


def overlaps(c: Any, options: list, rest: dict, path: str) -> dict[int, list[int]]:
    """{i: the branches j that a value generated for branch i may match too} (a branch i is then generated
    with each such j negated: json_negation.py)."""
    subs = [c.deref(c.merge([rest, b], path) if rest else b, path) for b in options]
    gen = [types_of(c, s, path, generated=True) for s in subs]
    val = [types_of(c, s, path, generated=False) for s in subs]
    c.budget.charge(len(subs) ** 2, f"{path}/oneOf")
    told_apart = None  # whether a const property tells the branches apart: computed once, when first needed
    fixed = [fixed_values(c, s, path) for s in subs]  # (const / enum branches with no value in common: apart)
    out: dict[int, list[int]] = {}
    for i in range(len(subs)):
        for j in range(len(subs)):
            if i == j or not gen[i] & val[j]:
                continue
            if fixed[i] is not None and fixed[j] is not None and not fixed[i] & fixed[j]:
                continue
            if gen[i] & val[j] <= {"object"}:
                if told_apart is None:
                    told_apart = discriminated(c, subs, path) is not None
                if told_apart or excludes(c, subs[i], subs[j], path) or excludes(c, subs[j], subs[i], path):
                    continue
            out.setdefault(i, []).append(j)
    return out
