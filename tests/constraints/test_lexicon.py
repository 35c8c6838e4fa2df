"""Lexicons: one word or phrase from a closed list (or several joined by a separator)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamay.constraints import ConstraintError, compile_grammar, constraint_from_request, lexicon_grammar
from llamay.constraints.automaton import Automaton
from llamay.constraints.grammar import EMPTY, Lit, Ref, alt, seq
from llamay.constraints.lexicon import word_trie
from tests.constraints.conftest import synthetic_vocab


def lexicon(*args, **kw) -> Automaton:
    return Automaton(compile_grammar(lexicon_grammar(*args, **kw)))


def test_one_word_of_the_list():
    a = lexicon(["yes", "yesterday", "no", "maybe not", "naïve"])
    for w in ("yes", "yesterday", "no", "maybe not", "naïve"):
        assert a.accepts_bytes(w.encode())
    for w in ("", "ye", "yesterda", "nope", "maybe", "yes no", "YES"):
        assert not a.accepts_bytes(w.encode())


def test_shared_prefixes_keep_few_stacks():
    words = [f"item{i:04d}" for i in range(2000)]
    a = lexicon(words)
    st = a.push_bytes(a.initial, b"item0")
    assert len(st.stacks) <= 10
    assert a.accepts_bytes(b"item1999") and not a.accepts_bytes(b"item2000")


def test_several_words_with_a_separator():
    a = lexicon(["red", "green", "blue"], separator=", ", min_count=2, max_count=3)
    assert a.accepts_bytes(b"red, blue") and a.accepts_bytes(b"blue, blue, green")
    assert not a.accepts_bytes(b"red") and not a.accepts_bytes(b"red, green, blue, red")
    assert not a.accepts_bytes(b"red,blue")


@pytest.mark.parametrize(
    "kw",
    [{"words": []}, {"words": ["a", ""]}, {"words": ["a"], "max_count": 2}, {"words": ["a"], "min_count": 0}],
)
def test_bad_lexicons(kw):
    with pytest.raises(ConstraintError):
        lexicon_grammar(**kw)


def test_lexicon_from_a_request():
    vocab = synthetic_vocab()
    c = constraint_from_request({"lexicon": ["true", "false"]}, vocab)
    st = c.start()
    allowed = {vocab.token_bytes[t] for t in c.allowed(st).tokens()}
    assert b"true" in allowed and b"false" in allowed and b"null" not in allowed


def reference_trie(words: list[str], new_name) -> dict:
    """word_trie as first written (a dict per trie node, walked character by character): the reference."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = True
    rules: dict = {}
    todo = [(trie, new_name())]
    while todo:
        node, name = todo.pop()
        options = [EMPTY] if "" in node else []
        below = []
        for ch in sorted(k for k in node if k):
            text, sub = ch, node[ch]
            while len(sub) == 1 and "" not in sub:
                (nxt,) = sub
                text += nxt
                sub = sub[nxt]
            if set(sub) == {""}:
                options.append(Lit(text))
            else:
                child = new_name()
                below.append((sub, child))
                options.append(seq(Lit(text), Ref(child)))
        rules[name] = alt(*options)
        todo.extend(reversed(below))
    return rules


def _numbered():
    names = iter(range(10**9))
    return lambda: f"r{next(names)}"


# (few letters: long shared prefixes, words that are prefixes of others, runs of one character; the last code
# point, which no character follows: word_trie's run search)
@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet='ab"é\U0001f600\U0010ffff', min_size=1, max_size=8), min_size=1, max_size=30,
                unique=True))  # fmt: skip
def test_word_trie_is_the_character_trie(words):
    # (the same rules, names and order: names are given in the order asked for)
    assert list(word_trie(words, _numbered()).items()) == list(reference_trie(words, _numbered()).items())
