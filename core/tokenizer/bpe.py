"""Byte-level BPE (GPT-2 style): pre-tokenize, write each piece's UTF-8 bytes as GPT-2 byte characters, then
apply the merges in rank order.

Merge order is llama.cpp's: repeatedly merge the adjacent pair with the lowest rank, the leftmost one on ties.
Short pieces use a plain scan (cheapest in Python); long ones a heap, so a pathological 100 kB "word" stays
O(n log n). Results are cached per piece: English text repeats its words, so most pieces are one dict lookup.
"""

from __future__ import annotations

import heapq

from .pretokenize import PreTokenizer, Splitter
from .unicode import byte_encode
from .vocab import Vocab

CACHE_LIMIT = 1 << 16  # pieces remembered; the cache is cleared when full (cheap, and keeps memory bounded)
HEAP_THRESHOLD = 48  # pieces longer than this (in symbols) merge with a heap instead of a scan


def parse_merges(merges: list[str]) -> dict[tuple[str, str], int]:
    """`tokenizer.ggml.merges` ("left right" strings) to a rank dict. Like llama.cpp, split at the first space
    after the first character (a merge may start with a space in vocabularies that keep raw spaces)."""
    ranks: dict[tuple[str, str], int] = {}
    for rank, merge in enumerate(merges):
        cut = merge.find(" ", 1)
        pair = (merge[:cut], merge[cut + 1 :]) if cut >= 0 else ("", "")
        ranks.setdefault(pair, rank)
    return ranks


def merge_scan(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Merge in place by repeated scans for the lowest-ranked adjacent pair (leftmost on ties)."""
    get = ranks.get
    while len(symbols) > 1:
        best_rank = None
        best = -1
        prev = symbols[0]
        for i in range(1, len(symbols)):
            cur = symbols[i]
            r = get((prev, cur))
            if r is not None and (best_rank is None or r < best_rank):
                best_rank, best = r, i - 1
            prev = cur
        if best < 0:
            break
        symbols[best : best + 2] = [symbols[best] + symbols[best + 1]]
    return symbols


def merge_heap(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """The same merges with a priority queue over a linked list of symbols (llama.cpp's algorithm)."""
    n = len(symbols)
    if n < 2:
        return list(symbols)
    text = list(symbols)
    nxt = [*range(1, n), -1]
    prv = list(range(-1, n - 1))
    heap: list[tuple[int, int, int]] = []
    get = ranks.get
    for i in range(n - 1):
        r = get((text[i], text[i + 1]))
        if r is not None:
            heap.append((r, i, i + 1))
    heapq.heapify(heap)
    while heap:
        r, left, right = heapq.heappop(heap)
        # stale entry: a side was merged away, or grew, since the pair was queued
        if nxt[left] != right or not text[left] or not text[right] or get((text[left], text[right])) != r:
            continue
        text[left] += text[right]
        text[right] = ""
        after = nxt[right]
        nxt[left] = after
        if after >= 0:
            prv[after] = left
        before = prv[left]
        if before >= 0:
            rb = get((text[before], text[left]))
            if rb is not None:
                heapq.heappush(heap, (rb, before, left))
        if after >= 0:
            ra = get((text[left], text[after]))
            if ra is not None:
                heapq.heappush(heap, (ra, left, after))
    return [t for t in text if t]


class BPEModel:
    """Encodes raw text (no special tokens in it) to ids."""

    def __init__(self, vocab: Vocab, merges: list[str], pre: PreTokenizer) -> None:
        self.vocab = vocab
        self.ranks = parse_merges(merges)
        self.pre = pre
        self.splitter = Splitter(pre.patterns)
        self._cache: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        if self.pre.escape_whitespaces:
            text = text.replace(" ", "\u2581")
        cache = self._cache
        out: list[int] = []
        for piece in self.splitter.split(text):
            ids = cache.get(piece)
            if ids is None:
                ids = self.encode_piece(piece)
                if len(cache) >= CACHE_LIMIT:
                    cache.clear()
                cache[piece] = ids
            out += ids
        return out

    def encode_piece(self, piece: str) -> list[int]:
        """BPE of one pre-token."""
        token_id = self.vocab.token_to_id
        word = byte_encode(piece) if self.pre.byte_encode else piece
        if word in token_id and (self.pre.ignore_merges or (self.pre.family == "lines" and not piece.strip("\n"))):
            return [token_id[word]]  # (gemma4: a run of newlines that is a token is taken whole)
        symbols = list(word)
        symbols = merge_heap(symbols, self.ranks) if len(symbols) > HEAP_THRESHOLD else merge_scan(symbols, self.ranks)
        out: list[int] = []
        for sym in symbols:
            tid = token_id.get(sym)
            if tid is not None:
                out.append(tid)
            else:
                out += self._unknown_symbol(sym)
        return out

    def _unknown_symbol(self, sym: str) -> list[int]:
        """A symbol the merges built but the vocabulary lacks: llama.cpp looks up each of its UTF-8 bytes as a
        one-byte string (only ASCII ones can exist) or, for raw-UTF-8 vocabularies, as a <0xXX> byte token."""
        token_id = self.vocab.token_to_id
        out: list[int] = []
        for b in sym.encode("utf-8"):
            key = chr(b) if self.pre.byte_encode else f"<0x{b:02X}>"
            if self.pre.byte_encode and b >= 0x80:
                continue
            tid = token_id.get(key)
            if tid is not None:
                out.append(tid)
        return out
