"""JSON string contents: `format`s, regex patterns (re-encoded as JSON text) and object keys that avoid a set.

A pattern's grammar (`regex.py`) speaks of decoded characters; inside a JSON string `"` and `\\` must be escaped
and control characters written as escapes, so `json_encoded` rewrites its literals and classes accordingly.

Formats generate a conservative, always-valid subset of what the format allows (a date's day never exceeds
its month's length; a time always has an offset, as RFC 3339 requires).
"""

from __future__ import annotations

from functools import cache

from .grammar import Alt, Chars, Lit, Node, Ref, Repeat, Seq, alt, seq
from .utf8 import normalize

# format name -> GBNF rules (name -> rhs); the entry named like the format is the string's content
_DATE = {
    "date": 'fmt-year "-" fmt-month-day',
    "fmt-year": "[1-2] [0-9]{3}",
    "fmt-month-day": (
        '("0" [13578] | "1" [02]) "-" ("0" [1-9] | [1-2] [0-9] | "3" [0-1]) | '
        '("0" [469] | "11") "-" ("0" [1-9] | [1-2] [0-9] | "30") | '
        '"02" "-" ("0" [1-9] | "1" [0-9] | "2" [0-8])'
    ),
}
_TIME = {
    "time": '([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? fmt-offset',
    "fmt-offset": '"Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]',
}
_HOST = {
    "hostname": 'fmt-label ("." fmt-label){0,4}',
    "fmt-label": "[a-z0-9] ([a-z0-9-]{0,20} [a-z0-9])?",
}
_IPV6 = {  # the full form: eight groups, none left out
    "ipv6": 'fmt-h16 (":" fmt-h16){7}',
    "fmt-h16": "[0-9a-fA-F]{1,4}",
}
_URI = {  # RFC 3986, section 3 and appendix A (an IP-literal as IPv6 in full form only: a subset)
    "uri": 'fmt-scheme ":" fmt-hier ("?" fmt-query)? ("#" fmt-query)?',
    "fmt-scheme": "[a-zA-Z] [a-zA-Z0-9+.-]*",
    "fmt-hier": '"//" fmt-authority fmt-abempty | "/" (fmt-pchar+ fmt-abempty)? | fmt-pchar+ fmt-abempty | ""',
    "fmt-authority": '(fmt-userinfo "@")? fmt-host (":" [0-9]*)?',
    "fmt-userinfo": '(fmt-unreserved | fmt-pct | fmt-sub | ":")*',
    "fmt-host": '"[" ipv6 "]" | (fmt-unreserved | fmt-pct | fmt-sub)*',
    "fmt-abempty": '("/" fmt-pchar*)*',
    "fmt-query": '(fmt-pchar | "/" | "?")*',
    "fmt-pchar": 'fmt-unreserved | fmt-pct | fmt-sub | ":" | "@"',
    "fmt-unreserved": "[a-zA-Z0-9._~-]",
    "fmt-pct": '"%" fmt-hex fmt-hex',
    "fmt-hex": "[0-9a-fA-F]",
    "fmt-sub": "[!$&'()*+,;=]",
    **_IPV6,
}
_URI_REFERENCE = {  # a URI or a relative reference (RFC 3986, 4.1-4.2)
    "uri-reference": 'uri | fmt-relative ("?" fmt-query)? ("#" fmt-query)?',
    "fmt-relative": '"//" fmt-authority fmt-abempty | "/" (fmt-pchar+ fmt-abempty)? | fmt-nc+ fmt-abempty | ""',
    "fmt-nc": 'fmt-unreserved | fmt-pct | fmt-sub | "@"',  # a first segment without ':' (no scheme)
    **_URI,
}
FORMATS: dict[str, dict[str, str]] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": {"date-time": 'date "T" time', **_DATE, **_TIME},
    "uuid": {
        "uuid": 'fmt-hex{8} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{12}',
        "fmt-hex": "[0-9a-fA-F]",
    },
    "email": {
        "email": 'fmt-local "@" fmt-label ("." fmt-label){0,2} "." [a-z]{2,6}',
        "fmt-local": '[a-zA-Z0-9_+-]{1,32} ("." [a-zA-Z0-9_+-]{1,32}){0,2}',
        "fmt-label": _HOST["fmt-label"],
    },
    "hostname": _HOST,
    "ipv4": {
        "ipv4": 'fmt-octet "." fmt-octet "." fmt-octet "." fmt-octet',
        "fmt-octet": '"25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]',
    },
    "ipv6": _IPV6,
    "uri": _URI,
    "uri-reference": _URI_REFERENCE,
    "duration": {  # RFC 3339 appendix A: P, then years months days (each a prefix of the next), then T time
        "duration": '"P" (fmt-dur-date ("T" fmt-dur-time)? | "T" fmt-dur-time | fmt-dur-n "W")',
        "fmt-dur-date": (
            'fmt-dur-n "Y" (fmt-dur-n "M" (fmt-dur-n "D")?)? | fmt-dur-n "M" (fmt-dur-n "D")? | fmt-dur-n "D"'
        ),
        "fmt-dur-time": (
            'fmt-dur-n "H" (fmt-dur-n "M" (fmt-dur-n "S")?)? | fmt-dur-n "M" (fmt-dur-n "S")? | fmt-dur-n "S"'
        ),
        "fmt-dur-n": "[0-9]{1,6}",
    },
}

