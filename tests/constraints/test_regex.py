"""JSON Schema `pattern`s: strings containing a match (an unanchored side allows any text), written as JSON
string contents (escapes included); every generated string is checked against Python's `re.search` (which
agrees with ECMA-262 on these patterns), and, anchored (llama.cpp's choice), against `re.fullmatch`."""

from __future__ import annotations

import json
import random
import re

import pytest

from llamay.constraints import ConstraintError, compile_grammar, schema_to_gbnf, schema_to_grammar
from llamay.constraints.regex import parse_pattern
from tests.constraints.helpers import assert_sound, schema_automaton, sentences

PATTERNS = [
    # (pattern, strings that match, strings that do not)
    ("^[a-z]+$", ["abc", "z"], ["", "aB", "a1"]),
    ("^\\d{3}-\\d{4}$", ["555-1234"], ["5551234", "55-1234"]),
    ("^(ab|cd)+e?$", ["ab", "cdabe", "abcd"], ["", "abc", "e"]),
    ("^[^\\s]+$", ["no-spaces", "é"], ["a b", "tab\there", ""]),
    ("^\\w+@\\w+\\.com$", ["a_1@b.com"], ["a@b.org", "@b.com"]),
    ('^say "hi"\\\\$', ['say "hi"\\'], ["say hi"]),
    ("^a.c$", ["abc", 'a"c', "a\\c", "aéc", "a\tc"], ["a\nc", "ac"]),
    ("^[A-Fa-f0-9]{2}(:[A-Fa-f0-9]{2}){5}$", ["00:1A:2b:3C:4d:5E"], ["00:1A:2b:3C:4d"]),
    ("^(?:x|y)(?<tail>z*)$", ["x", "yzz"], ["xy", "z"]),
    ("^[\\D]{2}$", ["ab", "é!"], ["a1", "12"]),
    ("^\\u00e9\\x41\\t$", ["éA\t"], ["éA"]),
    ("^a{2,}?b{0,2}$", ["aa", "aaab", "aabb"], ["a", "aabbb"]),
    ("^[-+]?[0-9]*\\.?[0-9]+$", ["-1.5", "3", ".5", "+10"], ["1.", "--1"]),
    ("^\\[\\]\\{\\}\\(\\)\\|\\+\\*\\?\\.\\^\\$$", ["[]{}()|+*?.^$"], ["[]"]),
    ("cat", ["cat", "concatenate", 'a "cat"'], ["dog", "ca t"]),  # unanchored: any text around a match
    ("^x{3}|y$", ["xxx", "y", "xxxy", "ay"], ["xx", "ya"]),
]


def string_schema(pattern: str) -> dict:
    return {"type": "string", "pattern": pattern}


@pytest.mark.parametrize(("pattern", "yes", "no"), PATTERNS, ids=[p[0] for p in PATTERNS])
def test_pattern_strings(pattern, yes, no):
    a = schema_automaton(string_schema(pattern))
    assert [s for s in yes if not a.accepts_bytes(json.dumps(s, ensure_ascii=False).encode())] == []
    assert [s for s in no if a.accepts_bytes(json.dumps(s, ensure_ascii=False).encode())] == []


def python_pattern(pattern: str) -> str | None:
    """The same pattern for Python's `re`, or None where the two disagree (Python's \\s also has \\x1c-\\x1f)."""
    if "\\s" in pattern:
        return None
    return pattern.replace("(?<", "(?P<")


