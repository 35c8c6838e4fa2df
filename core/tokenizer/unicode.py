"""Character classes as llama.cpp's tokenizers see them, from Python's `unicodedata`.

llama.cpp generates its tables (`unicode-data.cpp`) from the Unicode general categories: one category flag per
code point (N, L, Z, M, P, S, C; unassigned code points count as C) plus a separate whitespace set (the Unicode
White_Space property). Its regex pre-tokenizers then run on a *collapsed* copy of the text in which every
non-ASCII code point is replaced by one stand-in byte for its category, so that a byte-oriented regex engine can
test `\\p{L}`. We do the same: `collapse()` maps a string to one of equal length (code point for code point), and
the pre-tokenizer regexes (see `pretokenize.py`) are written against it.
"""

from __future__ import annotations

import unicodedata

# The Unicode White_Space property (what llama.cpp's `unicode_set_whitespace` holds).
WHITESPACE = frozenset(
    [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
)

# Stand-ins for non-ASCII code points in collapsed text (llama.cpp's `k_ucat_cpt`; 0x0B for whitespace because
# a C++ regex `\s` matches it, 0xD0 for every category without its own stand-in: separators, controls, unassigned).
COLLAPSED_NUMBER = "\xd1"
COLLAPSED_LETTER = "\xd2"
COLLAPSED_PUNCTUATION = "\xd3"
COLLAPSED_MARK = "\xd4"
COLLAPSED_SYMBOL = "\xd5"
COLLAPSED_OTHER = "\xd0"
COLLAPSED_SPACE = "\x0b"

_STAND_IN = {
    "N": COLLAPSED_NUMBER,
    "L": COLLAPSED_LETTER,
    "P": COLLAPSED_PUNCTUATION,
    "M": COLLAPSED_MARK,
    "S": COLLAPSED_SYMBOL,
}


def category(cp: int) -> str:
    """The one-letter category class llama.cpp assigns a code point: N L Z M P S C."""
    return unicodedata.category(chr(cp))[0]


def is_whitespace(cp: int) -> bool:
    return cp in WHITESPACE


class _CollapseTable(dict):
    """`str.translate` table for collapsed text, filled on demand (ASCII maps to itself and is never looked up
    in the fast path; each other code point costs one `unicodedata` call the first time it is seen)."""

    def __missing__(self, cp: int) -> int:
        if cp < 0x80:
            out = cp
        elif cp in WHITESPACE:
            out = ord(COLLAPSED_SPACE)
        else:
            out = ord(_STAND_IN.get(unicodedata.category(chr(cp))[0], COLLAPSED_OTHER))
        self[cp] = out
        return out


class _SpaceTable(dict):
    """`str.translate` table that only replaces non-ASCII whitespace by 0x0B (llama.cpp does so before running
    a regex that uses no Unicode category, because a C++ `\\s` matches ASCII whitespace only)."""

    def __missing__(self, cp: int) -> int:
        out = ord(COLLAPSED_SPACE) if cp >= 0x80 and cp in WHITESPACE else cp
        self[cp] = out
        return out


_COLLAPSE = _CollapseTable()
_SPACES = _SpaceTable()


def collapse(text: str) -> str:
    """Replace every non-ASCII code point by its category stand-in (same length as `text`)."""
    return text if text.isascii() else text.translate(_COLLAPSE)


def ascii_spaces(text: str) -> str:
    """Replace every non-ASCII whitespace code point by 0x0B (same length as `text`)."""
    return text if text.isascii() else text.translate(_SPACES)


def tolower(ch: str) -> str:
    """llama.cpp's `unicode_tolower`: the first code point of Python's lower-casing."""
    low = ch.lower()
    return low[0] if low else ch


def nfd_first(ch: str) -> str:
    """llama.cpp's NFD: each code point maps to the first code point of its canonical decomposition."""
    return unicodedata.normalize("NFD", ch)[0]


def is_chinese_char(cp: int) -> bool:
    """The CJK ranges BERT's basic tokenizer splits into single characters (as HF's Rust code spells them)."""
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B920 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _gpt2_byte_chars() -> list[str]:
    """GPT-2's reversible byte-to-character map: printable Latin-1 bytes stand for themselves, the other 68
    bytes are shifted to U+0100 onwards, in byte order."""
    kept = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = [""] * 256
    shifted = 0
    for b in range(256):
        if b in kept:
            chars[b] = chr(b)
        else:
            chars[b] = chr(0x100 + shifted)
            shifted += 1
    return chars


BYTE_TO_CHAR: tuple[str, ...] = tuple(_gpt2_byte_chars())
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in enumerate(BYTE_TO_CHAR)}
# bytes.decode("latin-1").translate(BYTE_ENCODE) maps raw bytes to GPT-2's byte characters in one C call
BYTE_ENCODE: dict[int, str] = dict(enumerate(BYTE_TO_CHAR))


def byte_encode(text: str) -> str:
    """UTF-8 bytes of `text`, each written as its GPT-2 byte character."""
    return text.encode("utf-8", "surrogatepass").decode("latin-1").translate(BYTE_ENCODE)
