"""Token masks: the trie walk (with its per-top-of-stack caches) gives exactly the tokens whose bytes the
automaton accepts one by one, on three vocabularies, along walks through several grammars."""

from __future__ import annotations

import random

import pytest

from llamay.constraints import (
    FINISHED,
    ConstraintError,
    ConstraintVocab,
    GrammarConstraint,
    compile_grammar,
    json_gbnf,
    lexicon_grammar,
    parse_gbnf,
    schema_to_gbnf,
)
from llamay.constraints.trie import TokenTrie
from tests.constraints.helpers import DATA, SCHEMAS

# strings with counted lengths: far from the bound (a chain of counter states longer than any token) and near it
BOUNDED = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 60},
        "tag": {"type": "string", "maxLength": 3},
        "email": {"type": "string", "format": "email", "maxLength": 200},
    },
}

GRAMMARS = {
    "json": json_gbnf("object"),
    "product": schema_to_gbnf(SCHEMAS["product"]),
    "k8s_container": schema_to_gbnf(SCHEMAS["k8s_container"], max_string_length=12),
    "chess": (DATA / "grammars" / "chess.gbnf").read_text(),
    "japanese": (DATA / "grammars" / "japanese.gbnf").read_text(),
    "lexicon": lexicon_grammar(["yes", "yesterday", "no", "maybe not"]).to_gbnf(),
    "bounded_strings": schema_to_gbnf(BOUNDED),
}


def constraint(gbnf: str, vocab: ConstraintVocab) -> GrammarConstraint:
    return GrammarConstraint(compile_grammar(parse_gbnf(gbnf)), vocab)


def brute_force(c: GrammarConstraint, st) -> list[int]:
    return [t for t in range(c.vocab.n_vocab) if c.accepts(st, t)]


@pytest.mark.parametrize("grammar", sorted(GRAMMARS))
def test_masks_equal_token_by_token_checks(grammar, vocab):
    c = constraint(GRAMMARS[grammar], vocab)
    rng = random.Random(grammar)
    steps = 12 if vocab.n_vocab > 10_000 else 40
    st = c.start()
    for _ in range(steps):
        mask = c.allowed(st)
        assert mask.tokens() == brute_force(c, st)
        choices = [t for t in mask.tokens() if t not in vocab.eog_ids]
        if not choices:
            break
        # prefer longer tokens now and then, to reach deeper states in fewer steps
        tok = max(rng.sample(choices, min(4, len(choices))), key=lambda t: len(vocab.token_bytes[t] or b""))
        st = c.advance(st, tok)


def test_chain_shortcut_changes_no_mask(vocab):
    """Subtrees accepted whole along counter chains (`MaskEngine.chains`) give the masks of the full walk, on
    states sampled along walks into long bounded strings, and spare most of the walk there."""
    on, off = (constraint(GRAMMARS["bounded_strings"], vocab) for _ in range(2))
    off.engine.chains = False
    rng = random.Random(7)
    for prefix in ['{"name":"', '{"name":"' + "x" * 55, '{"tag":"a', '{"email":"ab', '{"name":"ok","tag":"']:
        st_on, st_off = on.advance_bytes(on.start(), prefix.encode()), off.advance_bytes(off.start(), prefix.encode())
        for _ in range(6):
            mask = on.allowed(st_on)
            assert mask.tokens() == off.allowed(st_off).tokens()
            choices = [t for t in mask.tokens() if t not in vocab.eog_ids and (vocab.token_bytes[t] or b"")[:1] != b'"']
            if not choices:
                break
            tok = rng.choice(choices)
            st_on, st_off = on.advance(st_on, tok), off.advance(st_off, tok)
    if vocab.n_vocab > 10_000:  # a real vocabulary: long tokens make the counter chains matter
        assert on.engine.walked_nodes < off.engine.walked_nodes / 2


