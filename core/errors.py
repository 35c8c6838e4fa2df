"""Errors llamay raises for bad input: each names the problem and where it is."""

from __future__ import annotations


class LlamayError(Exception):
    """Base of every error llamay reports to a user (the CLI prints these without a traceback)."""


class GGUFError(LlamayError):
    """A GGUF file is malformed: the message names the file, the byte offset and the key or tensor."""


class UnsupportedTypeError(LlamayError):
    """A tensor type id this project does not know, or cannot run."""


class UnsupportedArchitectureError(LlamayError):
    """A `general.architecture` no registered architecture handles."""


class ModelError(LlamayError):
    """A model whose metadata or tensors do not fit its architecture."""
