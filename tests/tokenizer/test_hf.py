"""Whole vocabularies against Hugging Face `tokenizers` built from the same GGUF data (byte-level BPE with the
vocabulary's own pre-tokenizer; SentencePiece BPE with merges recovered from the scores), on llama.cpp's test
inputs and reproducible random text."""

from __future__ import annotations

import pytest

from tests.tokenizer.vocabs import all_vector_inputs, random_texts, tokenizer

pytestmark = pytest.mark.native_only

NAMES = ("gpt-2", "starcoder", "refact", "deepseek-llm", "smollm", "llama-spm", "phi-3", "stories260K")


@pytest.mark.parametrize("name", NAMES)
def test_matches_hf_tokenizers(name: str) -> None:
    pytest.importorskip("tokenizers")
    from tests.tokenizer.hf_reference import hf_byte_level_bpe, hf_sentencepiece_bpe

    tok = tokenizer(name)
    hf = hf_byte_level_bpe(tok.vocab) if tok.vocab.kind == "bpe" else hf_sentencepiece_bpe(tok.vocab)
    for text in all_vector_inputs() + random_texts(300, seed=4):
        if tok.vocab.pre.family.startswith("deepseek"):  # see test_pretokenize: llama.cpp's \s before literals
            text = "".join(c for c in text if c.isascii() or not c.isspace())
        assert tok.encode(text, add_special=False, parse_special=False) == hf.encode(text).ids, repr(text)
