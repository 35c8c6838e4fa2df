"""String formats and patterns with lengths (json_strings.py), checked against `jsonschema`'s format checkers
(the rfc3339 / rfc3986 / fqdn / isoduration validators it uses; a format without its checker is skipped)."""

from __future__ import annotations

import pytest

from llamay.constraints import ConstraintError, schema_to_gbnf
from llamay.constraints.json_formats import FORMATS, format_lengths
from tests.constraints.helpers import assert_sound

EXAMPLES = {
    "date": (["2024-02-28", "1999-12-31"], ["2024-13-01", "2024-02-30", "24-01-01"]),
    "time": (["12:30:00Z", "23:59:59.5+01:00"], ["24:00:00Z", "12:30"]),
    "date-time": (["2024-05-17T10:42:00Z"], ["2024-05-17 10:42:00", "2024-05-17T10:42:00"]),
    "uuid": (["3f2b8c1e-9d4a-4b6f-8e2a-1c5d7f9a0b3e"], ["3f2b8c1e9d4a4b6f8e2a1c5d7f9a0b3e-"]),
    "email": (["a.b@example.com"], ["ab.example.com"]),
    "hostname": (["api.example.com", "a-b"], ["-a.com", "a..b"]),
    "ipv4": (["192.168.0.1", "0.0.0.0"], ["256.1.1.1", "1.2.3"]),
    "ipv6": (["2001:db8:0:0:0:0:0:1"], ["2001:db8::g", "1.2.3.4"]),
    "uri": (
        [
            "https://example.com:8080/a/b",
            "http://x.org",
            "http://localhost:3000",
            "irc://u@h/c?x=1#f",
            "urn:a:b",
            "mailto:a@b.c",
            "http://[2001:db8:0:0:0:0:0:1]:80/",
            "https://json-schema.org/draft-07/schema#",
            "a:",
        ],
        ["example.com", "http//x", "1a:b", "http://a/%zz", "http://a b", "//x/y"],
    ),
    "uri-reference": (
        ["https://example.com/a", "//x/y", "../a/b?q#f", "", "a/b:c", "#frag"],
        ["1a:b/%g0", "a b", "http://a/%"],
    ),
    "duration": (["P1Y2M3DT4H5M6S", "PT1H", "P2W", "P3D"], ["P", "1Y", "PT"]),
    "regex": (["^[a-zA-Z0-9_]{3,16}$", "^[a-zA-Z0-9]+$", "a|b", "(?:x)*", "\\d{2}\\.[^a-z]"],
              ["*", "\\", "a{2,1}", "(a", "[a"]),
    "uri-template": (["http://example.com/resource/{name}", "/a{?x,y}", "{+path}/x", "{a.b:3}"],
                     ["http://example.com/resource/{", "{a b}", "}"]),
    "json-pointer": (["", "/a/b", "/a~1b/~0", "/"], ["a", "/~2"]),
    "relative-json-pointer": (["0#", "1/a", "2/"], ["#", "a", "-1"]),
    "iri": (["https://example.com/x"], ["example.com"]),
    "iri-reference": (["//x/y", "a/b"], ["a b"]),
    "idn-email": (["a@example.com"], ["ab"]),
    "idn-hostname": (["example.com"], ["-a.com"]),
}  # fmt: skip


def _checked(fmt: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    if fmt not in jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers:
        pytest.skip(f"jsonschema has no checker for {fmt} here")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_formats_generate_only_valid_strings(fmt):
    _checked(fmt)
    valid, invalid = EXAMPLES[fmt]
    assert_sound({"type": "string", "format": fmt}, valid=valid, invalid=invalid, n=80, budget=60)


def test_regex_format_strings_compile():
    """jsonschema checks the regex format with Python's `re`: every string the format writes compiles there."""
    import json
    import random
    import re

    from llamay.constraints import compile_grammar, schema_to_grammar
    from tests.constraints.helpers import sentences

    program = compile_grammar(schema_to_grammar({"type": "string", "format": "regex"}))
    for s in sentences(program, random.Random(0), 300, budget=40):
        re.compile(json.loads(s))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_formats_with_lengths_that_hold_them_all(fmt):
    _checked(fmt)
    short, long = format_lengths(fmt)
    bounds = {"minLength": short} if long is None else {"minLength": short, "maxLength": long}
    assert_sound({"type": "string", "format": fmt, **bounds}, n=20)
    shorter = {"type": "string", "format": fmt, "maxLength": 1000 if long is None else long - 1}
    if fmt == "regex":  # (nested groups: no finite automaton, so no exact product; unbounded: any maxLength)
        with pytest.raises(ConstraintError, match=f"together with format '{fmt}'"):
            schema_to_gbnf(shorter)
    elif shorter["maxLength"] < short:
        with pytest.raises(ConstraintError, match="no string matches"):
            schema_to_gbnf(shorter)
    else:  # (json_string_product.py: the format's automaton with a character count)
        assert_sound(shorter, n=20)


def test_unknown_formats_are_annotations():
    assert schema_to_gbnf({"type": "string", "format": "int32"}) == schema_to_gbnf({"type": "string"})
    with pytest.raises(ConstraintError, match="format 'int32' at # is not a keyword or format"):
        schema_to_gbnf({"type": "string", "format": "int32"}, refuse_unknown=True)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"pattern": "^[a-z]+$", "maxLength": 5}, ["a", "abcde"], ["abcdef", "", "aB"]),
        ({"pattern": "^[a-z]+$", "minLength": 1, "maxLength": 3}, ["abc"], ["abcd"]),
        ({"pattern": "^(ab)*c$", "maxLength": 6}, ["c", "ababc"], ["abababc", "abab"]),
        ({"pattern": "^[0-9]{3}-[0-9]{2,}$", "minLength": 6, "maxLength": 8}, ["123-45", "123-4567"], ["123-45678"]),
        ({"pattern": "^x{2,4}$", "minLength": 2, "maxLength": 10}, ["xx", "xxxx"], ["x", "xxxxx"]),
        # minLength beyond the pattern's shortest: too-short alternatives left out, repetitions made longer
        ({"pattern": "^$|^[a-z][a-z0-9A-Z]*$", "minLength": 1}, ["a", "aB1"], ["", "1a"]),
        ({"pattern": "^[a-z]*$", "minLength": 3, "maxLength": 5}, ["abc", "abcde"], ["ab", "abcdef"]),
        ({"pattern": "^x-[0-9]+$", "minLength": 6}, ["x-1234"], ["x-12"]),
        ({"pattern": "[0-9]", "minLength": 4}, ["1abc", "12345"], ["a1"]),
    ],
)
def test_patterns_with_lengths_keep_both(schema, valid, invalid):
    assert_sound({"type": "string", **schema}, valid=valid, invalid=invalid, n=60)
