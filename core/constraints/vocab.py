"""What a constraint needs from a tokenizer: each token's bytes, the end-of-generation ids, and the trie.

Control tokens (`<|im_start|>`) have no text and are never allowed by a grammar; end-of-generation tokens
(EOS, `<|im_end|>`, ...) are allowed exactly when the grammar is complete. Building the trie of a 49k-token
vocabulary takes a fraction of a second, so it is built once per tokenizer and kept (`for_tokenizer`).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from .trie import TokenTrie

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()  # builders run in worker threads: one builds a vocabulary, the others wait for it


class ConstraintVocab:
    def __init__(self, token_bytes: Sequence[bytes | None], eog_ids: Iterable[int]) -> None:
        self.eog_ids = frozenset(eog_ids)
        self.token_bytes = [None if i in self.eog_ids else b for i, b in enumerate(token_bytes)]
        self.n_vocab = len(token_bytes)
        self.trie = TokenTrie(self.token_bytes)
        eog_bits = 0
        for t in self.eog_ids:
            eog_bits |= 1 << t
        self.eog_bits = eog_bits

    @classmethod
    def for_tokenizer(cls, tokenizer: Any) -> ConstraintVocab:
        """The vocabulary of a `llamay.tokenizer.Tokenizer` (cached per tokenizer object)."""
        with _CACHE_LOCK:
            try:
                return _CACHE[tokenizer]
            except (KeyError, TypeError):
                pass
            pieces = [tokenizer.token_bytes(i, special=False) for i in range(tokenizer.n_vocab)]
            vocab = cls(pieces, tokenizer.eos_ids)
            with contextlib.suppress(TypeError):  # not weak-referenceable: not cached
                _CACHE[tokenizer] = vocab
            return vocab
