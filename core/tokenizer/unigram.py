"""SentencePiece unigram (T5-style: `tokenizer.ggml.model == "t5"`), as llama.cpp's `llm_tokenizer_ugm` runs it.

Normalisation uses the model's precompiled character map (`tokenizer.ggml.precompiled_charsmap`: a double-array
trie, XOR-compressed, mapping input byte prefixes to replacement strings), writes spaces as "▁", optionally
collapses runs of spaces and prefixes a space. Tokenisation is a Viterbi search for the spelling with the highest
total score; a code point no piece covers costs the lowest score minus 10 and becomes `<unk>` (consecutive
unknowns merge into one).
"""

from __future__ import annotations

import struct

from .vocab import TokenAttr, Vocab

SPACE = "\u2581"
UNKNOWN_PENALTY = 10.0


class CharsMap:
    """The precompiled normaliser: longest byte-prefix match to a replacement string."""

    def __init__(self, blob: bytes) -> None:
        if len(blob) < 4:
            raise ValueError("precompiled_charsmap shorter than its header")
        (size,) = struct.unpack_from("<I", blob, 0)
        if size + 4 >= len(blob):
            raise ValueError("precompiled_charsmap: trie size out of bounds")
        self.nodes = struct.unpack_from(f"<{size // 4}I", blob, 4)
        self.replacements = blob[4 + size :]

    def _base(self, i: int) -> int:
        node = self.nodes[i]
        return (node >> 10) << ((node & (1 << 9)) >> 6)

    def match(self, data: bytes, start: int) -> tuple[int, bytes] | None:
        """(bytes consumed, replacement) of the longest mapped prefix of data[start:], or None."""
        nodes = self.nodes
        index = self._base(0)
        best: tuple[int, bytes] | None = None
        for pos in range(start, len(data)):
            c = data[pos]
            if c == 0:
                break
            index ^= c
            if index >= len(nodes) or nodes[index] & ((1 << 31) | 0xFF) != c:
                break
            leaf = (nodes[index] >> 8) & 1
            index ^= self._base(index)
            if leaf:
                offset = nodes[index] & ((1 << 31) - 1)
                end = self.replacements.find(b"\0", offset)
                best = (pos - start + 1, self.replacements[offset : end if end >= 0 else None])
        return best


def _utf8_len(lead: int) -> int:
    return (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)[lead >> 4]


class UnigramModel:
    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        attrs = vocab.attrs
        matchable = TokenAttr.NORMAL | TokenAttr.USER_DEFINED | TokenAttr.UNUSED
        self.pieces: dict[str, int] = {t: i for i, t in enumerate(vocab.tokens) if attrs[i] & matchable}
        self.user_defined = sorted(
            (t for i, t in enumerate(vocab.tokens) if attrs[i] & TokenAttr.USER_DEFINED), key=len, reverse=True
        )
        normal = [vocab.scores[i] for i in range(len(vocab.tokens)) if attrs[i] & TokenAttr.NORMAL]
        self.unknown_score = (min(normal) if normal else 0.0) - UNKNOWN_PENALTY
        self.max_len = max(map(len, self.pieces), default=1)
        self.charsmap = CharsMap(vocab.precompiled_charsmap) if vocab.precompiled_charsmap else None
        self.unk = vocab.ids.get("unk")

    def normalize(self, text: str) -> str:
        data = text.encode("utf-8")
        space = SPACE.encode() if self.vocab.escape_whitespaces else b" "
        prepend = self.vocab.add_space_prefix
        merge = self.vocab.remove_extra_whitespaces
        out = bytearray()
        prepended = in_word = False
        pos = 0
        while pos < len(data):
            consumed, chunk = self._normalize_prefix(data, pos)
            for c in chunk:
                if c != 0x20:
                    if not in_word:
                        in_word = True
                        if (prepend and not prepended) or merge:
                            out += space
                            prepended = True
                    out.append(c)
                else:
                    in_word = False
                    if not merge:
                        out += space
            pos += consumed
        return out.decode("utf-8", "replace")

    def _normalize_prefix(self, data: bytes, pos: int) -> tuple[int, bytes]:
        for t in self.user_defined:
            raw = t.encode("utf-8")
            if data.startswith(raw, pos):
                return len(raw), raw
        if self.charsmap is not None:
            hit = self.charsmap.match(data, pos)
            if hit is not None:
                return hit
        n = _utf8_len(data[pos])
        try:
            data[pos : pos + n].decode("utf-8")
        except UnicodeDecodeError:
            return 1, "\ufffd".encode()
        return n, data[pos : pos + n]

    def encode(self, text: str) -> list[int]:
        s = self.normalize(text)
        n = len(s)
        if n == 0:
            return []
        scores, pieces, attrs = self.vocab.scores, self.pieces, self.vocab.attrs
        unk = self.unk if self.unk is not None else 0
        # best[i]: (score of the best spelling of s[:i], id of its last piece, where that piece starts)
        best: list[tuple[float, int, int]] = [(float("-inf"), unk, 0)] * (n + 1)
        best[0] = (0.0, unk, 0)
        for i in range(n):
            here = best[i][0]
            single = False
            for j in range(i + 1, min(n, i + self.max_len) + 1):
                tid = pieces.get(s[i:j])
                if tid is None:
                    continue
                single = single or j == i + 1
                score = here + (0.0 if attrs[tid] & TokenAttr.USER_DEFINED else scores[tid])
                if score > best[j][0]:
                    best[j] = (score, tid, i)
            if not single:
                score = here + self.unknown_score
                if score > best[i + 1][0]:
                    best[i + 1] = (score, unk, i)
        out: list[int] = []
        pos = n
        prev_unknown = False
        while True:
            _, tid, start = best[pos]
            unknown = tid == unk
            if not (prev_unknown and unknown):
                out.append(tid)
            if start == 0:
                break
            prev_unknown = unknown
            pos = start
        out.reverse()
        return out
