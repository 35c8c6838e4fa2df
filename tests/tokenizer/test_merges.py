"""The fast paths of the merge loops against their references: scan vs heap (BPE and SentencePiece), chunked
SentencePiece vs merging the whole text at once, and long pieces that take the heap path."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay.tokenizer.bpe import merge_heap, merge_scan, parse_merges
from llamay.tokenizer.spm import SPACE
from llamay.tokenizer.unicode import byte_encode
from tests.tokenizer.vocabs import tokenizer

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
WORDY = st.text(st.sampled_from(list("aaabcdeeilnorstu ,.'\n0123456789é我😁")), max_size=120)


def test_parse_merges_splits_at_first_inner_space() -> None:
    assert parse_merges(["a b", "  c", "ab c"]) == {("a", "b"): 0, (" ", "c"): 1, ("ab", "c"): 2}


@SETTINGS
@given(WORDY)
def test_bpe_scan_equals_heap(text: str) -> None:
    ranks = tokenizer("gpt-2")._model.ranks
    word = byte_encode(text)
    assert merge_scan(list(word), ranks) == merge_heap(list(word), ranks)


@SETTINGS
@given(WORDY)
def test_spm_scan_equals_heap(text: str) -> None:
    model = tokenizer("llama-spm")._model
    chunk = SPACE + text.replace(" ", SPACE)
    assert model._merge_scan(list(chunk)) == model._merge_heap(list(chunk))


@SETTINGS
@given(WORDY)
def test_spm_chunking_equals_whole_text(text: str) -> None:
    model = tokenizer("llama-spm")._model
    escaped = SPACE + text.replace(" ", SPACE)
    whole = [model.token_id.get(s) for s in model._merge_heap(list(escaped))]
    if None not in whole:  # (byte fallback spelled out separately)
        assert model.encode(escaped) == whole


@pytest.mark.parametrize("name", ["gpt-2", "smollm"])
def test_long_piece(name: str) -> None:
    """A 5,000-character "word" (heap path) encodes as its 50 repeats do."""
    tok = tokenizer(name)
    assert tok.encode("ab" * 2500, add_special=False) == tok._model.encode_piece("ab" * 2500)
    assert tok.decode(tok.encode("ab" * 2500, add_special=False)) == "ab" * 2500
