"""JSON string contents: `format`s, regex patterns (re-encoded as JSON text) and object keys that avoid a set.

A pattern's grammar (`regex.py`) speaks of decoded characters; inside a JSON string `"` and `\\` must be escaped
and control characters written as escapes, so `json_encoded` rewrites its literals and classes accordingly.

Formats generate a conservative, always-valid subset of what the format allows (a date's day never exceeds
its month's length; a time always has an offset, as RFC 3339 requires).
"""

from __future__ import annotations

from functools import cache

from .grammar import Alt, Chars, Lit, Node, Ref, Repeat, Seq, alt, node_to_gbnf, seq
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


def pattern_gbnf(node: Node) -> str:
    return node_to_gbnf(json_encoded(node))


KEY_CHAR = '[^"\\\\\\x7F\\x00-\\x1F]'  # a key character written as itself (no escapes: see key_excluding)


def key_excluding(names: list[str], rule: str, max_length: int | None = None, fresh=None) -> dict[str, str]:
    """Rules for a quoted object key that is none of `names` (exactly: every other key). Keys are written
    without escapes, so a key that decodes to a listed name cannot sneak in as `\\u0061`. Returns {rule: rhs,
    ...}; `rule` is the entry; `fresh()` names the other rules (default: `rule-1`, `rule-2`, ...). One rule per
    branching node of the names' trie; below the last branching, the one name left is excluded by a flat
    alternation in its node's rule (its proper prefixes, a first differing character, a longer key), so the
    rules count the names' branchings, not their characters."""
    # a flat trie (children by index): a nested one as deep as the longest name is freed by recursion in C,
    # which overflows a browser worker's stack at ~2000 levels
    nodes: list[dict[str, int]] = [{}]
    ends: set[int] = set()
    for name in names:
        at = 0
        for ch in name:
            nxt = nodes[at].get(ch)
            if nxt is None:
                nxt = nodes[at][ch] = len(nodes)
                nodes.append({})
            at = nxt
        ends.add(at)
    rules: dict[str, str] = {}
    more = "*" if max_length is None else f"{{0,{max_length}}}"
    rest = f"{KEY_CHAR}{more}"
    # one rule per trie node, named in preorder; a body needs only its children's names, so no recursion
    todo = [(0, rule)]
    count = 0
    while todo:
        at, node_rule = todo.pop()
        options = []
        suffix = _chain(nodes, ends, at)
        if suffix is not None and at != 0:  # one name left below: "" | w[:i] [^w_i] rest | w[:i] | w KEY_CHAR rest
            for i in range(0, len(suffix), _CHUNK):  # (in chunks: the text grows as the name, not its square)
                piece, last = suffix[i : i + _CHUNK], i + _CHUNK >= len(suffix)
                if not last:
                    count += 1
                    after = fresh() if fresh is not None else f"{rule}-{count}"
                for j, ch in enumerate(piece):
                    head = f"{node_to_gbnf(Lit(piece[:j]))} " if j else ""
                    options.append(f'{head}[^"\\\\\\x7F\\x00-\\x1F{_class_char(ch)}] {rest}')
                    options.append(head.strip() or '""')
                options.append(f"{node_to_gbnf(Lit(piece))} {f'{KEY_CHAR} {rest}' if last else after}")
                rules[node_rule] = " | ".join(options)
                options, node_rule = [], None if last else after
            continue
        node = nodes[at]
        # a child character a key cannot hold unescaped ('"', '\\', controls) is unreachable: drop it
        children = sorted(k for k in node if ord(k) >= 0x20 and k not in '"\\\x7f')
        named = []
        for ch in children:
            count += 1
            child_rule = fresh() if fresh is not None else f"{rule}-{count}"
            named.append((node[ch], child_rule))
            options.append(f"{node_to_gbnf(Lit(ch))} {child_rule}")
        todo.extend(reversed(named))
        others = "".join(_class_char(ch) for ch in children)
        options.append(f'[^"\\\\\\x7F\\x00-\\x1F{others}] {rest}')
        if at not in ends:
            options.append('""')  # the key may end here
        body = " | ".join(options)
        rules[node_rule] = f'"\\"" ({body}) "\\"" space' if at == 0 else body
    return rules


_CHUNK = 32  # characters of a name's unbranched rest excluded by one flat rule


def _chain(nodes: list[dict[str, int]], ends: set[int], at: int) -> str | None:
    """The one name's rest below trie node `at` when no branching or earlier end is under it (else None); the
    characters a key cannot hold unescaped end it (None: they need the general form)."""
    out = []
    while True:
        node = nodes[at]
        if not node:
            return "".join(out) if out and at in ends else None
        if len(node) > 1 or at in ends:
            return None
        ((ch, at),) = node.items()
        if ord(ch) < 0x20 or ch in '"\\\x7f':
            return None
        out.append(ch)


def _class_char(ch: str) -> str:
    return f"\\x{ord(ch):02X}" if ch in "]^-[" else ch


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
def format_lengths(fmt: str) -> tuple[int, int | None]:
    """Fewest and most characters of the strings FORMATS[fmt] writes."""
    from .gbnf import parse

    g = parse("".join(f"{n} ::= {r}\n" for n, r in {"root": fmt, **FORMATS[fmt]}.items()))
    return length_range(g.rules["root"], g.rules)
