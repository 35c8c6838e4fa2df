"""A grammar that starts at a trigger (llama-server's "lazy grammar"): `tool_choice: "auto"`.

Until the reply writes a trigger (`<tool_call>`, `[TOOL_CALLS]`; or, `anchored`, a trigger as the reply's first
non-blank text: Llama 3.x's `{`), every token is allowed; from the trigger on, the grammar (which starts with the
trigger's text) must accept the rest, so a call, once begun, follows its tools' schemas to the end.

States are immutable: ("free", tail, began) — the last bytes that may begin a trigger, and whether non-blank
text came (no anchored trigger after it) — or ("on", state of the grammar).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ..constraints import TokenMask

_BLANK = b" \t\r\n"


class LazyConstraint:
    def __init__(self, inner: Any, triggers: tuple[bytes, ...], anchored: bool = False) -> None:
        self.inner = inner  # a GrammarConstraint whose language starts with one of the triggers
        self.vocab = inner.vocab
        self.triggers = triggers
        self.anchored = anchored
        self._keep = max(len(t) for t in triggers) - 1  # bytes of a trigger that may still be completed
        self.name = f"lazy {inner.name}"

    def start(self) -> tuple:
        return ("free", b"", False)

    def _next(self, state: tuple, token: int) -> tuple | None:
        if state[0] == "on":
            inner = state[1]
            return ("on", self.inner.advance(inner, token)) if self.inner.accepts(inner, token) else None
        if token in self.vocab.eog_ids:
            return ("on", None)  # the reply ends as text
        data = self.vocab.token_bytes[token] if 0 <= token < self.vocab.n_vocab else None
        if not data:
            return state  # a token of no text (a control token that is no trigger)
        _, tail, began = state
        text = tail + data
        at = self._trigger_at(text, began, len(tail))
        if at is None:
            began = began or bool(data.strip(_BLANK))
            return ("free", text[-self._keep :] if self._keep else b"", began)
        st = self.inner.advance_bytes(self.inner.start(), text[at:])
        return None if st is None else ("on", st)

    def _trigger_at(self, text: bytes, began: bool, fresh: int) -> int | None:
        """Where a trigger begins in `text` (that ends in a byte of the new token), None if none does."""
        if self.anchored:
            body = text.lstrip(_BLANK)
            hit = not began and any(body.startswith(t) for t in self.triggers)
            return len(text) - len(body) if hit else None
        best = None
        for t in self.triggers:
            i = text.find(t, max(0, fresh - len(t) + 1))
            if i >= 0 and (best is None or i < best):
                best = i
        return best

    def accepts(self, state: tuple, token: int) -> bool:
        return self._next(state, token) is not None

    def advance(self, state: tuple, token: int) -> tuple:
        nxt = self._next(state, token)
        if nxt is None:
            raise ValueError(f"{self.name}: token {token} is not allowed here")
        return nxt

    def is_complete(self, state: tuple) -> bool:
        if state[0] == "free":
            return True
        return state[1] is None or self.inner.is_complete(state[1])

    def is_finished(self, state: tuple) -> bool:
        return state[0] == "on" and (state[1] is None or self.inner.is_finished(state[1]))

    def allowed(self, state: tuple) -> TokenMask:
        if state[0] == "on":
            if state[1] is None:
                return TokenMask(0, self.vocab.n_vocab)
            return self.inner.allowed(state[1])
        # free: every token but those that complete a trigger the grammar then refuses; only a token holding a
        # trigger's last byte can complete one (called after the sampled token was refused: rare)
        bits = (1 << self.vocab.n_vocab) - 1
        for t in _holding(self.vocab, frozenset(trigger[-1] for trigger in self.triggers)):
            if self._next(state, t) is None:
                bits &= ~(1 << t)
        return TokenMask(bits, self.vocab.n_vocab)


_HOLDING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _holding(vocab: Any, last: frozenset[int]) -> tuple[int, ...]:
    """The tokens whose bytes hold one of the bytes `last` (one pass over the vocabulary, kept per vocabulary)."""
    with _LOCK:
        per = _HOLDING.setdefault(vocab, {})
        found = per.get(last)
        if found is None:
            marks = bytes(last)
            found = per[last] = tuple(t for t, b in enumerate(vocab.token_bytes) if b and any(c in b for c in marks))
        return found
