"""JSON string contents: regex patterns re-encoded as JSON text, and the lengths of their matches.

A pattern's grammar (`regex.py`) speaks of decoded characters; inside a JSON string `"` and `\\` must be escaped
and control characters written as escapes, so `json_encoded` rewrites its literals and classes accordingly.
`within_lengths` fits a pattern to minLength / maxLength.
"""

from __future__ import annotations

from .grammar import Alt, Chars, Lit, Node, Ref, Repeat, Seq, alt, seq
from .utf8 import normalize

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


def length_range(node: Node, rules: dict[str, Node] | None = None, _open: frozenset = frozenset()) -> tuple:
    """Fewest and most characters a node matches (None: no most); a rule met again inside itself (a recursive
    format, the regex one) counts as 0 to unbounded: bounds that hold, if loose."""
    if isinstance(node, Lit):
        return len(node.text), len(node.text)
    if isinstance(node, Chars):
        return 1, 1
    if isinstance(node, Ref):
        if node.name in _open:
            return 0, None
        return length_range(rules[node.name], rules, _open | {node.name})
    if isinstance(node, Seq):
        lo, hi = 0, 0
        for item in node.items:
            a, b = length_range(item, rules, _open)
            lo, hi = lo + a, None if hi is None or b is None else hi + b
        return lo, hi
    if isinstance(node, Alt):
        ranges = [length_range(o, rules, _open) for o in node.options]
        highs = [b for _, b in ranges]
        return min(a for a, _ in ranges), None if None in highs else max(highs)
    if isinstance(node, Repeat):
        a, b = length_range(node.item, rules, _open)
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


def at_least(node: Node, lo: int) -> Node | None:
    """The node's matches of at least `lo` characters, or a subset of them: alternatives too short left out, a
    repetition of fixed-width items made to repeat more (`[a-z]*` with lo 3: `[a-z]{3,}`); None when no part of
    it can be lengthened that way."""
    short, long = length_range(node)
    if short >= lo:
        return node
    if long is not None and long < lo:
        return None
    if isinstance(node, Alt):
        kept = [x for x in (at_least(o, lo) for o in node.options) if x is not None]
        return alt(*kept) if kept else None
    if isinstance(node, Repeat):
        width = length_range(node.item)
        if width[0] == width[1] and width[0] > 0:
            need = -(-lo // width[0])
            return Repeat(node.item, need, node.max) if node.max is None or need <= node.max else None
        return None
    if isinstance(node, Seq):  # (the last part that can grow takes the whole deficit)
        for i in range(len(node.items) - 1, -1, -1):
            item_short = length_range(node.items[i])[0]
            longer = at_least(node.items[i], item_short + lo - short)
            if longer is not None:
                return seq(*node.items[:i], longer, *node.items[i + 1 :])
    return None


def within_lengths(node: Node, lo: int, hi: int | None) -> Node | None:
    """The pattern `node` with lengths lo..hi: itself when all its matches are that long; else its matches made
    at least `lo` long (`at_least`) and its repetitions capped so that every match is at most `hi` long (a
    subset of the strings the schema allows); None when that cannot be done."""
    if lo and length_range(node)[0] < lo:
        node = at_least(node, lo)
        if node is None:
            return None
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
