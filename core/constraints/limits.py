"""Limits on the work a constraint may cost, so that no grammar, schema, pattern or lexicon a client sends can
exhaust time or memory: at compile time (what the source asks for) and per token (what generation builds).

    limits = ConstraintLimits(max_repeat=10_000)           # the defaults, one overridden
    json_schema_constraint(schema, tokenizer, limits=limits)

Every refusal is a `ConstraintLimitError` naming the limit, its value, the amount asked for and where (a JSON
pointer into the schema, a GBNF rule or line, a pattern position). A compilation carries one `Budget`: the
limits and the work done so far, which every stage (schema, GBNF text, grammar, program) charges as it goes,
so a refusal comes before the work it refuses. The defaults compile every real-world schema of the
JSONSchemaBench sample that compiled before the limits existed (see docs/constraints.md for the table).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from .errors import ConstraintError


@dataclass(frozen=True)
class ConstraintLimits:
    # -- compile time -------------------------------------------------------------------------------------------
    max_work: int = 2_000_000  # steps of one compilation, all stages (schema values, GBNF characters, elements)
    max_nesting: int = 64  # depth of a schema document, of groups in a grammar or pattern, of a grammar tree
    max_repeat: int = 1_000_000  # a repetition count that must be reached (minLength, minItems, x{m}, ...)
    max_number_digits: int = 40  # digits of a number bound that must be honoured exactly
    max_rules: int = 100_000  # rules of the compiled program
    max_positions: int = 500_000  # elements of the compiled program (its size in ints)
    # -- per token ----------------------------------------------------------------------------------------------
    max_stacks: int = 4096  # stacks one automaton state may hold, or one step may explore (live parses)
    max_stack_depth: int = 1024  # frames of one stack (nesting of the output)
    max_states: int = 10_000  # automaton states (and cached masks) kept; beyond it the caches start afresh

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConstraintError(f"constraint limit {f.name} must be a positive integer, not {v!r}")


DEFAULT_LIMITS = ConstraintLimits()


class ConstraintLimitError(ConstraintError):
    """A constraint asked for more than a limit allows. `limit` names the ConstraintLimits field, `value` is
    its setting, `amount` what was asked (or reached), `where` the place in the source."""

    def __init__(self, limit: str, value: int, amount: int | str, where: str, what: str = "") -> None:
        self.limit = limit
        self.value = value
        self.amount = amount
        self.where = where
        what = what or limit
        place = where if len(where) <= _PLACE_SHOWN else f"{where[: _PLACE_SHOWN // 2]}...{where[-_PLACE_SHOWN // 2 :]}"
        super().__init__(f"{place}: {what} {amount} is beyond the constraint limit {limit}={value}")


_PLACE_SHOWN = 160  # characters of a place shown in a message (a deep JSON pointer is cut in the middle)


def count_of(digits: str) -> int | str:
    """A count written in decimal, as an int; a number with more digits than any limit could allow is
    described instead of converted (a count may be written with any number of digits)."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= _COUNT_DIGITS else f"{digits[:6]}... ({len(digits)} digits)"


_COUNT_DIGITS = 30


Where = str | Callable[[], str]  # a place, or a function that names it (only called to report a refusal)


def _place(where: Where) -> str:
    return where() if callable(where) else where


class Budget:
    """The limits of one compilation and the work it has done (`work`, in steps). `peak` records the largest
    amount each limit was checked against (to measure how close real inputs come to the defaults)."""

    __slots__ = ("limits", "peak", "work")

    def __init__(self, limits: ConstraintLimits | None = None) -> None:
        self.limits = limits or DEFAULT_LIMITS
        self.work = 0
        self.peak: dict[str, int] = {}

    def charge(self, steps: int, where: Where) -> None:
        """Count `steps` of work; refuse once the compilation's total passes max_work."""
        self.work += steps
        if self.work > self.limits.max_work:
            raise ConstraintLimitError(
                "max_work", self.limits.max_work, self.work, _place(where), "compile work (steps)"
            )

    def check(self, limit: str, amount: int | str, where: Where, what: str = "") -> None:
        """Refuse `amount` (a described number, from count_of, is beyond every limit) when it is beyond the
        limit named `limit`."""
        value = getattr(self.limits, limit)
        if isinstance(amount, str):
            raise ConstraintLimitError(limit, value, amount, _place(where), what)
        if amount > self.peak.get(limit, -1):
            self.peak[limit] = amount
        if amount > value:
            raise ConstraintLimitError(limit, value, amount, _place(where), what)

    def usage(self) -> dict[str, int]:
        return {"max_work": self.work, **self.peak}


def budget_of(limits: ConstraintLimits | Budget | None) -> Budget:
    """A Budget for a compilation: a new one for limits (or the defaults), or the one given (stages share it)."""
    return limits if isinstance(limits, Budget) else Budget(limits)
