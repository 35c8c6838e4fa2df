"""The one error type of the constraint compilers: it names what failed and where (line/column in a grammar,
keyword and schema path in a JSON Schema)."""

from __future__ import annotations

from ..errors import LlamayError


class ConstraintError(LlamayError):
    pass
