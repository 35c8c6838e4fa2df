"""Code-point sets as UTF-8 byte-range sequences, so a character class becomes a few alternatives of bytes.

    [a-zé]  ->  [61-7A]  |  [C3] [A9]
    [^"]    ->  [00-21] | [23-7F] | [C2-DF][80-BF] | [E0][A0-BF][80-BF] | ... (surrogates excluded)

Only well-formed UTF-8 is produced: no overlong forms, no surrogates (U+D800..U+DFFF), nothing past U+10FFFF.
"""

from __future__ import annotations

from .grammar import MAX_CODE_POINT

SURROGATES = (0xD800, 0xDFFF)
_LENGTH_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, MAX_CODE_POINT))

ByteSeq = tuple[tuple[int, int], ...]  # one byte range per position


def normalize(ranges: tuple[tuple[int, int], ...], negated: bool) -> list[tuple[int, int]]:
    """Sorted, merged, surrogate-free code-point ranges (the complement when `negated`)."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted((min(a, b), max(a, b)) for a, b in ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    if negated:
        out, nxt = [], 0
        for lo, hi in merged:
            if lo > nxt:
                out.append((nxt, lo - 1))
            nxt = hi + 1
        if nxt <= MAX_CODE_POINT:
            out.append((nxt, MAX_CODE_POINT))
        merged = out
    result = []
    s_lo, s_hi = SURROGATES
    for lo, hi in merged:
        hi = min(hi, MAX_CODE_POINT)
        if hi < s_lo or lo > s_hi:
            result.append((lo, hi))
            continue
        if lo < s_lo:
            result.append((lo, s_lo - 1))
        if hi > s_hi:
            result.append((s_hi + 1, hi))
    return result


def byte_sequences(ranges: list[tuple[int, int]]) -> list[ByteSeq]:
    """The UTF-8 encodings of the code points in `ranges` (normalized) as products of byte ranges."""
    out: list[ByteSeq] = []
    for lo, hi in ranges:
        for b_lo, b_hi in _LENGTH_BOUNDS:
            a, b = max(lo, b_lo), min(hi, b_hi)
            if a <= b:
                _same_length(a, b, out)
    return _merge_ascii(out)


def _same_length(lo: int, hi: int, out: list[ByteSeq]) -> None:
    """Split [lo, hi] (all encoded with the same number of bytes) until each piece is a product of ranges."""
    n = len(chr(lo).encode("utf-8"))
    for k in range(1, n):
        low_bits = (1 << (6 * k)) - 1
        if lo & ~low_bits == hi & ~low_bits:
            continue
        if lo & low_bits:
            _same_length(lo, lo | low_bits, out)
            _same_length((lo | low_bits) + 1, hi, out)
            return
        if hi & low_bits != low_bits:
            _same_length(lo, (hi & ~low_bits) - 1, out)
            _same_length(hi & ~low_bits, hi, out)
            return
    out.append(tuple(zip(chr(lo).encode("utf-8"), chr(hi).encode("utf-8"), strict=True)))


def _merge_ascii(seqs: list[ByteSeq]) -> list[ByteSeq]:
    """Single-byte pieces first, folded into one set where they can be (the compiler makes it one element)."""
    singles = [s[0] for s in seqs if len(s) == 1]
    multi = [s for s in seqs if len(s) > 1]
    return [((lo, hi),) for lo, hi in singles] + multi


def byte_mask(lo: int, hi: int) -> int:
    """The 256-bit set of bytes lo..hi."""
    return ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
