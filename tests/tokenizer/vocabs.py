"""The vocabularies the tokenizer tests run on, loaded once per session, and llama.cpp's test vectors for them."""

from __future__ import annotations

import functools
import random
from pathlib import Path

from llamay.gguf import open_gguf
from llamay.tokenizer import Tokenizer, load_tokenizer
from tests.paths import GEMMA3, MINILM, SMOLLM2, VOCAB, registry_model, stories

# llama.cpp's test vocabularies (../shared/fixtures/vocab), plus "smollm": the tokenizer inside SmolLM2
VECTOR_VOCABS = ("gpt-2", "llama-spm", "bert-bge", "phi-3", "starcoder", "refact", "deepseek-llm", "smollm")
# real models whose tokenizers we also check
MODEL_VOCABS = ("smollm2", "gemma3", "stories260K", "minilm")
SEPARATOR = "\n__ggml_vocab_test__\n"


def vocab_path(name: str) -> Path:
    if name in ("smollm", "smollm2"):
        return registry_model(SMOLLM2)
    if name == "gemma3":
        return registry_model(GEMMA3)
    if name == "stories260K":
        return stories("f32")
    if name == "minilm":
        return MINILM
    return VOCAB / f"ggml-vocab-{name}.gguf"


@functools.cache
def _load(path: Path) -> Tokenizer:
    with open_gguf(path) as f:
        return load_tokenizer(f)


def tokenizer(name: str) -> Tokenizer:
    return _load(vocab_path(name))


def vector_cases(name: str) -> list[tuple[str, list[int]]]:
    """llama.cpp's test-tokenizer-0 cases: inputs split at the separator line (text kept byte for byte, no
    newline stripped), expected ids one line each."""
    inp = VOCAB / f"ggml-vocab-{name}.gguf.inp"
    out = VOCAB / f"ggml-vocab-{name}.gguf.out"
    if not inp.exists():
        return []
    raw = inp.read_bytes().decode("utf-8")
    texts = []
    pos = 0
    while pos < len(raw):  # as test-tokenizer-0.cpp: a trailing separator starts no further case
        nxt = raw.find(SEPARATOR, pos)
        if nxt < 0:
            texts.append(raw[pos:])
            break
        texts.append(raw[pos:nxt])
        pos = nxt + len(SEPARATOR)
    lines = out.read_text(encoding="utf-8").split("\n")[: len(texts)]
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines, strict=True)]


def all_vector_inputs() -> list[str]:
    return [text for name in VECTOR_VOCABS for text, _ in vector_cases(name)]


# characters for random test strings: scripts, digits, punctuation, whitespace of every kind, combining marks,
# emoji with joiners, unassigned and private-use code points, contractions and runs of spaces
ALPHABET = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") * 3
    + [" "] * 20
    + list("\t\n\r\v\f")
    + list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    + list("éüñßàçÀÉÖ¡¿½²³µ·×÷нещоБългарскиαβγΩά我想在工作天～。，、ᄀ가힣ㄱअआक्षि")
    + ["🦙", "🚀", "😁", "✅", "🌫", "\ufe0f", "\u200d", "\u0301", "\u0308", "\u00a0", "\u2009", "\u3000", "\u200b"]
    + ["\u0085", "\u2028", "\ufeff", "\U000e0001", "\u0378", "\ue000", "\x00", "\x1c", "\x7f"]
    + ["'s", "'t", "'re", "'LL", "'D"]
)
WORDS = ("the", "quick", "brown", "fox", "Hello", "world", "3333", "333", "1314151", "don't", "I'm", "y'all",
         "' era", "    Hello\n    Hello")  # fmt: skip


def random_texts(n: int, seed: int, specials: tuple[str, ...] = ()) -> list[str]:
    """`n` reproducible strings mixing the alphabet, words, runs of spaces and (optionally) special tokens."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 40)):
            r = rng.random()
            if r < 0.5:
                parts.append(rng.choice(ALPHABET))
            elif r < 0.8:
                parts.append(rng.choice(WORDS) + rng.choice((" ", "", "  ", "\n")))
            elif r < 0.9 and specials:
                parts.append(rng.choice(specials))
            else:
                parts.append(" " * rng.randint(1, 5))
        texts.append("".join(parts))
    return texts
