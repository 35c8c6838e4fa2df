"""JSON numbers within bounds, as GBNF: the digits themselves carry the range (`minimum: 25` allows "25".."99",
"100".. but not "24"), like llama.cpp's integer ranges. Written here from the digit-range idea, not ported.

    integer_range(15, 300) -> ("1" [5-9] | [2-9] [0-9] | [1-2] [0-9]{2} | "300")

No leading zeros, no "-0"; an unbounded side stops at 16 digits (llama.cpp's limit for numbers too).
Non-integer bounds allow integers in range plus decimals `I.F` whose every fraction stays in range (a subset
of the valid numbers: e.g. with `maximum: 5.5`, 5.2 is never produced); bounded numbers have no exponent.
"""

from __future__ import annotations

import math

from .errors import ConstraintError

MAX_DIGITS = 16
_UNBOUNDED = 10**MAX_DIGITS - 1


def _group(alts: list[str]) -> str:
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


def _digit_class(lo: int, hi: int) -> str:
    return f"[{lo}]" if lo == hi else f"[{lo}-{hi}]"


def _same_length(x: str, y: str) -> list[str]:
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
        lead = [f'"{prefix}"'] if prefix else []
        piece = [f'"{prefix}{d0}"'] if j == 1 else [*lead, _digit_class(d0, d0 + j - 1)]
        if k:
            piece.append("[0-9]" + ("" if k == 1 else f"{{{k}}}"))
        out.append(" ".join(piece))
        lo += j * size
    return out


def magnitudes(a: int, b: int | None) -> list[str]:
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
        lo_rep, hi_rep = full_from - 1, top_len - 1
        rep = f"{{{lo_rep}}}" if lo_rep == hi_rep else f"{{{lo_rep},{hi_rep}}}"
        out.append(f"[1-9] [0-9]{rep}")
    return out


def integer_range(lo: int | None, hi: int | None) -> str:
    """GBNF for the integers in [lo, hi] (None: unbounded on that side)."""
    alts = []
    if lo is None or lo < 0:
        neg_top = -1 if hi is None else min(hi, -1)
        if lo is None or lo <= neg_top:
            mags = magnitudes(-neg_top, None if lo is None else -lo)
            if mags:
                alts.append('"-" ' + _group(mags))
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


def _decimal_magnitudes(m_lo, m_lo_excl: bool, m_hi, m_hi_excl: bool) -> list[str]:
    """`I "." F` for magnitudes m >= 0 with m_lo (<|<=) m (<|<=) m_hi and every fraction F in range."""
    if m_lo is None or m_lo < 0:
        first = 0
    elif _is_integral(m_lo):
        first = int(m_lo) + (1 if m_lo_excl else 0)
    else:
        first = math.ceil(m_lo)
    last = None if m_hi is None else math.floor(m_hi) - 1  # I + 1 <= m_hi keeps I.F below it
    out = []
    if last is None or first <= last:
        out.append(_group(magnitudes(first, last)) + ' "." decimal-part')
    if m_lo is not None and m_lo >= 0 and m_lo_excl and _is_integral(m_lo) and (m_hi is None or m_lo + 1 <= m_hi):
        out.append(f'"{int(m_lo)}" "." [0-9]{{0,{MAX_DIGITS - 1}}} [1-9]')  # just above an exclusive bound
    return out


def number_range(lo, lo_excl: bool, hi, hi_excl: bool) -> str:
    """GBNF for JSON numbers within the bounds (None: unbounded), without exponents (see module doc)."""
    alts = []
    i_lo, i_hi = integer_bounds(lo, lo_excl, hi, hi_excl)
    if i_lo is None or i_hi is None or i_lo <= i_hi:
        alts.append(integer_range(i_lo, i_hi))
    alts += _decimal_magnitudes(lo, lo_excl, hi, hi_excl)
    negative = _decimal_magnitudes(None if hi is None else -hi, hi_excl, None if lo is None else -lo, lo_excl)
    if negative:
        alts.append('"-" ' + _group(negative))
    if not alts:
        raise ConstraintError(f"no number between {lo} and {hi} can be generated (bounds too narrow)")
    return _group(alts)
