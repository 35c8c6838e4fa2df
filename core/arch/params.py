"""An architecture's own hyper-parameters, declared as data: a frozen dataclass whose fields each name the GGUF
key they are read from (`{arch}.` keys as the format spells them), its default and its check. `read_params`
reads every declared field through `meta.Meta`, so the refusals are Meta's (file, key, type, value). Fields with
no key are the architecture's constants (qwen2 has QKV biases, gemma3 post-norms).

    @dataclass(frozen=True)
    class Params:
        sliding_window: int = key(Keys.SLIDING_WINDOW, "int", 0, lo=0, hi=MAX_CONTEXT)
        post_norms: bool = True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .meta import Meta

KINDS = ("int", "float", "bool", "str", "eps")  # Meta's readers: one per GGUF value kind


@dataclass(frozen=True)
class Key:
    """Where a field comes from: a key template, the Meta reader and its default and checks, and an optional
    conversion of the value read (a pooling id to its enum)."""

    template: str
    kind: str
    default: Any = None
    check: tuple[tuple[str, Any], ...] = ()  # Meta keyword arguments: lo, hi, hi_what, per_layer, ...
    convert: Callable[[Any], Any] | None = None

    def read(self, m: Meta) -> Any:
        reader = getattr(m, self.kind)
        value = reader(self.template) if self.kind == "eps" else reader(self.template, self.default, **dict(self.check))
        return self.convert(value) if self.convert is not None else value


def key(
    template: str, kind: str, default: Any = None, *, convert: Callable[[Any], Any] | None = None, **check: Any
) -> Any:
    """A dataclass field read from `template` by `Meta.<kind>` (its default: the converted default)."""
    if kind not in KINDS:
        raise ValueError(f"unknown key kind {kind!r}; known: {', '.join(KINDS)}")
    k = Key(template, kind, default, tuple(check.items()), convert)
    value = convert(default) if convert is not None and default is not None else default
    return dataclasses.field(default=value, metadata={"key": k})


def keys_of(cls: type) -> dict[str, Key]:
    """The declared fields of a Params class and the key each is read from, in declaration order."""
    return {f.name: f.metadata["key"] for f in dataclasses.fields(cls) if "key" in f.metadata}


P = TypeVar("P")


def read_params(m: Meta, cls: type[P]) -> P:
    """An instance of `cls` with every keyed field read (and checked) from the file, in declaration order."""
    return cls(**{name: k.read(m) for name, k in keys_of(cls).items()})


@dataclass(frozen=True)
class NoParams:
    """An architecture with nothing beyond the shared hyper-parameters."""