@pytest.mark.parametrize(("pattern", "yes", "no"), PATTERNS, ids=[p[0] for p in PATTERNS])
def test_generated_strings_are_json_and_match(pattern, yes, no):
    prog = compile_grammar(schema_to_grammar(string_schema(pattern)))
    py = python_pattern(pattern)
    for s in sentences(prog, random.Random(pattern), 60, budget=30):
        text = json.loads(s)
        assert py is None or re.search(py, text), (pattern, s)
    whole = compile_grammar(schema_to_grammar(string_schema(pattern), anchored_patterns=True))
    for s in sentences(whole, random.Random(pattern), 60, budget=30):
        text = json.loads(s)
        assert py is None or re.fullmatch(py, text) or re.fullmatch(py.lstrip("^").rstrip("$"), text), (pattern, s)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("^(?=a)a$", "lookaround"),
        ("^(a)\\1$", "backreferences"),
        ("^\\bword$", "word boundaries"),
        ("^a$b", "anchor"),
        ("^\\p{L}+$", "property escapes"),
        ("^(ab", "expecting ')'"),
        ("^[ab$", "unterminated"),
        ("^*a$", "nothing to repeat"),
        ("^a{3,1}$", "maximum below"),
    ],
)
def test_unsupported_or_malformed_patterns(pattern, message):
    with pytest.raises(ConstraintError, match=re.escape(message)) as e:
        schema_to_gbnf(string_schema(pattern))
    assert "#/pattern" in str(e.value)


NULLABLE_STARS = ["^([a-c]*)*$", "^(a?b*)+x$", "^(|a)*$", "^(a{0,3}){2,}$", "^(ab|c*)*d$", "^(()*)*$"]


@pytest.mark.parametrize("pattern", NULLABLE_STARS)
def test_a_nullable_item_repeated_forever_is_no_left_recursion(pattern):
    """`([\\w.-]*)*` (seen in a real URL pattern) was refused as left recursion: same language as Python's re."""
    a = schema_automaton(string_schema(pattern))
    rng = random.Random(pattern)
    texts = {"".join(rng.choice("abcdx") for _ in range(rng.randrange(7))) for _ in range(400)}
    wrong = [t for t in texts if a.accepts_bytes(json.dumps(t).encode()) != bool(re.search(pattern, t))]
    assert wrong == []


def test_class_escapes_hold_in_ecma_and_python_meanings():
    """LOW sets: every character matches the escape in ECMA-262 and in Python's re; outside HIGH: in neither."""
    import re

    from llamay.constraints.regex_classes import CLASS_ESCAPES

    ecma = {
        "d": lambda c: "0" <= c <= "9",
        "w": lambda c: c.isascii() and (c.isalnum() or c == "_"),
        "s": lambda c: c in "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" or "\u2000" <= c <= "\u200a",
    }
    for letter, (low, high) in CLASS_ESCAPES.items():
        base = letter.lower()
        python = re.compile(f"\\{letter}")

        def means(c, base=base, letter=letter, python=python):  # (ECMA's answer, Python's answer)
            e = ecma[base](c)
            return (e if letter == base else not e), python.match(c) is not None

        def inside(c, ranges):
            return any(lo <= ord(c) <= hi for lo, hi in ranges)

        for cp in [*range(0x3000), *range(0xFE00, 0x10000), *range(0x10000, 0x110000, 97)]:
            if 0xD800 <= cp <= 0xDFFF:
                continue
            c = chr(cp)
            e, p = means(c)
            assert not inside(c, low) or (e and p), (letter, hex(cp))
            assert inside(c, high) or not (e or p), (letter, hex(cp))


@pytest.mark.parametrize(
    ("pattern", "valid", "invalid"),
    [
        ("^[^\\s]+$", ["ab", "é"], ["a\u001cb", "a b"]),
        ("^\\S+$", ["ab"], ["\u001c", "\u0085x"]),
        ("^\\D+$", ["ab"], ["1", "\u0663"]),
        ("^\\W+$", ["-+", "©"], ["a", "é", "\u00b2"]),
        ("^[\\w-]+$", ["a-b_1"], [" ", "a.b"]),
        ("^$|(^(?:\\S+\\s+){0,3}\\S+$)", ["", "a b c", "ab"], [" a", "a b c d e"]),
    ],
)
def test_class_escapes_are_sound_in_python_and_ecma(pattern, valid, invalid):
    """Sentences validate with jsonschema (Python's re) whatever the escape; characters either meaning rejects are
    never generated."""
    assert_sound({"type": "string", "pattern": pattern}, valid=valid, invalid=invalid, n=80, budget=60)
    if "s" in pattern.lower():  # U+001C (Python's space) and U+FEFF (ECMA's): generated for neither meaning
        a = schema_automaton({"type": "string", "pattern": pattern})
        assert not any(a.accepts_bytes(json.dumps(f"a{c}b").encode()) for c in ("\u001c", "\ufeff"))


