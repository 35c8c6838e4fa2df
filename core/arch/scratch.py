"""Scratch buffers an architecture needs beyond the shared activations, declared as data: State allocates what
its architecture declares (`State.scratch.<name>`), once, sized by the batch and the config, so a buffer only
one architecture uses (BERT's position embeddings) costs the others nothing.

A size is a product of dimensions: ints, "n_batch" (the State's tokens per forward), or config attributes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import LlamayError
from .config import ModelConfig

DTYPES = ("f32", "i32")


@dataclass(frozen=True)
class Buffer:
    name: str
    dtype: str  # "f32" | "i32"; allocated zeroed
    size: tuple[int | str, ...]  # a product of dimensions
    doc: str = ""

    def length(self, cfg: ModelConfig, n_batch: int) -> int:
        n = 1
        for d in self.size:
            n *= d if isinstance(d, int) else n_batch if d == "n_batch" else _dim(cfg, d)
        return n


def _dim(cfg: ModelConfig, name: str) -> int:
    """A config dimension: a shared field, or one of the architecture's own parameters. A config made without
    them (by hand, `params=None`) cannot size such a buffer: refused by name, never a silent 0."""
    if cfg.params is None and name not in ModelConfig.__dataclass_fields__:
        raise LlamayError(
            f"a scratch buffer of {cfg.arch!r} is sized by {name!r}, one of the architecture's own parameters, "
            "but this config has none (params=None): give it the architecture's Params"
        )
    return getattr(cfg, name)


BUFFERS = tuple[Buffer, ...]


class Scratch:
    """The allocated buffers, one attribute each."""

    def __init__(self, be: Any, buffers: BUFFERS, cfg: ModelConfig, n_batch: int) -> None:
        self.names = tuple(b.name for b in buffers)
        for b in buffers:
            if b.dtype not in DTYPES:
                raise ValueError(f"scratch buffer {b.name!r}: dtype {b.dtype!r} is not one of {', '.join(DTYPES)}")
            alloc = be.alloc_f32 if b.dtype == "f32" else be.alloc_i32
            setattr(self, b.name, alloc(b.length(cfg, n_batch)))
