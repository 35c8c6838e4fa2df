"""JSON Schema `format`s: the GBNF of the strings each generates, a conservative, always-valid subset of what
the format allows (a date's day never exceeds its month's length; a time always has an offset, as RFC 3339
requires; a regex is one Python's `re` compiles, as `jsonschema` checks it). Unknown formats are annotations
(json_values.py).
"""

from __future__ import annotations

from functools import cache

from .grammar import Node
from .json_strings import length_range

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
_EMAIL = {
    "email": 'fmt-local "@" fmt-label ("." fmt-label){0,2} "." [a-z]{2,6}',
    "fmt-local": '[a-zA-Z0-9_+-]{1,32} ("." [a-zA-Z0-9_+-]{1,32}){0,2}',
    "fmt-label": _HOST["fmt-label"],
}
# A regular expression Python's `re` compiles (jsonschema checks the format with it), as JSON string contents (a
# backslash is written twice): literals, escapes, classes, groups, alternatives, one quantifier an atom (a
# {n,m} with n <= m), anchors at the ends. No quote, no control character, no escaped backslash.
_REGEX = {
    "regex": '"^"? fmt-re-alt "$"?',
    "fmt-re-alt": 'fmt-re-piece* ("|" fmt-re-piece*)*',
    "fmt-re-piece": 'fmt-re-atom fmt-re-quant? | "\\\\\\\\" [bB]',  # (a word boundary takes no quantifier)
    "fmt-re-atom": (
        '[a-zA-Z0-9 _,:;!@#%&=<>~/\x27-] | "." | "\\\\\\\\" [dDwWsS.^$*+?()\\[\\]{}|/-] | fmt-re-class'
        ' | "(" "?:"? fmt-re-alt ")"'
    ),
    "fmt-re-class": '"[" "^"? fmt-re-item+ "]"',
    "fmt-re-item": '[a-zA-Z0-9 _.,:;!@#%&=<>~/] | "a-z" | "A-Z" | "0-9" | "\\\\\\\\" [dDwWsS.\\[\\]^-]',
    "fmt-re-quant": '([*+?] | "{" fmt-re-count "}") "?"?',
    "fmt-re-count": (
        '[0-9]{1,4} ","? | [1-9] [0-9]{0,2} "," [1-9] [0-9]{3} | [1-9] "," [1-9] [0-9]{1,2} | "0," [0-9]{1,4}'
        ' | "1," [1-9] | "2," [2-9] | "3," [3-9] | "4," [4-9] | "5," [5-9] | "6," [6-9] | "7," [7-9] | "8," [89]'
        ' | "9,9" | [1-9] [0-9] "," [1-9] [0-9]{2}'
    ),
}
# RFC 6570: literals (its set, no quote) and expressions {op var,var:3,var*}; variable names [A-Za-z0-9_], dots
# between (no percent-escapes: the uri_template package jsonschema checks with refuses some)
_URI_TEMPLATE = {
    "uri-template": "(fmt-ut-literal | fmt-ut-expression)*",
    "fmt-ut-literal": '[!#$&(-;=?-\\[\\]_a-z~] | "%" [0-9a-fA-F]{2}',
    "fmt-ut-expression": '"{" [+#./;?&]? fmt-ut-var ("," fmt-ut-var)* "}"',
    "fmt-ut-var": 'fmt-ut-name (":" [1-9] [0-9]{0,2} | "*")?',  # (the uri_template package: below 1000)
    "fmt-ut-name": '[a-zA-Z0-9_] ("."? [a-zA-Z0-9_])*',
}
# RFC 6901: /-separated reference tokens, ~0 and ~1 the escapes (no quote, backslash or control character)
_JSON_POINTER = {
    "json-pointer": '("/" json-pointer-token)*',
    "json-pointer-token": '([^/~"\\\\\\x00-\\x1F\\x7F] | "~0" | "~1")*',
}
FORMATS: dict[str, dict[str, str]] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": {"date-time": 'date "T" time', **_DATE, **_TIME},
    "uuid": {
        "uuid": 'fmt-hex{8} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{12}',
        "fmt-hex": "[0-9a-fA-F]",
    },
    "email": _EMAIL,
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
    "regex": _REGEX,
    "uri-template": _URI_TEMPLATE,
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": {
        # (jsonschema's checker refuses a digit after a 0, and an empty pointer: neither is written)
        "relative-json-pointer": '("0" | [1-9]{1,9}) ("#" | "/" json-pointer-token json-pointer)',
        **_JSON_POINTER,
    },
    # the ASCII ones are in the sets: an IRI / IDN form that is a URI / hostname / email is one
    "iri": {"iri": "uri", **_URI},
    "iri-reference": {"iri-reference": "uri-reference", **_URI_REFERENCE},
    # (IDNA refuses a label with "--" at its third and fourth characters, as an A-label "xn--" has: the third
    # is never a hyphen here; a hostname allows them)
    "idn-hostname": {
        "idn-hostname": 'fmt-idn-label ("." fmt-idn-label){0,4}',
        "fmt-idn-label": "[a-z0-9] ([a-z0-9-] [a-z0-9] ([a-z0-9-]{0,18} [a-z0-9])? | [a-z0-9])?",
    },
    "idn-email": {"idn-email": "email", **_EMAIL},
}


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