def test_word_alternations_are_factored_into_a_trie():
    """200 words in an unanchored alternation: a state holds the branches sharing the prefix so far, not one per
    word per start position (a real schema's zone list went past max_stacks)."""
    words = [f"zone{i}-az{j}" for i in range(50) for j in range(4)]
    pattern = "(" + "|".join(words) + ")"
    assert_sound({"type": "string", "pattern": pattern}, valid=["zone7-az2", "x zone49-az3 y"], invalid=["zone", "az1"])
    a = schema_automaton({"type": "string", "pattern": pattern})
    assert a.accepts_bytes(json.dumps("zone1-az1" * 30).encode())


def test_a_word_list_as_deep_as_it_is_long_is_no_recursion_error():
    """Words "b", "bb", ..., one per length: a trie branching at every letter (1,100 of them raised
    RecursionError); past 32 branchings the words stay plain alternatives, matched exactly."""
    words = ["b" * i for i in range(1, 1100)]
    node = parse_pattern("^(" + "|".join(words) + ")$", search=True)
    assert node is not None
    assert_sound(string_schema("^(" + "|".join(words[:60]) + ")$"), valid=["b", "b" * 60], invalid=["", "b" * 61])


def test_groups_tried_as_top_level_branches_are_read_again_a_bounded_number_of_times(monkeypatch):
    """60 nested groups around 5,000 letters: each level was tried as a top-level branch, then read again, 61
    readings (45 s at 100,000 letters); now at most 3 levels are tried and the re-reading is charged. An
    anchored group is still a top-level branch."""
    atoms = _counted(monkeypatch, "atom")
    parse_pattern("(" * 60 + "a" * 5000 + ")" * 60 + "b", search=True)
    assert atoms[0] <= 5 * 5061
    assert_sound(string_schema("^a$|(^b$)"), valid=["a", "b"], invalid=["xb", "ab"])


def test_a_pattern_met_again_is_parsed_once_and_charged_each_time(monkeypatch):
    """A compilation's memo keeps a pattern's nodes (a pattern under a shared definition is met at each use):
    read once, but the Budget is charged at each use as if it were read again (work stays bounded the same)."""
    from llamay.constraints.limits import Budget

    pattern = "^(" + "|".join(f"zone{i}-az{j}" for i in range(30) for j in range(3)) + ")[a-z]*$"
    plain, memoized, memo = Budget(), Budget(), {}
    first = [parse_pattern(pattern, limits=plain, search=True) for _ in range(3)]
    reads = _counted(monkeypatch, "top")
    again = [parse_pattern(pattern, limits=memoized, search=True, memo=memo) for _ in range(3)]
    assert reads[0] == 1 and again == first and memoized.work == plain.work > 3 * len(pattern)
    props = {f"p{i}": {"$ref": "#/$defs/z"} for i in range(5)} | {"q": {"type": "string", "pattern": pattern}}
    schema = {"$defs": {"z": {"type": "string", "pattern": pattern}}, "type": "object", "properties": props}
    reads[0] = 0
    assert_sound(schema, valid=[{"p1": "zone29-az2", "q": "zone0-az0abc"}], invalid=[{"q": "zone30-az0"}])
    assert reads[0] == 1


def _counted(monkeypatch, method: str) -> list[int]:
    """The parser's `method` counted from now on: [calls so far]."""
    from llamay.constraints import regex

    calls, inner = [0], getattr(regex._Regex, method)

    def counting(self):
        calls[0] += 1
        return inner(self)

    monkeypatch.setattr(regex._Regex, method, counting)
    return calls
