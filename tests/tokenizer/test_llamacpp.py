"""Against llama.cpp itself (xllamacpp) on real models: reproducible random text with special tokens mixed in,
every combination of add_special/parse_special, the pieces of the ids, and the chat template."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.tokenizer.vocabs import random_texts, tokenizer, vocab_path

pytestmark = pytest.mark.native_only

CASES_PER_MODEL = 300


@pytest.fixture(scope="module", params=["smollm2", "gemma3", "stories260K", "minilm"])
def model(request: pytest.FixtureRequest) -> Iterator[tuple[str, object]]:
    pytest.importorskip("xllamacpp")
    from tests.tokenizer.llamacpp_reference import LlamaCppServer

    name = request.param
    server = LlamaCppServer(vocab_path(name), embedding=name == "minilm")
    yield name, server
    server.close()


def test_tokenize_matches(model: tuple[str, object]) -> None:
    name, server = model
    tok = tokenizer(name)
    specials = (*(tok.token_text(i) for i in tok.vocab.special_ids[:40]), "<|im_start|>", "<s>", "</s>")
    flags = itertools.cycle(itertools.product((False, True), repeat=2))
    bad = []
    for text, (add, parse) in zip(random_texts(CASES_PER_MODEL, seed=7, specials=specials), flags, strict=False):
        if tok.encode(text, add, parse) != server.tokenize(text, add, parse):
            bad.append((text, add, parse))
    assert not bad, f"{len(bad)} differ, first {bad[0]!r}"


def test_pieces_match(model: tuple[str, object]) -> None:
    name, server = model
    tok = tokenizer(name)
    for text in random_texts(60, seed=8):
        ids = tok.encode(text)
        ours = b"".join(tok.token_bytes(i) for i in ids)
        try:
            expected = ours.decode("utf-8")
        except UnicodeDecodeError:
            continue  # the server cannot return broken UTF-8 as JSON
        assert server.pieces(ids) == expected


CONVERSATIONS = [
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Name three colours."},
    ],
    [{"role": "user", "content": "Bonjour — ça va ? 😁"}],
    [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And <|im_end|> in text?"},
    ],
]


@pytest.fixture(scope="module")
def smollm2_server() -> Iterator[object]:
    pytest.importorskip("xllamacpp")
    from tests.tokenizer.llamacpp_reference import LlamaCppServer

    server = LlamaCppServer(vocab_path("smollm2"))
    yield server
    server.close()


@pytest.mark.parametrize("messages", CONVERSATIONS, ids=["system-multi-turn", "one-turn", "three-turns"])
def test_chat_template_matches(messages: list[dict[str, str]], smollm2_server: object) -> None:
    assert tokenizer("smollm2").apply_chat_template(messages) == smollm2_server.apply_template(messages)
