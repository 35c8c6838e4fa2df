"""`Context`: one sequence of a model's KV cache, driven token by token from the caller's own loop.

    with model.context(n_ctx=256, n_seq=2) as ctx:
        logits = ctx.decode(model.tokenize("Once upon a time"))
        other = ctx.fork()                 # shares every page; each side copies a page before writing it
        snap = ctx.snapshot()              # an immutable handle: restore() goes back to it, bit for bit

A context and its forks share one State (its pages, its n_seq sequences); each keeps its own copy of its last
logits row, so a fork's decode never changes what its parent samples next. Closing a context gives its
sequence back (pages shared with forks or snapshots stay theirs); a snapshot holds its pages until closed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import LlamayError
from ..generate import prefill
from ..model import State
from . import kv
from .errors import ContextClosedError, ContextFullError, TokenError

if TYPE_CHECKING:
    from .model import Model


class Logits:
    """The logits a `decode` left: valid until that context's next decode or restore (then an error)."""

    def __init__(self, ctx: Context, version: int) -> None:
        self._ctx = ctx
        self._version = version

    def _row(self) -> Any:
        ctx = self._ctx
        if ctx._version != self._version or ctx._closed:
            raise LlamayError("these logits are stale: their context decoded, restored or closed since")
        return ctx._buf

    def tolist(self) -> list[float]:
        """The whole row (n_vocab floats)."""
        return self._ctx._be.read_f32(self._row(), 0, len(self))

    def argmax(self) -> int:
        """The most likely token (the first one on ties)."""
        return self._ctx._be.argmax(self._row(), 0, len(self))

    def top(self, k: int) -> list[tuple[int, float]]:
        """The k largest logits as (token, logit), largest first."""
        return self._ctx._be.top_k(self._row(), 0, len(self), k)

    def __len__(self) -> int:
        return self._ctx._n_vocab

    def __getitem__(self, token: int) -> float:
        if not 0 <= token < len(self):
            raise TokenError(f"token id {token} is out of range (vocabulary of {len(self)})")
        return self._ctx._be.read_f32(self._row(), token, 1)[0]

    def __iter__(self) -> Iterator[float]:
        return iter(self.tolist())


class Snapshot:
    """A context's cache and logits at one moment; `close()` (or a `with` block) lets go of its pages."""

    def __init__(self, family: _Family, handle: Any, buf: Any, has_logits: bool, tokens: tuple[int, ...]) -> None:
        self._family = family
        self._handle = handle
        self._buf = buf
        self._has_logits = has_logits
        self.tokens = tokens
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            kv.drop(self._family.state, self._handle)

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<llamay.Snapshot of {len(self.tokens)} tokens{' (closed)' if self.closed else ''}>"


class _Family:
    """The State a context and its forks share."""

    def __init__(self, model: Model, state: State) -> None:
        self.model = model
        self.state = state


