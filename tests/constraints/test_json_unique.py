"""uniqueItems (json_unique.py): enums and booleans exact, plain strings told apart by their first or last character
(a subset), checked against jsonschema; other items keep at most one."""

from __future__ import annotations

import importlib.util
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay.constraints import ConstraintError, schema_to_grammar
from tests.constraints.helpers import assert_sound, schema_automaton


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True},
         [[], ["a"], ["example", "migration"], ["", "x"], ["é", "a"], ["visual studio", "programming"]],
         [["a", "a"], ["", ""]]),
        ({"type": "array", "items": {"enum": ["a", "b", 1, 1.0]}, "uniqueItems": True, "minItems": 2},
         [["a", "b"], ["b", 1, "a"]], [["a", "a"], [1, 1.0], ["a"]]),
        ({"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}, [[True, False], []], [[True, True]]),
        ({"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 5}, "uniqueItems": True,
          "maxItems": 3}, [["ab", "cd"]], [["ab", "ab"], ["a"], ["ab", "cd", "ef", "gh"]]),
        ({"type": "array", "items": {"const": "x"}, "uniqueItems": True}, [[], ["x"]], [["x", "x"]]),
    ],
)  # fmt: skip
def test_unique_arrays(schema, valid, invalid):
    # 40 walks through one program: its lazy rules grow with every item of unique strings (the cache renews a
    # program past half of max_rules)
    assert_sound(schema, valid=valid, invalid=invalid, n=40, budget=80)


def test_strings_told_apart_by_their_first_or_last_character():
    """A subset: strings differing in their first or their last character (as written: no escape there) are
    different; two that share both could be equal, so the second is never written."""
    a = schema_automaton({"type": "array", "items": {"type": "string"}, "uniqueItems": True})
    for doc in (b'["tag1","tag2"]', b'["size","mode"]', b'["example_migration_1","example_migration_2"]',
                b'["a","ab","b"]', b'["\xc3\xa9x","\xc3\xa9y"]', b'["a\\nb","a\\nc"]'):  # fmt: skip
        assert a.accepts_bytes(doc), doc
    # the last two are valid, outside the subset
    for doc in (b'["tag1","tag1"]', b'["\\u0061","a"]', b'["ab\\n","a"]', b'["\\u0061b","\\u0061b"]',
                b'["a1b","a2b"]', b'["a","aba"]'):  # fmt: skip
        assert not a.accepts_bytes(doc), doc


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "array", "items": {"type": "string", "minLength": 3}, "uniqueItems": True, "minItems": 2},
         [["abc", "abd"], ["cfg1", "cfg2", "dfg1"]], [["abc", "abc"], ["ab", "abc"], ["abc"]]),
        ({"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": True},
         [["a", "b", ""], []], [["a", "a"], ["ab"]]),
        ({"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 2}, "uniqueItems": True,
          "minItems": 8}, [[f"{i}" for i in range(8)]], [["a"] * 8, [f"{i}" for i in range(7)]]),
    ],
)  # fmt: skip
def test_unique_strings_with_lengths_and_counts(schema, valid, invalid):
    assert_sound(schema, valid=valid, invalid=invalid, n=6, budget=400)


