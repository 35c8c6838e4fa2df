"""Special tokens in text: cut `<|im_start|>` and friends out before the tokenizer sees the rest.

llama.cpp (`tokenizer_st_partition`) takes the special tokens longest first and splits every text fragment at
each occurrence of the current one. Control and unknown tokens are split out only when parsing special tokens;
user-defined tokens always are. A token with the LSTRIP/RSTRIP attribute also eats the ASCII whitespace on that
side of it.

Scanning the text once per special token costs too much for vocabularies with thousands of them (gemma-3 has
6,400), so we first find which ones occur at all, with one trie-shaped regex, and run llama.cpp's loop over those
only.
"""

from __future__ import annotations

import re

from .vocab import TokenAttr, Vocab

ASCII_SPACE = " \t\n\v\f\r"
SCAN_LIMIT = 32  # with at most this many candidates a `tok in text` per token beats the regex


class SpecialSplitter:
    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self._pools: dict[bool, list[int]] = {}
        self._finders: dict[bool, tuple[re.Pattern[str], dict[str, list[int]]]] = {}

    def pool(self, parse_special: bool) -> list[int]:
        """Special ids that may be split out, longest first."""
        pool = self._pools.get(parse_special)
        if pool is None:
            attrs = self.vocab.attrs
            keep = TokenAttr.CONTROL | TokenAttr.USER_DEFINED | TokenAttr.UNKNOWN
            if not parse_special:
                keep = TokenAttr.USER_DEFINED
            # control/unknown tokens are skipped when not parsing special tokens, even if also user-defined
            skip = TokenAttr(0) if parse_special else TokenAttr.CONTROL | TokenAttr.UNKNOWN
            pool = [i for i in self.vocab.special_ids if attrs[i] & keep and not attrs[i] & skip]
            self._pools[parse_special] = pool
        return pool

    def occurring(self, text: str, parse_special: bool) -> list[int]:
        """The pool's tokens that occur in `text` (overlaps included), in pool order."""
        pool = self.pool(parse_special)
        tokens = self.vocab.tokens
        if len(pool) <= SCAN_LIMIT:
            return [i for i in pool if tokens[i] in text]
        finder = self._finders.get(parse_special)
        if finder is None:
            finder = self._finders[parse_special] = self._build_finder(pool)
        rx, prefixes = finder
        found: set[int] = set()
        seen: set[str] = set()
        m = rx.search(text)
        while m is not None:  # every start position, so overlapping occurrences count too
            if m.group() not in seen:
                seen.add(m.group())
                found.update(prefixes[m.group()])
            m = rx.search(text, m.start() + 1)
        return [i for i in pool if i in found]

    def _build_finder(self, pool: list[int]) -> tuple[re.Pattern[str], dict[str, list[int]]]:
        tokens = self.vocab.tokens
        ids_of: dict[str, list[int]] = {}
        for i in pool:
            ids_of.setdefault(tokens[i], []).append(i)
        # the regex finds the longest token at a position; a shorter one starting there is a prefix of it
        prefixes = {text: [i for k in range(1, len(text) + 1) for i in ids_of.get(text[:k], ())] for text in ids_of}
        return re.compile(trie_regex(list(ids_of))), prefixes

    def split(self, text: str, parse_special: bool) -> list[str | int]:
        """Fragments in order: str for text still to tokenize, int for a special token id."""
        if not text:
            return []
        fragments: list[str | int] = [text]
        tokens, attrs = self.vocab.tokens, self.vocab.attrs
        for tid in self.occurring(text, parse_special):
            fragments = _split_on(fragments, tid, tokens[tid], attrs[tid])
        return fragments


def trie_regex(words: list[str]) -> str:
    """A regex matching any of `words`, the longest at a given position, shaped as a trie (so the engine only
    follows the branch of the next character instead of trying every word)."""
    trie: dict[str, dict] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, dict]) -> str:
        parts = []
        for ch, child in node.items():
            if not ch:
                continue
            chain = re.escape(ch)
            while len(child) == 1 and "" not in child:  # follow a single-child chain without recursion
                ((ch, child),) = child.items()
                chain += re.escape(ch)
            parts.append(chain + (emit(child) if child else ""))
        if "" in node:
            parts.append("")  # ending here is tried last: longer matches first
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"

    return emit(trie)


def _split_on(fragments: list[str | int], tid: int, tok: str, attr: int) -> list[str | int]:
    out: list[str | int] = []
    for frag in fragments:
        if isinstance(frag, int) or tok not in frag:
            out.append(frag)
            continue
        rest = frag
        while True:
            at = rest.find(tok)
            if at < 0:
                if rest:
                    out.append(rest)
                break
            left = rest[:at]
            if attr & TokenAttr.LSTRIP:
                left = left.rstrip(ASCII_SPACE)
            if left:
                out.append(left)
            out.append(tid)
            rest = rest[at + len(tok) :]
            if attr & TokenAttr.RSTRIP:
                rest = rest.lstrip(ASCII_SPACE)
    return out
