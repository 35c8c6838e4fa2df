"""JSON numbers within bounds, as grammar nodes: the digits themselves carry the range (`minimum: 25` allows "25".."99",
"100".. but not "24"), like llama.cpp's integer ranges. Written here from the digit-range idea, not ported.

    integer_range(15, 300) -> "1" [5-9] | [2-9] [0-9] | [1-2] [0-9]{2} | "300"   (as GBNF)

No leading zeros, no "-0"; an unbounded side stops at 16 digits (llama.cpp's limit for numbers too).
Bounded numbers (`number_range`) are exact for decimals of at most 16 fraction digits and no exponent: with
`minimum: 0.25` every one of 0.25, 0.3, 0.2500001, 7 is in, 0.2499 is not (`inner_bound` keeps them within
the float bounds `jsonschema` compares with).
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal

from .errors import ConstraintError
from .grammar import EMPTY, Chars, Lit, Node, Ref, Repeat, alt, seq

MAX_DIGITS = 16
_UNBOUNDED = 10**MAX_DIGITS - 1
_QUANTUM = Decimal(1).scaleb(-MAX_DIGITS)
DECIMAL_PART = Ref("decimal-part")  # a JSON primitive (json_any.py): the caller uses it
FLOAT_INTEGERS = 2**53  # from this magnitude on, every float is an integer (and not every integer a float)
_EXACT = Context(prec=400)  # enough digits for any float bound (below 1e309) to the 16th decimal


DIGIT = Chars(((0x30, 0x39),))


def _group(alts: list[Node]) -> Node:
    return alt(*alts)


def _digit_class(lo: int, hi: int) -> Node:
    return Lit(str(lo)) if lo == hi else Chars(((0x30 + lo, 0x30 + hi),))


def _digits_up_to(lo: int, hi: int) -> Node:
    """lo..hi digits ([0-9]{lo,hi})."""
    return DIGIT if lo == hi == 1 else Repeat(DIGIT, lo, hi)


def _same_length(x: str, y: str) -> list[Node]:
    """Alternatives matching the decimal strings x..y, which have the same length: the range cut into maximal
    aligned blocks, each `prefix [a-b] [0-9]{k}`. Flat (no nesting, whatever the number of digits) and at most
    about 18 alternatives per digit."""
    lo, hi, n = int(x), int(y), len(x)
    out = []
    while lo <= hi:
        k = 0
        while k < n - 1 and lo % 10 ** (k + 1) == 0 and lo + 10 ** (k + 1) - 1 <= hi:
            k += 1
        size = 10**k
        d0 = lo // size % 10
        j = min(10 - d0, (hi - lo + 1) // size)
        prefix = str(lo // size)[:-1] if n - k > 1 else ""
        lead = [Lit(prefix)] if prefix else []
        piece = [Lit(f"{prefix}{d0}")] if j == 1 else [*lead, _digit_class(d0, d0 + j - 1)]
        if k:
            piece.append(_digits_up_to(k, k))
        out.append(seq(*piece))
        lo += j * size
    return out


def magnitudes(a: int, b: int | None) -> list[Node]:
    """Alternatives for the integers a..b (a >= 0) written without leading zeros; b None: up to 16 digits."""
    top = _UNBOUNDED if b is None else b
    if a > top:
        return []
    pieces = []  # (length, lo, hi)
    for length in range(len(str(a)), len(str(top)) + 1):
        lo_l = 0 if length == 1 else 10 ** (length - 1)
        x, y = max(a, lo_l), min(top, 10**length - 1)
        if x <= y:
            pieces.append((length, x, y))
    out = []
    # lengths that are full (every number of that many digits), from one on to the top: one repetition
    full_from = None
    for length, x, y in reversed(pieces):
        if length > 1 and x == 10 ** (length - 1) and y == 10**length - 1:
            full_from = length
        else:
            break
    for length, x, y in pieces:
        if full_from is not None and length >= full_from:
            break
        out.extend(_same_length(str(x), str(y)))
    if full_from is not None:
        top_len = pieces[-1][0]
        out.append(seq(Chars(((0x31, 0x39),)), _digits_up_to(full_from - 1, top_len - 1)))
    return out


def integer_range(lo: int | None, hi: int | None) -> Node:
    """The integers in [lo, hi] (None: unbounded on that side)."""
    alts = []
    if lo is None or lo < 0:
        neg_top = -1 if hi is None else min(hi, -1)
        if lo is None or lo <= neg_top:
            mags = magnitudes(-neg_top, None if lo is None else -lo)
            if mags:
                alts.append(seq(Lit("-"), _group(mags)))
    if hi is None or hi >= 0:
        alts.extend(magnitudes(0 if lo is None else max(lo, 0), hi))
    if not alts:
        raise ConstraintError(f"no integer lies between {lo} and {hi}")
    return _group(alts)


def _is_integral(x: float) -> bool:
    return float(x).is_integer()


def integer_bounds(lo, lo_excl: bool, hi, hi_excl: bool) -> tuple[int | None, int | None]:
    """The smallest and largest integers within the (possibly exclusive, possibly fractional) bounds."""
    i_lo = i_hi = None
    if lo is not None:
        i_lo = int(lo) + 1 if lo_excl and _is_integral(lo) else math.ceil(lo)
    if hi is not None:
        i_hi = int(hi) - 1 if hi_excl and _is_integral(hi) else math.floor(hi)
    return i_lo, i_hi


def inner_bound(bound: float | int, exclusive: bool, upper: bool) -> Decimal:
    """The bound as an inclusive decimal with at most MAX_DIGITS fraction digits, inside the bound: the float f
    nearest inside it (Python compares floats and ints exactly), written as its shortest text t, cut to the
    digits. A decimal x <= t parses (rounding monotonically) to a float <= f, so `jsonschema`'s comparison of
    the parsed float agrees; x <= t is exact, so 0.25 <= 0.25 and 0.3 <= 0.3. From 2**53 on, where floats are
    integers at least 2 apart, an integer's text is read as that integer (Python's json) and compared exactly,
    and t may lie outside the bound (-4.0005746330004697e27 is not -4000574633000469673178824704): the bound
    is then also the integer inside the exact one."""
    f = float(bound)
    toward = -math.inf if upper else math.inf
    if (f > bound if upper else f < bound) or (exclusive and f == bound):
        f = math.nextafter(f, toward)
    t = Decimal(repr(f)).quantize(_QUANTUM, rounding=ROUND_FLOOR if upper else ROUND_CEILING, context=_EXACT)
    if abs(f) < FLOAT_INTEGERS:  # (below, an integer's text that t allows is within the bound: it is a float)
        return t
    i = math.floor(bound) if upper else math.ceil(bound)
    if exclusive and i == bound:
        i += -1 if upper else 1
    return min(t, Decimal(i)) if upper else max(t, Decimal(i))


def _fraction_digits(x: Decimal) -> str:
    """The digits after the point of x >= 0, without trailing zeros ("" for an integer)."""
    text = f"{x:f}"
    return text.partition(".")[2].rstrip("0")


def _span(lo: str, hi: str | None, room: int) -> tuple[bool, list[Node]]:
    """Digit strings S of at most `room` digits with 0.lo <= 0.S <= 0.hi (hi None: no upper bound): (whether S
    may be empty, alternatives for the non-empty ones). Digit by digit, so at most ~3 alternatives a digit."""
    empty = lo == ""
    if room == 0:
        return empty, []
    if lo == "" and hi is None:
        return True, [_digits_up_to(1, room)]
    if lo == "" and hi == "":  # only zeros
        return True, [Repeat(Lit("0"), 1, room) if room > 1 else Lit("0")]
    lo_d = int(lo[0]) if lo else 0
    hi_d = 9 if hi is None else int(hi[0]) if hi else 0
    tail = [_digits_up_to(0, room - 1)] if room > 1 else []
    alts: list[Node] = []

    def follow(first: Node, sub_lo: str, sub_hi: str | None) -> None:
        if sub_lo == "" and sub_hi is None:
            alts.append(seq(first, *tail))
            return
        sub_empty, sub_alts = _span(sub_lo, sub_hi, room - 1)
        if sub_empty:
            alts.append(first)
        if sub_alts:
            alts.append(seq(first, alt(*sub_alts)))

    if lo_d == hi_d:
        follow(Lit(str(lo_d)), lo[1:], None if hi is None else hi[1:])
        return empty, alts
    follow(Lit(str(lo_d)), lo[1:], None)
    if hi_d - lo_d > 1:
        alts.append(seq(_digit_class(lo_d + 1, hi_d - 1), *tail))
    follow(Lit(str(hi_d)), "", None if hi is None else hi[1:])
    return empty, alts


def _with_fraction(integral: Node, frac: tuple[bool, list[Node]]) -> Node | None:
    """`integral` followed by one of the fractions (`"." F`), or by none when the fraction may be empty."""
    empty, alts = frac
    if not alts:
        return integral if empty else None
    fraction = seq(Lit("."), alt(*alts))
    return seq(integral, Repeat(fraction, 0, 1)) if empty else seq(integral, fraction)


def _magnitudes_between(a: Decimal, b: Decimal | None) -> list[Node]:
    """Alternatives for the decimal texts I or I.F (no leading zeros, F at most MAX_DIGITS digits, no exponent)
    whose value m has a <= m <= b (a >= 0; b None: I at most MAX_DIGITS digits)."""
    a_i, a_f = int(a), _fraction_digits(a)
    b_i, b_f = (None, None) if b is None else (int(b), _fraction_digits(b))
    if b_i is not None and b_i < a_i:
        return []
    out = []
    if b_i == a_i:
        piece = _with_fraction(Lit(str(a_i)), _span(a_f, b_f, MAX_DIGITS))
        return [piece] if piece else []
    piece = _with_fraction(Lit(str(a_i)), _span(a_f, None, MAX_DIGITS))
    if piece:
        out.append(piece)
    middle = magnitudes(a_i + 1, None if b_i is None else b_i - 1)
    if middle:
        out.append(seq(_group(middle), Repeat(seq(Lit("."), DECIMAL_PART), 0, 1)))
    if b_i is not None:
        piece = _with_fraction(Lit(str(b_i)), _span("", b_f, MAX_DIGITS))
        if piece:
            out.append(piece)
    return out


def number_range(lo, lo_excl: bool, hi, hi_excl: bool) -> Node:
    """JSON numbers within the bounds (None: unbounded), without exponents, at most MAX_DIGITS digits
    after the point: exactly those whose decimal value is within `inner_bound`s of the bounds."""
    lo_d = None if lo is None else inner_bound(lo, lo_excl, upper=False)
    hi_d = None if hi is None else inner_bound(hi, hi_excl, upper=True)
    if lo_d is not None and hi_d is not None and lo_d > hi_d:
        raise ConstraintError(f"no number between {lo} and {hi} can be generated (bounds too narrow)")
    alts = []
    if hi_d is None or hi_d >= 0:
        alts += _magnitudes_between(max(lo_d, Decimal(0)) if lo_d is not None else Decimal(0), hi_d)
    if lo_d is None or lo_d < 0:
        top = None if lo_d is None else lo_d.copy_negate()  # (exact: negation in a context would round)
        bottom = Decimal(0) if hi_d is None or hi_d >= 0 else hi_d.copy_negate()
        negative = _magnitudes_between(bottom, top)
        if negative:
            alts.append(seq(Lit("-"), _group(negative)))
    if not alts:
        raise ConstraintError(f"no number between {lo} and {hi} can be generated (bounds too narrow)")
    return _group(alts)


def divisible_by(k: int, fresh) -> tuple[dict[str, Node], Node]:
    """({rule: body}, entry): the entry matches the positive integers divisible by k (no leading zero), read
    digit by digit with the remainder so far as the rule (k rules, one per remainder; `fresh()` names them)."""
    names = [fresh() for _ in range(k)]
    rules = {}
    for r in range(k):  # after digits whose value is r mod k: another digit, or the end when r is 0
        by_next: dict[int, list[int]] = {}
        for d in range(10):
            by_next.setdefault((10 * r + d) % k, []).append(d)
        alts = [seq(_digits(ds), Ref(names[n])) for n, ds in by_next.items()]
        rules[names[r]] = alt(*alts, *[EMPTY] * (r == 0))
    first: dict[int, list[int]] = {}
    for d in range(1, 10):
        first.setdefault(d % k, []).append(d)
    return rules, alt(*(seq(_digits(ds), Ref(names[n])) for n, ds in first.items()))


def _digits(ds: list[int]) -> Node:
    return Lit(str(ds[0])) if len(ds) == 1 else Chars(tuple((0x30 + d, 0x30 + d) for d in ds))
