"""Binding an architecture's weights to a GGUF file's tensors, and the audit of what went unread.

An architecture asks the binder for each tensor by name and expected shape; the binder checks the tensor is
there with that shape and a type the engine can run, and remembers it was read. After binding, every file
tensor nobody asked for is reported by `unread()`: a half-wired architecture shows up here, not as odd text.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelError, UnsupportedTypeError
from ..ggml_types import GGMLType
from ..gguf import GGUFFile, TensorInfo


@dataclass(frozen=True)
class Tensor:
    """A bound weight: where it lives in the file and how it is encoded."""

    info: TensorInfo
    file: GGUFFile

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def type(self) -> GGMLType:
        return self.info.type

    @property
    def shape(self) -> tuple[int, ...]:
        return self.info.shape

    def data(self) -> memoryview:
        return self.file.tensor_data(self.info)


class Binder:
    def __init__(self, f: GGUFFile, runnable_types: frozenset[GGMLType] | None = None) -> None:
        self.f = f
        self.runnable_types = runnable_types
        self.read: dict[str, Tensor] = {}

    def _fail(self, msg: str) -> ModelError:
        return ModelError(f"{self.f.name}: {msg}")

    def get(self, name: str, shape: tuple[int, ...]) -> Tensor:
        """A required tensor with this shape (ggml order, innermost first; trailing 1s ignored)."""
        t = self.optional(name, shape)
        if t is None:
            raise self._fail(f"architecture {self.f.architecture!r} needs tensor {name!r}, which is missing")
        return t

    def optional(self, name: str, shape: tuple[int, ...]) -> Tensor | None:
        info = self.f.tensors.get(name)
        if info is None:
            return None
        if _squeeze(info.shape) != _squeeze(shape):
            raise self._fail(f"tensor {name!r} has shape {list(info.shape)}, expected {list(shape)}")
        if self.runnable_types is not None and info.type not in self.runnable_types:
            ok = ", ".join(sorted(t.name for t in self.runnable_types))
            raise UnsupportedTypeError(
                f"{self.f.name}: tensor {name!r} is {info.type.name}, which this engine cannot run yet "
                f"(runnable types: {ok})"
            )
        t = Tensor(info, self.f)
        self.read[name] = t
        return t

    def unread(self) -> list[TensorInfo]:
        """File tensors no part of the architecture asked for, in file order."""
        return [t for t in sorted(self.f.tensors.values(), key=lambda t: t.index) if t.name not in self.read]


def _squeeze(shape: tuple[int, ...]) -> tuple[int, ...]:
    s = list(shape)
    while len(s) > 1 and s[-1] == 1:
        s.pop()
    return tuple(s)
