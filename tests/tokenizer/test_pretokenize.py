"""Pre-tokenizers: the registry, the regex translation, and every family against Hugging Face `tokenizers`
(Oniguruma, real Unicode categories) running the same regexes, on llama.cpp's test inputs and random text."""

from __future__ import annotations

import dataclasses

import pytest

from llamay.errors import ModelError
from llamay.tokenizer import PRE_TOKENIZERS, Splitter, Tokenizer, pre_tokenizer
from llamay.tokenizer.pretokenize import FAMILIES, translate_pattern
from llamay.tokenizer.unicode import collapse
from tests.tokenizer.vocabs import all_vector_inputs, random_texts, tokenizer

SAMPLE = "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～\n\n   \t x³ ½ — Ñandú's NASA-BASED  "


@pytest.mark.parametrize("name", sorted(PRE_TOKENIZERS))
def test_every_name_splits_losslessly(name: str) -> None:
    pieces = Splitter(pre_tokenizer(name).patterns).split(SAMPLE)
    assert "".join(pieces) == SAMPLE
    assert all(pieces)


def test_aliases_share_a_family() -> None:
    assert pre_tokenizer("llama-bpe").family == pre_tokenizer("llama3").family == "llama3"
    assert pre_tokenizer("smollm").family == pre_tokenizer("starcoder").family
    assert not pre_tokenizer("smollm").clean_spaces and pre_tokenizer("starcoder").clean_spaces
    assert pre_tokenizer("llama3").ignore_merges and pre_tokenizer("llama3").add_bos
    assert pre_tokenizer(None) == pre_tokenizer("") == PRE_TOKENIZERS["default"]


def test_unknown_pre_tokenizer_is_named() -> None:
    with pytest.raises(ModelError, match="'no-such-pre'"):
        pre_tokenizer("no-such-pre")


@pytest.mark.parametrize(
    ("pattern", "python", "collapsed"),
    [
        (r" ?\p{L}+", " ?[\xd2A-Za-z]+", True),
        (r"[^\s\p{L}\p{N}]", "[^\\s\xd2A-Za-z\xd10-9]", True),
        (r"\p{Lu}", "[\xd2A-Za-z]", True),  # llama.cpp reads every letter sub-category as \p{L}
        (r"((?=[a])([^a-z]))*", r"(?:(?=[a])(?:[^a-z]))*", False),
        (r" ?[^(\s|.,)]+", r" ?[^(\s|.,)]+", False),  # parentheses in a class are literal
        (r"\s+$", r"\s+\Z", False),
        (r"[\$\^]", r"[\$\^]", False),
    ],
)
def test_translate_pattern(pattern: str, python: str, collapsed: bool) -> None:
    assert translate_pattern(pattern) == (python, collapsed)


def test_collapse_keeps_offsets() -> None:
    text = "aé1½ \u3000我~\u0301\x85\ue000"
    out = collapse(text)
    assert len(out) == len(text)
    assert out == "a\xd21\xd1 \x0b\xd2~\xd4\x0b\xd0"


def test_pieces_are_slices_of_the_original() -> None:
    splitter = Splitter(pre_tokenizer("llama3").patterns)
    text = "Ünïcödé wörds — and ｆｕｌｌｗｉｄｔｈ 123456"
    assert splitter.split(text) == [text[a:b] for a, b in splitter.spans(text)]
    assert "".join(splitter.split(text)) == text


# Where llama.cpp deliberately differs from Oniguruma we follow llama.cpp, and filter the input here:
# - it treats \p{Lu}, \p{Ll}, ... as \p{L} (so "bHello" stays one piece): those families are not compared;
# - before a regex without categories it replaces non-ASCII whitespace by 0x0B, so a literal range such as
#   deepseek's [ࠀ-一] no longer matches U+3000;
# - its ASCII member list of \p{S} lacks "~".
def _no_wide_space(text: str) -> str:
    return "".join(c for c in text if c.isascii() or not c.isspace())


LETTER_CASE_FAMILIES = {"youtu", "tiny-aya"}
FILTERS = {
    "deepseek-llm": _no_wide_space,
    "deepseek-coder": _no_wide_space,
    "deepseek-v3": lambda t: t.replace("~", ""),
    "spark2_5": lambda t: t.replace("~", ""),
}


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return all_vector_inputs() + random_texts(400, seed=1)


@pytest.mark.native_only
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_matches_hf(family: str, corpus: list[str]) -> None:
    pytest.importorskip("tokenizers")
    from tests.tokenizer.hf_reference import hf_split, hf_splitter

    if family in LETTER_CASE_FAMILIES:
        pytest.skip("llama.cpp reads \\p{Lu}/\\p{Ll} as \\p{L}; Oniguruma does not")

    ours, hf = Splitter(FAMILIES[family]), hf_splitter(FAMILIES[family])
    keep = FILTERS.get(family, lambda t: t)
    bad = [t for t in map(keep, corpus) if ours.split(t) != hf_split(hf, t)]
    assert not bad, f"{len(bad)} differ, first {bad[0]!r}: {ours.split(bad[0])} != {hf_split(hf, bad[0])}"


PRE_NAMES_ON_GPT2 = ["gpt-2", "llama3", "qwen2", "gpt-4o", "tekken", "deepseek-v3", "falcon", "poro-chat"]
PRE_NAMES_ON_GPT2 += ["chatglm-bpe", "viking", "jais", "mpt", "dbrx", "command-r", "stablelm2", "olmo", "seed-coder"]


@pytest.mark.native_only
@pytest.mark.parametrize("name", PRE_NAMES_ON_GPT2)
def test_family_on_gpt2_vocab_matches_hf(name: str) -> None:
    """A whole BPE encode with each pre-tokenizer (the gpt-2 vocabulary stands in for the model's own)."""
    pytest.importorskip("tokenizers")
    from tests.tokenizer.hf_reference import hf_byte_level_bpe

    base = tokenizer("gpt-2").vocab
    vocab = dataclasses.replace(base, pre=pre_tokenizer(name), pre_name=name)
    tok, hf = Tokenizer(vocab), hf_byte_level_bpe(vocab)
    keep = FILTERS.get(pre_tokenizer(name).family, lambda t: t)
    for text in map(keep, all_vector_inputs() + random_texts(150, seed=2)):
        assert tok.encode(text, add_special=False, parse_special=False) == hf.encode(text).ids, repr(text)