def test_a_long_array_of_unique_strings_is_accepted():
    """200 strings (pairs of first and last characters all different): the lazy rules grow per item only."""
    a = schema_automaton({"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 200})
    doc = [f"{chr(65 + i // 26)}item{i}{chr(97 + i % 26)}" for i in range(200)]
    assert len({(s[0], s[-1]) for s in doc}) == 200
    assert a.accepts_bytes(json.dumps(doc, separators=(",", ":")).encode())


def test_a_large_enum_keeps_its_items_unique():
    """An enum of 300 values (past the 64 once allowed): the lazy rule of each set written lists the rest."""
    words = [f"w{i:03d}" for i in range(300)]
    schema = {"type": "array", "items": {"enum": words}, "uniqueItems": True, "minItems": 2}
    assert_sound(schema, valid=[words[:5], words[::-60]], invalid=[["w001", "w001"], ["x"], ["w001"]], n=20)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "array", "uniqueItems": True, "items": {"type": "string", "format": "uri"}},
         [["https://example.com/resource1", "https://example.com/resource2"], []],
         [["https://a.b/x", "https://a.b/x"], ["not a uri"]]),
        ({"type": "array", "uniqueItems": True, "items": {"type": "string", "pattern": "^[a-z]+[0-9]$"},
          "maxItems": 3}, [["abc1", "abc2", "x1"]], [["abc1", "abc1"], ["abc"], ["a1", "b1", "c1", "d1"]]),
        # an unknown format is an annotation: plain strings
        ({"type": "array", "uniqueItems": True, "items": {"type": "string", "format": "URI"}},
         [["https://example.com/resource1", "https://example.com/resource2"]], [["a", "a"]]),
        # every match ends in "x": the pairs left decide, never a dead end
        ({"type": "array", "uniqueItems": True, "items": {"type": "string", "pattern": "^[ab]+x$"}, "minItems": 1},
         [["ax", "bx"], ["abx"]], [["ax", "ax"], []]),
    ],
)  # fmt: skip
def test_unique_strings_of_a_pattern_or_format(schema, valid, invalid):
    """Told apart by their first and last characters (a subset), the strings the pattern / format allows."""
    assert_sound(schema, valid=valid, invalid=invalid, n=40, budget=150)


def test_other_items_keep_at_most_one_and_more_are_refused():
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    a = schema_automaton(schema)
    assert a.accepts_bytes(b"[1]") and not a.accepts_bytes(b"[1,2]")
    with pytest.raises(ConstraintError, match="uniqueItems"):
        schema_to_grammar({**schema, "minItems": 2})


_OWNER = {"type": "object", "additionalProperties": False,
          "properties": {"name": {"type": "string"}, "email": {"type": "string"}}}  # fmt: skip
_KIND = {"type": "object", "properties": {"k": {"enum": ["a", "b", "c"]}, "v": {"type": "integer"}}, "required": ["k"]}


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "array", "items": _OWNER, "uniqueItems": True},
         [[{"name": "John Doe", "email": "j@x"}, {"name": "Mary Doe", "email": "j@x"}], [{"email": "x", "name": "y"}],
          [{"name": "a"}, {"name": "ab"}, {"name": ""}]],
         [[{"name": "J"}, {"name": "J"}], [{"name": "a", "x": 1}]]),
        ({"type": "array", "items": _KIND, "uniqueItems": True, "minItems": 2},
         [[{"k": "a", "v": 1}, {"k": "b", "v": 1}], [{"k": "c"}, {"k": "a"}, {"k": "b"}]],
         [[{"k": "a"}, {"k": "a"}], [{"k": "a"}], [{"k": "d"}, {"k": "a"}]]),
    ],
)  # fmt: skip
def test_unique_objects_told_apart_by_a_property_written_first(schema, valid, invalid):
    """Objects whose first member is the same property with different values are different (a subset: two items
    equal in it are refused, `[{"name": "J"}, {"name": "J", "email": "x"}]`); one item keeps any member order."""
    assert_sound(schema, valid=valid, invalid=invalid, n=30, budget=120)
    a = schema_automaton(schema)
    assert not a.accepts_bytes(b'[{"name":"J"},{"name":"J","email":"x"}]')


def test_unique_objects_with_a_long_shared_prefix_are_refused_not_accepted():
    """Names sharing their first and last characters cannot be told apart by the signature: refused, never
    accepted when equal."""
    a = schema_automaton({"type": "array", "items": _OWNER, "uniqueItems": True})
    name = "x" * 30
    same = json.dumps([{"name": name}, {"name": name}], separators=(",", ":")).encode()
    assert not a.accepts_bytes(same)
    assert a.accepts_bytes(json.dumps([{"name": name}, {"name": "y" + name}], separators=(",", ":")).encode())


