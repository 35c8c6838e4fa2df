"""Binding an architecture's weights to a GGUF file's tensors, and the audit of what went unread.

The binder reads an architecture's tensor declaration (`tensors.py`): for each tensor it checks the tensor is
there (if required) with the declared shape and a type the engine can run, and remembers it was read. After
binding, every file tensor the declaration does not cover is reported by `unread()`: a half-wired architecture
shows up here, not as odd text.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass

from ..errors import ModelError, UnsupportedTypeError
from ..ggml_types import GGMLType
from ..gguf import GGUFFile, Keys, TensorInfo
from ..platform import LITTLE_ENDIAN
from .config import ModelConfig
from .tensors import Declaration, instances

LAYER_NAME = re.compile(r"blk\.(0|[1-9][0-9]*)\.")  # "blk.{bid}." as names.py spells it


@dataclass(frozen=True)
class Tensor:
    """A bound weight: where it lives in the file and how it is encoded."""

    info: TensorInfo
    file: GGUFFile
    part: tuple[int, int] | None = None  # (offset, count) along the outermost dimension: a piece of a fused tensor

    @property
    def name(self) -> str:
        if self.part is None:
            return self.info.name
        return f"{self.info.name}[{self.part[0]}:{self.part[0] + self.part[1]}]"

    @property
    def type(self) -> GGMLType:
        return self.info.type

    @property
    def shape(self) -> tuple[int, ...]:
        return self.info.shape if self.part is None else (*self.info.shape[:-1], self.part[1])

    def data(self) -> memoryview:
        raw = self.file.tensor_data(self.info)
        if self.part is None:
            return raw
        # rows (or, for a vector, elements) are whole blocks of bytes: a piece is a zero-copy slice
        unit = len(raw) // self.info.shape[-1]
        offset, count = self.part
        return raw[offset * unit : (offset + count) * unit]

    def piece(self, offset: int, count: int) -> Tensor:
        """`count` rows from `offset` (a vector: elements) of this tensor: Q of a fused QKV matrix."""
        return Tensor(self.info, self.file, (offset, count))


@dataclass(frozen=True)
class Constant(Tensor):
    """A float32 vector the file does not hold (a declaration's `fill`): bound like a file tensor."""

    label: str = ""
    dims: tuple[int, ...] = ()
    value: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.label} (constant {self.value:g})"

    @property
    def type(self) -> GGMLType:
        return GGMLType.F32

    @property
    def shape(self) -> tuple[int, ...]:
        return self.dims

    def data(self) -> memoryview:
        n = 1
        for d in self.dims:
            n *= d
        values = array("f", [self.value]) * n
        if not LITTLE_ENDIAN:
            values.byteswap()
        return memoryview(values.tobytes())


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

    def get_vocab_matrix(self, name: str, n_embd: int, n_vocab: int, *, required: bool = True) -> Tensor | None:
        """A (n_embd, n_vocab) matrix, one row per token (embeddings, LM head): its row count must be the token
        list's length, or token ids would index past it or leave rows no id reaches."""
        info = self.f.tensors.get(name)
        if info is not None and len(info.shape) == 2 and info.shape[0] == n_embd and info.shape[1] != n_vocab:
            raise self._fail(
                f"tensor {name!r} has {info.shape[1]} rows (one per token), but the vocabulary has {n_vocab} tokens "
                f"({Keys.TOKENS})"
            )
        return self.get(name, (n_embd, n_vocab)) if required else self.optional(name, (n_embd, n_vocab))

    def bind(self, decls: Declaration, cfg: ModelConfig) -> tuple[dict[str, Tensor | None], list[dict]]:
        """Every declared tensor, by slot: (the file-level ones, one dict per layer), in file order. A tensor
        the config leaves out (`when`, `layers`) or an absent optional one is None."""
        top: dict[str, Tensor | None] = {s: None for d in decls if not d.per_layer for s in d.slots}
        layers: list[dict[str, Tensor | None]] = [
            {s: None for d in decls if d.per_layer for s in d.slots} for _ in range(cfg.n_layer)
        ]
        for d, bid, name in instances(decls, cfg):
            shape = d.dims(cfg)
            if d.fill is not None:
                t = Constant(None, None, None, name, shape, d.fill)
            elif d.vocab:
                t = self.get_vocab_matrix(name, *shape, required=d.required)
            else:
                t = self.get(name, shape) if d.required else self.optional(name, shape)
            slots = top if bid is None else layers[bid]
            if not d.split:
                slots[d.slot] = t
                continue
            offset = 0  # a fused tensor: each piece to its own slot
            for slot, count in d.pieces(cfg):
                slots[slot] = t.piece(offset, count) if t is not None else None
                offset += count
        return top, layers

    def unread(self) -> list[TensorInfo]:
        """File tensors no part of the architecture asked for, in file order."""
        return [t for t in sorted(self.f.tensors.values(), key=lambda t: t.index) if t.name not in self.read]

    def check_layers(self, arch: str, n_layer: int) -> None:
        """The blocks the tensors hold (`blk.N.*`) are exactly the `{arch}.block_count` the metadata gives: a
        layer beyond it would be ignored and a missing one would leave the model short."""
        key = Keys.BLOCK_COUNT.format(arch=arch)
        first: dict[int, str] = {}
        for t in sorted(self.f.tensors.values(), key=lambda t: t.index):
            m = LAYER_NAME.match(t.name)
            if m:
                first.setdefault(int(m.group(1)), t.name)
        beyond = sorted(i for i in first if i >= n_layer)
        if beyond:
            raise self._fail(
                f"key {key!r} = {n_layer}, but the file has tensors of layer {beyond[-1]} (such as "
                f"{first[beyond[-1]]!r}): {len(beyond)} layer(s) beyond the block count"
            )
        missing = [i for i in range(n_layer) if i not in first]
        if missing:
            shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
            raise self._fail(
                f"key {key!r} = {n_layer}, but the file has no tensors for layer(s) {shown} (no 'blk.{missing[0]}.*')"
            )

    def check_all_read(self, arch: str) -> None:
        """Refuse tensors the architecture did not bind: running without them computes something else (llama.cpp
        refuses such a file too: "wrong number of tensors")."""
        unread = self.unread()
        if unread:
            names = ", ".join(repr(t.name) for t in unread[:8]) + (", ..." if len(unread) > 8 else "")
            raise self._fail(
                f"{len(unread)} of {len(self.f.tensors)} tensors are not used by architecture {arch!r}: {names}"
            )


def _squeeze(shape: tuple[int, ...]) -> tuple[int, ...]:
    s = list(shape)
    while len(s) > 1 and s[-1] == 1:
        s.pop()
    return tuple(s)