_SHORT_ESCAPES = {0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x5C: "\\\\"}
# characters a JSON string may hold as they are (llama.cpp's convention also escapes DEL)
_RAW_EXCLUDED = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0x7F))


def _escape(c: int) -> str:
    return _SHORT_ESCAPES.get(c) or f"\\u{c:04x}"


def json_encoded(node: Node) -> Node:
    """The same strings as `node` (over decoded characters), written as JSON string contents."""
    if isinstance(node, Lit):
        parts: list[Node] = []
        raw = []
        for ch in node.text:
            c = ord(ch)
            if c < 0x20 or c in (0x22, 0x5C, 0x7F):
                if raw:
                    parts.append(Lit("".join(raw)))
                    raw = []
                parts.append(Lit(_escape(c)))
            else:
                raw.append(ch)
        if raw or not parts:
            parts.append(Lit("".join(raw)))
        return seq(*parts)
    if isinstance(node, Chars):
        ranges = normalize(node.ranges, node.negated)
        raw = _subtract(ranges, _RAW_EXCLUDED)
        options: list[Node] = [Chars(tuple(raw))] if raw else []
        for lo, hi in _intersect(ranges, _RAW_EXCLUDED):
            options += [Lit(_escape(c)) for c in range(lo, hi + 1)]
        if not options:
            return Chars(())  # matches nothing
        return alt(*options)
    if isinstance(node, Seq):
        return seq(*(json_encoded(i) for i in node.items))
    if isinstance(node, Alt):
        return alt(*(json_encoded(o) for o in node.options))
    if isinstance(node, Repeat):
        return Repeat(json_encoded(node.item), node.min, node.max)
    raise TypeError(f"unexpected node in a pattern: {node!r}")


def _intersect(a: list[tuple[int, int]], b: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    out = []
    for lo, hi in a:
        for blo, bhi in b:
            x, y = max(lo, blo), min(hi, bhi)
            if x <= y:
                out.append((x, y))
    return out


def _subtract(a: list[tuple[int, int]], b: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    out = []
    for lo, hi in a:
        pieces = [(lo, hi)]
        for blo, bhi in b:
            nxt = []
            for x, y in pieces:
                if bhi < x or blo > y:
                    nxt.append((x, y))
                    continue
                if x < blo:
                    nxt.append((x, blo - 1))
                if y > bhi:
                    nxt.append((bhi + 1, y))
            pieces = nxt
        out += pieces
    return out


def length_range(node: Node, rules: dict[str, Node] | None = None) -> tuple[int, int | None]:
    """Fewest and most characters a (non-recursive) node matches; None: no most."""
    if isinstance(node, Lit):
        return len(node.text), len(node.text)
    if isinstance(node, Chars):
        return 1, 1
    if isinstance(node, Ref):
        return length_range(rules[node.name], rules)
    if isinstance(node, Seq):
        lo, hi = 0, 0
        for item in node.items:
            a, b = length_range(item, rules)
            lo, hi = lo + a, None if hi is None or b is None else hi + b
        return lo, hi
    if isinstance(node, Alt):
        ranges = [length_range(o, rules) for o in node.options]
        highs = [b for _, b in ranges]
        return min(a for a, _ in ranges), None if None in highs else max(highs)
    if isinstance(node, Repeat):
        a, b = length_range(node.item, rules)
        if node.max == 0 or b == 0:
            return a * node.min, 0 if b == 0 else a * node.min
        return a * node.min, None if node.max is None or b is None else b * node.max
    raise TypeError(f"unexpected node {node!r}")


def _capped(node: Node, cap: int) -> Node:
    """The node with every repetition's upper count at most `cap` (never below its lower count)."""
    if isinstance(node, Repeat):
        hi = cap if node.max is None else min(node.max, cap)
        return Repeat(_capped(node.item, cap), node.min, max(node.min, hi))
    if isinstance(node, Seq):
        return Seq(tuple(_capped(i, cap) for i in node.items))
    if isinstance(node, Alt):
        return Alt(tuple(_capped(o, cap) for o in node.options))
    return node


def within_lengths(node: Node, lo: int, hi: int | None) -> Node | None:
    """The pattern `node` with lengths lo..hi: itself when all its matches are that long; else with its
    repetitions capped so that every match is at most `hi` long (a subset of the strings the schema allows);
    None when that cannot be done (a match may be shorter than `lo`, or even the fewest repetitions are too
    long)."""
    short, long = length_range(node)
    if short < lo:
        return None
    if hi is None or (long is not None and long <= hi):
        return node
    low, high = 0, hi  # the largest cap whose longest match fits: length grows with the cap
    if length_range(_capped(node, 0))[1] > hi:
        return None
    while low < high:
        mid = (low + high + 1) // 2
        if length_range(_capped(node, mid))[1] <= hi:
            low = mid
        else:
            high = mid - 1
    return _capped(node, low)


@cache
def format_nodes(fmt: str) -> dict[str, Node]:
    """FORMATS[fmt] as grammar nodes (parsed once)."""
    from .gbnf import parse

    return parse("".join(f"{n} ::= {r}\n" for n, r in FORMATS[fmt].items()), root=fmt).rules


@cache
def format_lengths(fmt: str) -> tuple[int, int | None]:
    """Fewest and most characters of the strings FORMATS[fmt] writes."""
    rules = format_nodes(fmt)
    return length_range(rules[fmt], rules)