def test_unique_objects_work_is_charged():
    """The key's walk is charged to the lazy rules' budget: a max_work below one walk's refuses the first item.
    A signature written is a bit tested (json_unique.UniqueSets), not a scan of those written, so the work of a
    rule stays the same as items are written: 30 pass the max_work that once refused them."""
    from llamay.constraints import ConstraintLimitError, ConstraintLimits, compile_grammar
    from llamay.constraints.automaton import Automaton

    schema = {"type": "array", "items": _OWNER, "uniqueItems": True}
    names = [f"{chr(97 + i % 26)}-{i // 26}" for i in range(30)]  # (first and last characters: 30 pairs)
    items = json.dumps([{"name": n} for n in names], separators=(",", ":")).encode()
    a = Automaton(compile_grammar(schema_to_grammar(schema, limits=ConstraintLimits(max_work=150))))
    with pytest.raises(ConstraintLimitError):
        a.accepts_bytes(items)
    a = Automaton(compile_grammar(schema_to_grammar(schema, limits=ConstraintLimits(max_work=600))))
    assert a.accepts_bytes(items)


def test_unique_objects_keyed_by_a_long_enum_or_a_last_character():
    """An enum key of many values is walked as a trie (a stack per value passed max_stacks: 2,461 values);
    plain-string keys sharing their first character are told apart by their last one."""
    names = [f"r_AntialiasingMode{i}" for i in range(3000)] + ["r_AntialiasingMode"]
    item = {"type": "object", "properties": {"name": {"enum": names}, "value": {"type": "string"}},
            "required": ["name", "value"]}  # fmt: skip
    a = schema_automaton({"type": "array", "items": item, "uniqueItems": True})
    doc = [{"name": "r_AntialiasingMode", "value": "1"}, {"name": "r_AntialiasingMode12", "value": "1"}]
    assert a.accepts_bytes(json.dumps(doc, separators=(",", ":")).encode())
    assert not a.accepts_bytes(json.dumps([doc[0], doc[0]], separators=(",", ":")).encode())
    links = [{"name": "https://example.com/link1"}, {"name": "https://example.com/link2"}]
    assert_sound({"type": "array", "items": _OWNER, "uniqueItems": True}, valid=[links],
                 invalid=[[links[0], links[0]]], n=10)  # fmt: skip


def test_a_large_string_enum_is_walked_as_a_trie():
    """A string enum whose rules would list too much text is walked as a trie (items were capped at 45)."""
    names = [f"css/feature-{i}" for i in range(700)]
    big = {"type": "array", "items": {"type": "string", "enum": names}, "uniqueItems": True}
    assert_sound(big, valid=[names[:60], names[::-1][:3]], invalid=[[names[1], names[1]], ["css/x"]], n=10)


_NAMED = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@pytest.mark.parametrize(
    ("item", "prefix"), [({"type": "string"}, '["ab","'), (_NAMED, '[{"name":"ab"},{"name":"')]
)  # fmt: skip
def test_masks_inside_unique_items_equal_token_by_token_checks(item, prefix, vocab):
    """A mask inside an item walks every token's prefix through the item's signature rules: told apart by
    24-character prefixes (one rule a prefix, each naming its ~94 successors), the first mask inside an item
    passed max_rules (100,000) on SmolLM2's vocabulary, and generation of such arrays failed."""
    from llamay.constraints import compile_grammar
    from llamay.constraints.constraint import GrammarConstraint

    c = GrammarConstraint(compile_grammar(schema_to_grammar({"type": "array", "items": item, "uniqueItems": True})),
                          vocab)  # fmt: skip
    st = c.start()
    for piece in (prefix, "a", "b"):
        st = c.advance_bytes(st, piece.encode())
        allowed = c.allowed(st).tokens()
        assert allowed == [t for t in range(vocab.n_vocab) if c.accepts(st, t)]
    assert c.advance_bytes(st, b'"') is None  # "ab" again
    assert c.advance_bytes(st, b'c"') is not None


