"""The class escapes of a pattern (\\d \\D \\w \\W \\s \\S) as code-point sets that hold in every meaning a pattern
may be given: ECMA-262's (the spec's: \\d is [0-9], \\w ASCII, \\s its white space and U+FEFF) and Python's `re`
(jsonschema's: \\d any decimal digit, \\w any letter or digit, \\s also U+001C..U+001F and U+0085), under the
Unicode of any Python version (newer ones add digits and letters).

Each escape has a LOW set (what every meaning matches: a character generated for it matches in all of them)
and a HIGH set (what any meaning may match): a positive class uses LOW sets, a negated class the HIGH sets of
its escapes, so what it leaves out is left out in every meaning. `[^\\s]` leaves out U+001C (Python's space)
and U+FEFF (ECMA's); `\\W` is punctuation and symbols of blocks that hold no letter or digit in any Unicode.
"""

from __future__ import annotations

from .grammar import MAX_CODE_POINT

Ranges = tuple[tuple[int, int], ...]


def complement(ranges: Ranges) -> Ranges:
    out, nxt = [], 0
    for lo, hi in sorted(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = max(nxt, hi + 1)
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return tuple(out)


ASCII_DIGIT = ((0x30, 0x39),)
ASCII_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
# Python's \d (Unicode decimal digits, Python 3.11) in the BMP, and everything past it (where Unicode adds new ones)
ANY_DIGIT = (
    (0x30, 0x39), (0x660, 0x669), (0x6F0, 0x6F9), (0x7C0, 0x7C9), (0x966, 0x96F), (0x9E6, 0x9EF), (0xA66, 0xA6F),
    (0xAE6, 0xAEF), (0xB66, 0xB6F), (0xBE6, 0xBEF), (0xC66, 0xC6F), (0xCE6, 0xCEF), (0xD66, 0xD6F), (0xDE6, 0xDEF),
    (0xE50, 0xE59), (0xED0, 0xED9), (0xF20, 0xF29), (0x1040, 0x1049), (0x1090, 0x1099), (0x17E0, 0x17E9),
    (0x1810, 0x1819), (0x1946, 0x194F), (0x19D0, 0x19D9), (0x1A80, 0x1A89), (0x1A90, 0x1A99), (0x1B50, 0x1B59),
    (0x1BB0, 0x1BB9), (0x1C40, 0x1C49), (0x1C50, 0x1C59), (0xA620, 0xA629), (0xA8D0, 0xA8D9), (0xA900, 0xA909),
    (0xA9D0, 0xA9D9), (0xA9F0, 0xA9F9), (0xAA50, 0xAA59), (0xABF0, 0xABF9), (0xFF10, 0xFF19), (0x10000, MAX_CODE_POINT),
)  # fmt: skip
# characters no meaning of \w matches: ASCII and Latin-1 punctuation and symbols, General Punctuation, arrows,
# mathematical operators, technical symbols, box drawing, shapes and the dingbats before the circled digits
NON_WORD = (
    (0x00, 0x2F), (0x3A, 0x40), (0x5B, 0x5E), (0x60, 0x60), (0x7B, 0xA9), (0xAB, 0xB1), (0xB4, 0xB4), (0xB6, 0xB8),
    (0xBB, 0xBB), (0xBF, 0xBF), (0xD7, 0xD7), (0xF7, 0xF7), (0x2000, 0x206F), (0x2190, 0x23FF), (0x2500, 0x2775),
)  # fmt: skip
# white space in both meanings, and in either (Python's U+001C..U+001F and U+0085, ECMA's U+FEFF; U+180E was
# white space in older Unicode)
BOTH_SPACE = (
    (0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
    (0x205F, 0x205F), (0x3000, 0x3000),
)  # fmt: skip
ANY_SPACE = (*BOTH_SPACE, (0x1C, 0x1F), (0x85, 0x85), (0x180E, 0x180E), (0xFEFF, 0xFEFF))

# escape -> (LOW, HIGH): a character in LOW matches the escape in every meaning; one outside HIGH in none
CLASS_ESCAPES: dict[str, tuple[Ranges, Ranges]] = {
    "d": (ASCII_DIGIT, ANY_DIGIT),
    "D": (complement(ANY_DIGIT), complement(ASCII_DIGIT)),
    "w": (ASCII_WORD, complement(NON_WORD)),
    "W": (NON_WORD, complement(ASCII_WORD)),
    "s": (BOTH_SPACE, ANY_SPACE),
    "S": (complement(ANY_SPACE), complement(BOTH_SPACE)),
}
