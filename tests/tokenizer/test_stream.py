"""The streaming detokenizer never emits a broken character: text split at any byte boundary comes out whole."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay.tokenizer import StreamDecoder
from tests.tokenizer.vocabs import tokenizer

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


def _stream(chunks: list[bytes]) -> list[str]:
    dec = StreamDecoder(chunks.__getitem__)
    return [dec.push(i) for i in range(len(chunks))] + [dec.flush()]


@SETTINGS
@given(TEXT, st.lists(st.integers(0, 200), max_size=12))
def test_any_byte_split(text: str, cuts: list[int]) -> None:
    data = text.encode("utf-8")
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    out = _stream(chunks)
    assert "".join(out) == text
    assert all("\ufffd" not in piece for piece in out) or "\ufffd" in text


def test_every_single_byte_boundary() -> None:
    text = "a😁é我\U0010ffff"
    data = text.encode()
    for cut in range(len(data) + 1):
        assert "".join(_stream([data[:cut], data[cut:]])) == text
    out = _stream([bytes([b]) for b in data])
    assert "".join(out) == text and "\ufffd" not in "".join(out)


def test_invalid_bytes_come_out_at_once_and_incomplete_at_flush() -> None:
    dec = StreamDecoder([b"\xff", b"ok", b"\xe6\x88"].__getitem__)
    assert dec.push(0) == "\ufffd"
    assert dec.push(1) == "ok"
    assert dec.push(2) == "" and dec.pending
    assert dec.flush() == "\ufffd"
    assert not dec.pending


@pytest.mark.parametrize("name", ["smollm", "llama-spm", "gemma3", "gpt-2"])
@SETTINGS
@given(text=TEXT)
def test_token_stream_equals_decode(name: str, text: str) -> None:
    tok = tokenizer(name)
    if tok.vocab.kind == "spm":
        text = text.replace("\u2581", " ")
    ids = tok.encode(text, add_special=False, parse_special=False)
    dec = tok.detokenizer(strip_leading_space=True)
    out = [dec.push(i) for i in ids] + [dec.flush()]
    assert "".join(out) == tok.decode(ids)
    if tok.decode(ids) == text:  # (not so when the vocabulary lacks a byte of the text)
        assert not any("\ufffd" in piece for piece in out) or "\ufffd" in text


def test_stream_renders_special_tokens_when_asked() -> None:
    tok = tokenizer("smollm")
    ids = tok.encode("<|im_start|>assistant\nHi<|im_end|>", add_special=False)
    assert tok.detokenizer().push_many(ids) == "assistant\nHi"
    assert tok.detokenizer(special=True).push_many(ids) == "<|im_start|>assistant\nHi<|im_end|>"
