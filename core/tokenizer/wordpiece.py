"""WordPiece (BERT: `tokenizer.ggml.model == "bert"`), as llama.cpp's `llm_tokenizer_wpm_session` runs it.

Normalise (NFD and drop combining marks when stripping accents, lower-case, drop controls), split at whitespace,
make every punctuation character, ASCII symbol and CJK ideograph a word of its own, then spell each word with the
longest vocabulary pieces from the left. GGUF BERT vocabularies write a word-initial piece with a leading "▁"
and a continuation piece bare (the `##` prefix removed), so the word is matched as "▁" + word. A word that
cannot be spelled entirely becomes `[UNK]`.
"""

from __future__ import annotations

import unicodedata

from .unicode import WHITESPACE, is_chinese_char, nfd_first, tolower
from .vocab import Vocab

PHANTOM_SPACE = "\u2581"


def _char_class(ch: str) -> str:
    """ "s" whitespace, "x" dropped, "m" a combining mark, "w" a word of its own, "c" part of a word."""
    cp = ord(ch)
    if cp in WHITESPACE:
        return "s"
    cat = unicodedata.category(ch)
    if cp == 0 or cp == 0xFFFD or (cat[0] == "C" and cat != "Cn"):  # unassigned code points are kept
        return "x"
    if cat[0] == "M":
        return "m"
    if cat[0] == "P" or (cp < 0x7F and cat[0] == "S") or is_chinese_char(cp):
        return "w"
    return "c"


class WordPieceModel:
    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self.token_id = vocab.token_to_id
        self.max_len = max(map(len, vocab.tokens))
        self.unk = vocab.ids.get("unk")
        self._classes: dict[str, str] = {}

    def words(self, text: str) -> list[str]:
        """Normalised words (llama.cpp's `preprocess`)."""
        if self.vocab.strip_accents:
            text = "".join(map(nfd_first, text))
        words: list[str] = []
        cur: list[str] = []
        classes = self._classes
        for ch in text:
            cls = classes.get(ch)
            if cls is None:
                cls = classes[ch] = _char_class(ch)
            if cls == "s" or cls == "x":
                if cls == "s" and cur:
                    words.append("".join(cur))
                    cur = []
                continue
            if cls == "m" and self.vocab.strip_accents:
                continue
            if self.vocab.lowercase:
                ch = tolower(ch)
            if cls == "w":
                if cur:
                    words.append("".join(cur))
                    cur = []
                words.append(ch)
            else:
                cur.append(ch)
        if cur:
            words.append("".join(cur))
        return words

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for word in self.words(text):
            out += self.encode_word(word)
        return out

    def encode_word(self, word: str) -> list[int]:
        word = PHANTOM_SPACE + word
        n = len(word)
        ids: list[int] = []
        i = 0
        while i < n:
            for j in range(min(n, i + self.max_len), i, -1):
                tid = self.token_id.get(word[i:j])
                if tid is not None:
                    ids.append(tid)
                    i = j
                    break
            else:
                return [self.unk] if self.unk is not None else []
        return ids