def test_unique_objects_of_a_recursive_schema_compile():
    """A node whose unique `children` are nodes: the inner arrays refer to the node's rule (inlining its members
    in every array recursed to max_nesting: five SARIF schemas were refused)."""
    node = {"type": "object", "properties": {"name": {"type": "string"},
            "children": {"type": "array", "uniqueItems": True, "items": {"$ref": "#/$defs/node"}}}}  # fmt: skip
    schema = {"$defs": {"node": node}, "$ref": "#/$defs/node"}
    tree = {"name": "a", "children": [{"name": "b", "children": [{"name": "x"}]}, {"name": "c"}]}
    assert_sound(schema, valid=[tree], invalid=[{"name": "a", "children": [{"name": "b"}, {"name": "b"}]}], n=20)


# --- the language of unique strings, against a reference written from the docstring's definition -----------------

_PLAIN_SYMBOLS = {chr(b) for b in range(0x20, 0x7F)} - {'"', "\\"}  # (told apart one by one; beyond ASCII: one)
_ALPHABET = ["a", "b", "z", "1", " ", "é", "ß", "\u4e00", '"', "\\", "\n", "\x7f", "\U0001f600"]


def _symbol(ch: str) -> str | None:
    """A first / last character as told apart (None: not one, an escape or DEL)."""
    return ch if ch in _PLAIN_SYMBOLS else "non-ascii" if ord(ch) > 0x7F else None


def _in_subset(strings: list[str], low: int, high: int | None, lo: int, hi: int | None) -> bool:
    """Whether UniqueStrings accepts the array: lengths kept; every character one a JSON string writes as itself
    or as an escape (never DEL: json_any's `char`); the first and the last written as themselves; the (first,
    last) pairs (a one-character string's both its own, the empty string one more) all different."""
    seen = set()
    for s in strings:
        if len(s) < low or (high is not None and len(s) > high) or "\x7f" in s:
            return False
        pair = "" if not s else (_symbol(s[0]), _symbol(s[-1]))
        if pair in seen or (pair and None in pair):
            return False
        seen.add(pair)
    return lo <= len(strings) and (hi is None or len(strings) <= hi)


@st.composite
def _string_arrays(draw):
    """Short arrays of strings from a small alphabet, some items perturbed from another: a copy, or another
    sharing its first and last characters, so pairs collide often."""
    word = st.lists(st.sampled_from(_ALPHABET), max_size=4).map("".join)
    items = draw(st.lists(word, max_size=5))
    for _ in range(draw(st.integers(0, 2))):
        if items:
            s = draw(st.sampled_from(items))
            middle = draw(word)
            items.append(draw(st.sampled_from([s, s[:1] + middle + s[-1:] if len(s) > 1 else s + s])))
    return draw(st.permutations(items))


@pytest.mark.parametrize(("low", "high", "lo", "hi"), [(0, None, 0, None), (1, None, 1, 4), (2, 3, 0, None),
                                                        (0, 1, 0, None), (3, None, 2, None)])  # fmt: skip
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_unique_strings_accept_exactly_their_subset(low, high, lo, hi, data):
    """Accepted exactly when the reference says so (a property over generated and perturbed arrays), and what is
    accepted is valid (jsonschema, where it is installed: not under Pyodide, where the reference still runs)."""
    item = {"type": "string", "minLength": low, **({} if high is None else {"maxLength": high})}
    schema = {"type": "array", "items": item, "uniqueItems": True, "minItems": lo, **({} if hi is None else
              {"maxItems": hi})}  # fmt: skip
    a = _automaton(schema)
    strings = data.draw(_string_arrays())
    text = json.dumps(strings, ensure_ascii=False, separators=(",", ":"))
    expected = _in_subset(strings, low, high, lo, hi)
    assert a.accepts_bytes(text.encode()) == expected, text
    if expected and importlib.util.find_spec("jsonschema"):
        import jsonschema

        jsonschema.validate(strings, schema)


_AUTOMATA: dict[str, object] = {}


def _automaton(schema: dict):
    """One automaton per schema for all examples (its lazy rules grow with the sets visited)."""
    key = json.dumps(schema, sort_keys=True)
    if key not in _AUTOMATA:
        _AUTOMATA[key] = schema_automaton(schema)
    return _AUTOMATA[key]
