"""Streaming detokenizer: ids in, text out, never a broken character.

A token may end in the middle of a UTF-8 sequence (byte-fallback tokens, byte-level BPE pieces of an emoji), so
the bytes of an incomplete sequence are held back until the tokens that complete it arrive. Bytes that can never
form a character (an invalid sequence) come out as U+FFFD at once, and `flush()` releases whatever is held back
at the end of the stream.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable


class StreamDecoder:
    def __init__(self, piece_bytes: Callable[[int], bytes], *, strip_leading_space: bool = False) -> None:
        """`piece_bytes(id)` gives a token's bytes (empty for tokens that render as nothing).
        `strip_leading_space`: drop one space from the start of the stream (SentencePiece's dummy prefix)."""
        self._piece_bytes = piece_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._strip = strip_leading_space

    def push(self, token_id: int) -> str:
        """Add one token; return the text that is now complete (possibly "")."""
        data = self._piece_bytes(token_id)
        if self._strip and data:
            self._strip = False
            if data[:1] == b" ":
                data = data[1:]
        return self._decoder.decode(data)

    def push_many(self, ids: list[int]) -> str:
        return "".join(map(self.push, ids))

    def flush(self) -> str:
        """End of stream: return what was held back (an incomplete sequence becomes U+FFFD) and reset."""
        text = self._decoder.decode(b"", final=True)
        self._decoder.reset()
        return text

    @property
    def pending(self) -> bool:
        """Whether bytes of an incomplete character are held back."""
        return bool(self._decoder.getstate()[0])