class Context:
    """One sequence of a State. Made by `Model.context()` (and `fork()`); not to be used from two threads."""

    def __init__(self, family: _Family, seq: int, buf: Any = None) -> None:
        self._family = family
        self._seq = seq
        core = family.model.core
        self._be = core.backend
        self._n_vocab = core.cfg.n_vocab
        self._buf = buf if buf is not None else self._be.alloc_f32(self._n_vocab)
        self._has_logits = False
        self._version = 0
        self._closed = False

    @classmethod
    def _open(cls, model: Model, n_ctx: int | None, n_batch: int, n_seq: int) -> Context:
        if not model.core.cfg.causal:
            raise LlamayError(f"{model.name} is an encoder ({model.core.cfg.arch}): it has no logits; use model.embed")
        for name, value in (("n_batch", n_batch), ("n_seq", n_seq)) + ((("n_ctx", n_ctx),) if n_ctx else ()):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LlamayError(f"model.context: {name} must be a positive integer, got {value!r}")
        state = model.core.new_state(n_ctx=n_ctx, n_batch=n_batch, n_seq=n_seq)
        family = _Family(model, state)
        return cls(family, kv.acquire(state))

    # -- what it holds --------------------------------------------------------------------------------------

    @property
    def model(self) -> Model:
        return self._family.model

    @property
    def state(self) -> State:
        """The core State underneath (shared with forks), for inspection: `audit()`, `page_use()`."""
        return self._family.state

    @property
    def n_ctx(self) -> int:
        return self._family.state.n_ctx

    @property
    def tokens(self) -> tuple[int, ...]:
        """The tokens this sequence holds, in order."""
        self._check_open()
        return tuple(kv.tokens(self._family.state, self._seq))

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def logits(self) -> Logits:
        """The logits of the last token decoded (or restored); an error before any."""
        self._check_open()
        if not self._has_logits:
            raise LlamayError("this context has no logits yet: decode some tokens first")
        return Logits(self, self._version)

    # -- running --------------------------------------------------------------------------------------------

    def decode(self, tokens: Sequence[int] | int) -> Logits:
        """Run tokens after the ones this context holds; returns the logits of the last one."""
        self._check_open()
        ids = [tokens] if isinstance(tokens, int) else list(tokens)
        if not ids:
            raise TokenError("decode needs at least one token")
        for i, t in enumerate(ids):
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < self._n_vocab:
                raise TokenError(f"token {i} is {t!r}: not a token id of the vocabulary (0..{self._n_vocab - 1})")
        st = self._family.state
        n_past = len(kv.tokens(st, self._seq))
        if n_past + len(ids) > st.n_ctx:
            raise ContextFullError(
                f"the context holds {st.n_ctx} tokens: it has {n_past} and {len(ids)} more do not fit "
                "(model.context(n_ctx=...) makes a larger one)"
            )
        point = kv.checkpoint(st, self._seq)
        try:
            prefill(self._family.model.core, st, ids, self._seq)
        except BaseException:  # the cache goes back to before the call; the logits were not touched yet
            if kv.roll_back(st, point):  # a sliding window freed pages the earlier positions need: start over
                kv.release(st, self._seq)
                self._seq = kv.acquire(st)
                self._has_logits = False
                self._version += 1
            raise
        self._be.copy(self._buf, 0, st.logits, 0, self._n_vocab)
        return self._fresh_logits()

    def _fresh_logits(self) -> Logits:
        self._has_logits = True
        self._version += 1
        return Logits(self, self._version)

    # -- forks and snapshots --------------------------------------------------------------------------------

    def fork(self) -> Context:
        """A new context continuing from exactly here (same tokens, same logits), sharing the cache's pages."""
        self._check_open()
        st = self._family.state
        if not kv.free_sequences(st):
            raise ContextFullError(
                f"no sequence left to fork into: this context and its forks use all {st.n_seq} "
                "(model.context(n_seq=...) makes room for more)"
            )
        other = Context(self._family, kv.fork(st, self._seq))
        self._be.copy(other._buf, 0, self._buf, 0, self._n_vocab)
        if self._has_logits:
            other._fresh_logits()
        return other

    def snapshot(self) -> Snapshot:
        """An immutable handle on this context now (tokens, cache pages, logits)."""
        self._check_open()
        st = self._family.state
        buf = self._be.alloc_f32(self._n_vocab)
        self._be.copy(buf, 0, self._buf, 0, self._n_vocab)
        handle = kv.snapshot(st, self._seq)
        return Snapshot(self._family, handle, buf, self._has_logits, tuple(kv.tokens(st, self._seq)))

    def restore(self, snap: Snapshot) -> Logits | None:
        """Go back to where `snap` was taken (this context's tokens are replaced); returns the logits then."""
        self._check_open()
        if snap._family is not self._family:
            raise LlamayError("this snapshot was taken of another context family (its own model.context())")
        if snap.closed:
            raise ContextClosedError("this snapshot was closed: its pages were let go")
        kv.restore(self._family.state, snap._handle, self._seq)
        self._be.copy(self._buf, 0, snap._buf, 0, self._n_vocab)
        if not snap._has_logits:
            self._has_logits = False
            self._version += 1
            return None
        return self._fresh_logits()

    # -- the end --------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Give the sequence back (a second close does nothing)."""
        if not self._closed:
            self._closed = True
            self._version += 1
            kv.release(self._family.state, self._seq)

    def _check_open(self) -> None:
        self._family.model._check_open()
        if self._closed:
            raise ContextClosedError("this context was closed (its `with` block ended, or close() was called)")

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        n_past = len(kv.tokens(self._family.state, self._seq))
        state = "closed" if self._closed else f"{n_past}/{self.n_ctx} tokens"
        return f"<llamay.Context of {self.model.name}: {state}>"
