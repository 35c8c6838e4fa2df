"""Vocabularies for constraint tests: stories260K (512 SentencePiece tokens, in the fixtures), SmolLM2
(49,152 byte-level BPE tokens, registry model: skipped when absent), and a synthetic byte-level vocabulary
with tokens that split UTF-8 characters."""

from __future__ import annotations

import random

import pytest

from llamay.constraints import ConstraintVocab
from tests.tokenizer.vocabs import tokenizer

VOCABS = ("synthetic", "stories260K", "smollm2")


def synthetic_vocab() -> ConstraintVocab:
    """All 256 single bytes, then pieces of JSON-ish text and of multi-byte characters (some split
    mid-character), then an end-of-generation token."""
    rng = random.Random(0)
    pieces = [bytes([b]) for b in range(256)]
    words = ['{"', '":', '",', '"}', "true", "false", "null", " ", "\n", "  ", '"name"', "123", "-1", ".5",
             "e+", "[{", "}]", ", ", "é", "😀", "ab", "abc", "\\n", '\\"', "\\u00", "Lily", " the"]  # fmt: skip
    pieces += [w.encode() for w in words]
    pieces += ["é".encode()[:1], "😀".encode()[:2], "😀".encode()[1:], "ü".encode() + b"x"]
    for _ in range(200):
        pieces.append(bytes(rng.choice(b'abcxyz{}[]":,0123456789 .-') for _ in range(rng.randint(2, 6))))
    pieces.append(None)  # EOS (no text)
    return ConstraintVocab(pieces, eog_ids=[len(pieces) - 1])


@pytest.fixture(scope="session", params=VOCABS)
def vocab(request) -> ConstraintVocab:
    return load_vocab(request.param)


def load_vocab(name: str) -> ConstraintVocab:
    if name == "synthetic":
        return synthetic_vocab()
    return ConstraintVocab.for_tokenizer(tokenizer(name))