def test_eos_only_when_complete(vocab):
    c = constraint('root ::= "ab" | "abc"', vocab)
    eos = next(iter(vocab.eog_ids))
    st = c.start()
    assert eos not in c.allowed(st) and not c.accepts(st, eos)
    st = c.advance_bytes(st, b"ab")
    assert c.is_complete(st) and eos in c.allowed(st) and c.accepts(st, eos)
    done = c.advance(st, eos)
    assert done is FINISHED and len(c.allowed(done)) == 0 and c.is_complete(done)
    with pytest.raises(ConstraintError, match="not allowed"):
        c.advance(done, eos)


def test_masks_are_cached_per_state(vocab):
    c = constraint(GRAMMARS["json"], vocab)
    st = c.advance_bytes(c.start(), b'{"a": "')
    first = c.allowed(st)
    walked = c.engine.walked_nodes
    assert c.allowed(st).bits == first.bits and c.engine.walked_nodes == walked
    other = c.advance_bytes(c.start(), b'{"b": [1, "')  # string content again: reuses the cut's walk
    assert c.allowed(other).tokens() == brute_force(c, other)


def test_token_mask_packing():
    vocab = ConstraintVocab([b"a", b"b", None, b"ab", b"c"] + [b"x"] * 20, eog_ids=[2])
    c = constraint('root ::= "a" "b"?', vocab)
    mask = c.allowed(c.start())
    assert mask.tokens() == [0, 3] and len(mask) == 2 and 3 in mask and 1 not in mask
    assert mask.to_bytes() == bytes([0b1001, 0, 0, 0])
    after = c.allowed(c.advance(c.start(), 0))
    assert after.tokens() == [1, 2]  # "b", or EOS


def test_trie_layout():
    trie = TokenTrie([b"a", b"ab", b"b", None, b"ab", b""])
    assert trie.byte[1:] == [ord("a"), ord("b"), ord("b")]
    assert trie.depth == [0, 1, 2, 1] and trie.skip == [4, 3, 3, 4]
    assert trie.node_of(b"ab") == 2 and trie.node_of(b"ba") is None
    assert sorted(trie.tokens_below(1)) == [0, 1, 4]  # duplicate bytes share a node
    assert trie.height == [2, 1, 0, 0]  # the longest token below: "ab" from the root, "b" below "a"


LONG = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "maxLength": 4096},
        "code": {"type": "string", "minLength": 300, "maxLength": 340},
        "list": {"type": "array", "items": {"type": "integer"}, "maxItems": 100},
    },
}


def test_masks_of_counted_repetitions_far_from_and_near_their_bounds(vocab):
    """Counted strings share walks through canonical counts (`Automaton.canonical_count`): the masks still equal
    the token-by-token checks on both sides of every bound, for strings reached at many lengths."""
    c = constraint(schema_to_gbnf(LONG), vocab)
    rng = random.Random(3)
    prefixes = ['{"text":"' + "y" * n for n in (0, 1, 7, 100, 4000, 4060, 4080, 4090, 4095, 4096)]
    prefixes += ['{"code":"' + "z" * n for n in (0, 5, 250, 270, 290, 299, 300, 301, 320, 335, 339, 340)]
    prefixes += ['{"list":[' + ",".join(["1"] * n) for n in (0, 1, 60, 98, 99, 100)]
    # the longest token a string can hold: this far from a bound, counts stop being canonical
    plain = [b for b in vocab.token_bytes if b and all(32 <= x < 127 and x not in b'"\\' for x in b)]
    h = max(map(len, plain))
    prefixes += ['{"text":"' + "y" * (4096 - h + j) for j in range(-3, 4)]
    prefixes += ['{"code":"' + "y" * (300 - h + j) for j in range(-3, 4) if 300 - h + j >= 0]
    for prefix in prefixes:
        st = c.advance_bytes(c.start(), prefix.encode())
        assert st is not None, prefix
        for _ in range(2 if vocab.n_vocab > 10_000 else 4):
            mask = c.allowed(st)
            assert mask.tokens() == brute_force(c, st), prefix[-12:]
            choices = [t for t in mask.tokens() if t not in vocab.eog_ids]
            if not choices:
                break
            st = c.advance(st, rng.choice(choices))
