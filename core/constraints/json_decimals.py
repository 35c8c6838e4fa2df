"""`multipleOf` a decimal (0.01, 2.5): the numbers whose division by the step is an integer, as `jsonschema`
computes it (in floating point: 0.07 / 0.01 is 7.000000000000001, so 0.07 is not one, 1230.55 is), within the
bounds. That set follows no digit pattern, so it is a lazy trie over the number's text: one rule per prefix the
automaton reaches, whose alternatives are the next characters some completion of which passes, and the end
where the text itself passes (each value checked as jsonschema checks it). A prefix is offered only when a
completion passes within the next three integral digits or the step's fraction digits (a search of at most a
few thousand values): a subset of the valid numbers, never one jsonschema refuses, never a dead end.

Integers are written without leading zeros, fractions with at most as many digits as the step has (1.50 is
written for 1.5 too), no exponents, at most MAX_DIGITS integral digits.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .errors import ConstraintError
from .grammar import EMPTY, Lit, Node, Ref, alt, seq

MAX_DIGITS = 15  # integral digits of a generated number
_LOOKAHEAD = 3  # integral digits a prefix's search for a passing completion may add
MAX_FRACTION = 4  # steps with more fraction digits are refused (the search is 10^digits a prefix)


def fraction_digits(step: float) -> int:
    """Digits after the point of the step's shortest text (1e-05: 5)."""
    text = repr(float(step))
    if "e" in text:
        mantissa, exp = text.split("e")
        return max(0, len(mantissa.partition(".")[2].rstrip("0")) - int(exp))
    return len(text.partition(".")[2].rstrip("0"))


def passes_multiple(value: int | float, step: float) -> bool:
    """jsonschema's multipleOf for a float step (its _keywords.multipleOf)."""
    quotient = value / step
    try:
        return int(quotient) == quotient
    except OverflowError:
        return (Fraction(value) / Fraction(step)).denominator == 1


def decimal_multiples(c: Any, step: float, bounds: tuple, integer: bool, path: str) -> Node:
    """The numbers multiple of `step` within `bounds` (lo, lo exclusive, hi, hi exclusive): one lazy trie per
    step and bounds in a compilation, shared by every number schema that has them (83 fields of one schema with
    `multipleOf: 0.01, minimum: 0` build and lower each prefix once, not 83 times)."""
    key = ("multipleOf", float(step), bounds, integer)
    trie = c.patterns.get(key)
    if trie is None:
        trie = c.patterns[key] = DecimalMultiples(c, c.prefix("multiple"), step, bounds, integer, path)
        c.undo.append((c.patterns, key))  # (a part rolled back forgets it)
    return trie.entry(path)


class DecimalMultiples:
    """The lazy trie of the numbers multiple of `step` within the bounds (`integer`: integers only)."""

    def __init__(self, c: Any, base: str, step: float, bounds: tuple, integer: bool, path: str) -> None:
        self.c, self.base, self.step, self.path = c, base, float(step), path
        self.lo, self.lo_x, self.hi, self.hi_x = bounds
        self.integer = integer
        self.bounds = (None if self.lo is None else Fraction(self.lo), None if self.hi is None else Fraction(self.hi))
        self.digits = 0 if integer else fraction_digits(step)
        if self.digits > MAX_FRACTION:
            raise ConstraintError(f"{path}: multipleOf {step} has more than {MAX_FRACTION} fraction digits")
        self.names: dict[str, str] = {}
        self.memo: dict[str, bool] = {}

    def entry(self, path: str) -> Node:
        if not self.viable(""):
            raise ConstraintError(f"{path}: no multiple of {self.step} within the bounds")
        return Ref(self.rule(""))

    def rule(self, prefix: str) -> str:
        name = self.names.get(prefix)
        if name is None or not self.c.has_rule(name):  # (rolled back: made again)
            tag = prefix.replace("-", "m").replace(".", "p") or "n"
            name = self.names[prefix] = self.c.add_lazy(f"{self.base}-{tag}", lambda: self.body(prefix))
        return name

    def body(self, prefix: str) -> Node:
        options = [
            seq(Lit(nxt[len(prefix) :]), Ref(self.rule(nxt))) for nxt in self.children(prefix) if self.viable(nxt)
        ]
        return alt(*[EMPTY] * self.ends(prefix), *options)

    # -- the texts ----------------------------------------------------------------------------------------------

    def children(self, prefix: str) -> list[str]:
        """The prefixes one character longer (a digit, the point, the sign) that a number's text may have."""
        if prefix == "":
            return ["-", *(str(d) for d in range(10))]
        integral, point, fraction = prefix.partition(".")
        magnitude = integral.lstrip("-")
        if point:
            return [prefix + str(d) for d in range(10)] if len(fraction) < self.digits else []
        out = []
        if (magnitude and magnitude != "0" and len(magnitude) < MAX_DIGITS) or not magnitude:
            out += [prefix + str(d) for d in range(10)]
        if magnitude and self.digits:
            out.append(prefix + ".")
        return out

    def ends(self, prefix: str) -> bool:
        """Whether the text is a number jsonschema holds a multiple within the bounds."""
        if not prefix or prefix.endswith((".", "-")):
            return False
        value = float(prefix) if "." in prefix else int(prefix)  # (as json.loads reads it: no exponent here)
        if self.lo is not None and (value <= self.lo if self.lo_x else value < self.lo):
            return False
        if self.hi is not None and (value >= self.hi if self.hi_x else value > self.hi):
            return False
        return passes_multiple(value, self.step)

    def viable(self, prefix: str) -> bool:
        """Whether some completion of the prefix ends (searched within _LOOKAHEAD more integral digits and the
        fraction digits; a prefix whose completions all lie outside the bounds is cut at once)."""
        known = self.memo.get(prefix)
        if known is None:
            known = self.memo[prefix] = self.search(prefix)
        return known

    def search(self, prefix: str) -> bool:
        todo = [prefix]
        limit = len(prefix.partition(".")[0].lstrip("-")) + _LOOKAHEAD
        while todo:
            p = todo.pop()
            self.c.budget.charge(1, self.path)
            if self.ends(p):
                return True
            if not self.reachable(p):
                continue
            for nxt in self.children(p):
                if "." in nxt or len(nxt.lstrip("-")) <= limit:
                    todo.append(nxt)
        return False

    def reachable(self, prefix: str) -> bool:
        """Whether the bounds leave room for some completion of the prefix (intervals of its magnitudes)."""
        integral, point, fraction = prefix.partition(".")
        negative = integral.startswith("-")
        magnitude = integral.lstrip("-")
        if not magnitude:
            return True
        if point:
            low = Fraction(f"{magnitude}.{fraction or 0}")
            spans = [(low, low + Fraction(1, 10 ** len(fraction)))]
        else:
            n = int(magnitude)
            spans = [(Fraction(n), Fraction(n + 1))]
            if n:
                more = range(1, MAX_DIGITS - len(magnitude) + 1)
                spans += [(Fraction(n * 10**k), Fraction((n + 1) * 10**k)) for k in more]
        low, high = self.bounds
        for a, b in spans:
            lo, hi = (-b, -a) if negative else (a, b)
            if (low is None or hi >= low) and (high is None or lo <= high):
                return True
        return False
