"""decode(encode(s)) == s for arbitrary Unicode, on every vocabulary that can round-trip.

Byte-level BPE round-trips any text whose UTF-8 bytes all have a byte token (starcoder, refact and SmolLM2 lack a
few, e.g. 0xF1: a character starting with such a byte is dropped, as llama.cpp drops it). SentencePiece round-trips
everything but "▁" itself (it stands for the space). WordPiece lower-cases and drops spaces: not a round trip.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay.tokenizer.unicode import BYTE_TO_CHAR
from tests.tokenizer.vocabs import tokenizer

ROUND_TRIP = ("gpt-2", "starcoder", "refact", "deepseek-llm", "smollm", "llama-spm", "phi-3", "stories260K", "gemma3")


def _alphabet(name: str) -> st.SearchStrategy[str]:
    tok = tokenizer(name)
    if tok.vocab.kind == "spm":
        return st.characters(exclude_categories=("Cs",), exclude_characters="\u2581")
    have = tok.vocab.token_to_id
    missing = {b for b in range(256) if BYTE_TO_CHAR[b] not in have}
    return st.characters(exclude_categories=("Cs",)).filter(lambda c: not missing & set(c.encode()))


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_round_trip(name: str) -> None:
    tok = tokenizer(name)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.text(_alphabet(name), max_size=60))
    def check(text: str) -> None:
        ids = tok.encode(text, parse_special=False)
        assert tok.decode(ids) == text
        assert tok.decode(tok.encode(text, add_special=False, parse_special=False)) == text

    check()


@pytest.mark.parametrize(
    ("name", "rendered"),
    [
        ("smollm", "Hi<|im_end|> there"),
        ("llama-spm", "Hi</s>  there"),  # text after a special token gets SentencePiece's dummy prefix again
    ],
)
def test_special_tokens_render_only_when_asked(name: str, rendered: str) -> None:
    tok = tokenizer(name)
    special = tok.token_text(tok.eos_id)
    ids = tok.encode(f"Hi{special} there", add_special=False)
    assert tok.eos_id in ids
    assert tok.decode(ids, special=True) == rendered
    assert tok.decode(ids) == rendered.replace(special, "")


def test_unrepresentable_bytes_are_dropped_like_llama_cpp() -> None:
    tok = tokenizer("starcoder")
    assert tok.decode(tok.encode("a\U00040000b", add_special=False)) != "a\U00040000b"


@pytest.mark.parametrize("name", ["smollm", "llama-spm", "bert-bge"])
def test_lone_surrogates_do_not_break_encoding(name: str) -> None:
    tok = tokenizer(name)
    assert tok.encode("a\ud800b", add_special=False) == tok.encode("a\ufffdb", add_special=False)
