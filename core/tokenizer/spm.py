"""SentencePiece BPE with byte fallback (llama, mistral, gemma: `tokenizer.ggml.model == "llama"`).

The text arrives with spaces already written as U+2581 ("▁"). Starting from single characters, the adjacent
pair whose concatenation is a token with the highest score is merged, leftmost first on ties (llama.cpp's
`llm_tokenizer_spm_session`); a final symbol that is not a token is spelled with byte tokens `<0xXX>`.

A merge joins two adjacent symbols into a token, so no symbol ever spans a boundary that no token spans. The
text is cut before each "▁" that follows a character no token has directly before a "▁" (for llama's vocabulary:
before every word), each chunk is merged on its own and its result cached: identical to merging the whole text,
and fast on text that repeats its words.
"""

from __future__ import annotations

import heapq
import re

from .vocab import Vocab

SPACE = "\u2581"
CACHE_LIMIT = 1 << 16
HEAP_THRESHOLD = 48


class SPMModel:
    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self.token_id = vocab.token_to_id
        self.scores = vocab.scores
        glue = sorted({t[i - 1] for t in vocab.tokens for i in range(1, len(t)) if t[i] == SPACE != t[i - 1]})
        self._cut = re.compile(f"(?<=[^{re.escape(SPACE + ''.join(glue))}])(?={SPACE})")
        self._byte_ids = [self._byte_token(b) for b in range(256)]
        self._cache: dict[str, list[int]] = {}

    def _byte_token(self, b: int) -> int | None:
        tid = self.token_id.get(f"<0x{b:02X}>")
        if tid is None and b < 0x80:
            tid = self.token_id.get(chr(b))
        return tid if tid is not None else self.vocab.ids.get("unk")

    def encode(self, text: str) -> list[int]:
        """Ids of `text` (spaces already escaped to "▁")."""
        cache = self._cache
        out: list[int] = []
        for chunk in self._cut.split(text) if SPACE in text else (text,):
            ids = cache.get(chunk)
            if ids is None:
                ids = self.encode_chunk(chunk)
                if len(cache) >= CACHE_LIMIT:
                    cache.clear()
                cache[chunk] = ids
            out += ids
        return out

    def encode_chunk(self, chunk: str) -> list[int]:
        if not chunk:
            return []
        symbols = list(chunk)
        symbols = self._merge_heap(symbols) if len(symbols) > HEAP_THRESHOLD else self._merge_scan(symbols)
        out: list[int] = []
        for sym in symbols:
            tid = self.token_id.get(sym)
            if tid is not None:
                out.append(tid)
            else:
                out += [t for t in map(self._byte_ids.__getitem__, sym.encode("utf-8")) if t is not None]
        return out

    def _merge_scan(self, symbols: list[str]) -> list[str]:
        token_id, scores = self.token_id, self.scores
        while len(symbols) > 1:
            best = -1
            best_score = 0.0
            for i in range(len(symbols) - 1):
                tid = token_id.get(symbols[i] + symbols[i + 1])
                if tid is not None and (best < 0 or scores[tid] > best_score):
                    best, best_score = i, scores[tid]
            if best < 0:
                break
            symbols[best : best + 2] = [symbols[best] + symbols[best + 1]]
        return symbols

    def _merge_heap(self, symbols: list[str]) -> list[str]:
        token_id, scores = self.token_id, self.scores
        n = len(symbols)
        if n < 2:
            return list(symbols)
        text = list(symbols)
        nxt = [*range(1, n), -1]
        prv = list(range(-1, n - 1))
        heap: list[tuple[float, int, int, int]] = []

        def push(left: int, right: int) -> None:
            tid = token_id.get(text[left] + text[right])
            if tid is not None:
                heapq.heappush(heap, (-scores[tid], left, right, len(text[left]) + len(text[right])))

        for i in range(n - 1):
            push(i, i + 1)
        while heap:
            _, left, right, size = heapq.heappop(heap)
            if not text[left] or not text[right] or nxt[left] != right or len(text[left]) + len(text[right]) != size:
                continue
            text[left] += text[right]
            text[right] = ""
            after = nxt[right]
            nxt[left] = after
            if after >= 0:
                prv[after] = left
                push(left, after)
            if prv[left] >= 0:
                push(prv[left], left)
        return [t for t in text if t]
