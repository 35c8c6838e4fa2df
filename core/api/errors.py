"""The library's own errors; all are LlamayError, whose message names the problem (and the object)."""

from __future__ import annotations

from ..errors import LlamayError


class ModelSourceError(LlamayError):
    """`llamay.load` was given something it cannot open: a missing file, a URL, an unknown name."""


class ContextClosedError(LlamayError):
    """A model, context or snapshot was used after `close()` (or after its `with` block)."""


class ContextFullError(LlamayError):
    """Tokens that do not fit the context's `n_ctx`, or a fork beyond its `n_seq` sequences."""


class TokenError(LlamayError):
    """A token id outside the model's vocabulary, or an empty list of tokens to decode."""
