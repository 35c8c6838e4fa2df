"""llama.cpp's tokenizer test vectors (test-tokenizer-0): every case of every vocabulary, encoded as the test
does (no BOS/EOS, special tokens not parsed); "smollm" runs on the tokenizer inside the SmolLM2 model."""

from __future__ import annotations

import pytest

from tests.tokenizer.vocabs import VECTOR_VOCABS, tokenizer, vector_cases

CASES = [(name, i) for name in VECTOR_VOCABS for i in range(len(vector_cases(name)))]


@pytest.mark.parametrize(("name", "index"), CASES, ids=[f"{n}-{i:02d}" for n, i in CASES])
def test_vector(name: str, index: int) -> None:
    text, expected = vector_cases(name)[index]
    assert tokenizer(name).encode(text, add_special=False, parse_special=False) == expected, repr(text)


@pytest.mark.parametrize("name", VECTOR_VOCABS)
def test_all_cases_present(name: str) -> None:
    assert len(vector_cases(name)) == 46


# (vocabulary, text) -> ids with add_special and parse_special on: BOS/EOS and CLS/SEP rules per model
SPECIAL = [
    ("gpt-2", "Hello<|endoftext|>", [15496, 50256]),  # gpt2: no BOS added
    ("llama-spm", "Hello</s>", [1, 15043, 2]),  # BOS added; "</s>" parsed, then no dummy prefix after nothing
    ("llama-spm", "</s>Hello", [1, 2, 15043]),  # text after a special token gets the dummy prefix again
    ("bert-bge", "Hello world", [101, 7592, 2088, 102]),  # [CLS] ... [SEP]
    ("smollm", "<|im_start|>user\nHi<|im_end|>", [1, 4093, 198, 26843, 2]),  # no BOS for SmolLM2
    ("phi-3", "<|user|>  Hi", [1, 32010, 6324]),  # phi-3 special tokens eat the spaces after them (rstrip)
]


@pytest.mark.parametrize(("name", "text", "ids"), SPECIAL, ids=[f"{n}:{t!r}" for n, t, _ in SPECIAL])
def test_add_and_parse_special(name: str, text: str, ids: list[int]) -> None:
    assert tokenizer(name).encode(text) == ids


def test_special_not_parsed_when_asked() -> None:
    tok = tokenizer("smollm")
    ids = tok.encode("<|im_end|>", parse_special=False)
    assert 2 not in ids
    assert tok.decode(ids) == "<|im_end|>"


# (vocabulary, bos, eos, end-of-generation texts)
FACTS = [
    ("gpt-2", 50256, 50256, {"<|endoftext|>"}),
    ("llama-spm", 1, 2, {"</s>"}),
    ("phi-3", 1, 32000, {"<|endoftext|>", "<|end|>", "</s>"}),
    ("smollm", 1, 2, {"<|endoftext|>", "<|im_end|>", "<reponame>"}),
]


@pytest.mark.parametrize(("name", "bos", "eos", "eog"), FACTS, ids=[f[0] for f in FACTS])
def test_special_ids(name: str, bos: int, eos: int, eog: set[str]) -> None:
    tok = tokenizer(name)
    assert (tok.bos_id, tok.eos_id) == (bos, eos)
    assert {tok.token_text(i) for i in tok.eos_ids} == eog
    assert all(tok.is_eog(i) for i in tok.eos_ids)
    assert tok.eos_id in tok.eos_ids
