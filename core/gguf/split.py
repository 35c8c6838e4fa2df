"""Split GGUF models (llama.cpp's gguf-split layout) opened as one file.

A model saved as `NAME-00001-of-0000N.gguf` ... `NAME-0000N-of-0000N.gguf`: each shard is a whole GGUF file with
its own header, carrying `split.no` (u16, 0-based), `split.count` (u16) and `split.tensors.count` (i32, the
tensors of all shards); the first shard holds the model's metadata, later ones only the split keys and their
tensors. `SplitGGUF` reads like a `GGUFFile` (fields of the first shard, the tensors of all), each shard
memory-mapped in place natively, or a buffer per shard under Pyodide. Every shard is checked against the first
before anything is returned: a missing shard, a shard of another model, one out of place, a tensor in two shards,
or a tensor count that is not the one announced, each fails with a `GGUFError` naming the file.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from typing import Any

from ..errors import GGUFError
from .constants import GGUFValueType, Keys
from .reader import Fields, GGUFFile, TensorInfo

# llama.cpp's llama_split_path: "%s-%05d-of-%05d.gguf" with the 1-based shard number and the count
SPLIT_NAME = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
INT_TYPES = frozenset({GGUFValueType.UINT8, GGUFValueType.UINT16, GGUFValueType.UINT32, GGUFValueType.INT32})


def split_path(prefix: str, no: int, count: int) -> str:
    """The file name of shard `no` (0-based) of `count`, as llama.cpp names it."""
    return f"{prefix}-{no + 1:05d}-of-{count:05d}.gguf"


def split_prefix(path: str) -> tuple[str, int, int] | None:
    """(prefix, 0-based shard number, count) of a path named by llama.cpp's rule, else None."""
    m = SPLIT_NAME.match(path)
    return (m["prefix"], int(m["no"]) - 1, int(m["count"])) if m else None


def _split_key(f: GGUFFile, key: str) -> int | None:
    field = f.fields.get(key)
    if field is None:
        return None
    if field.type not in INT_TYPES or field.value < 0:
        raise GGUFError(
            f"{f.name}: offset {field.offset}: key {key!r} must be a non-negative integer, got {field.shown()}"
        )
    return int(field.value)


def _is(value: int | None) -> str:
    return "is missing" if value is None else f"is {value}"


def split_count(f: GGUFFile) -> int:
    """How many shards the model of `f` has (1 for a file that is not split)."""
    n = _split_key(f, Keys.SPLIT_COUNT)
    return 1 if n is None or n <= 1 else n


def shard_paths(first: GGUFFile) -> list[str]:
    """The paths of every shard of the model whose first shard is `first`, derived from its name."""
    count = split_count(first)
    parsed = split_prefix(first.name)
    no = _split_key(first, Keys.SPLIT_NO) or 0
    if no != 0:
        hint = f" ({split_path(parsed[0], 0, count)})" if parsed else ""
        raise GGUFError(
            f"{first.name}: this is shard {no + 1} of {count} of a split model (key {Keys.SPLIT_NO!r} is {no}): "
            f"open its first shard{hint}"
        )
    if parsed is None or parsed[1:] != (0, count):
        expected = split_path("NAME", 0, count)
        raise GGUFError(
            f"{first.name}: the first of {count} shards of a split model (key {Keys.SPLIT_COUNT!r} is {count}), but "
            f"its name does not follow llama.cpp's rule ({expected}), so the other shards cannot be found: rename "
            f"the shards to NAME-0000i-of-{count:05d}.gguf"
        )
    return [split_path(parsed[0], i, count) for i in range(count)]


class SplitGGUF(Fields):
    """The shards of one split model read as one GGUF: `fields` of the first shard, `tensors` of them all (each
    `TensorInfo.shard` says where its bytes lie, `index` counts across the shards in order)."""

    def __init__(self, shards: Sequence[GGUFFile]) -> None:
        self.shards = list(shards)
        first = self.shards[0]
        self.name = first.name
        self.version = first.version
        self.fields = first.fields
        self.alignment = first.alignment
        self.data_offset = first.data_offset
        self.size = sum(s.size for s in self.shards)
        self.tensors: dict[str, TensorInfo] = {}
        try:
            self._check()
        except BaseException:
            self.close()
            raise

    def _check(self) -> None:
        first = self.shards[0]
        count = split_count(first)
        if len(self.shards) != count:
            raise GGUFError(
                f"{first.name}: key {Keys.SPLIT_COUNT!r} is {count}, but {len(self.shards)} shards were given"
            )
        total = _split_key(first, Keys.SPLIT_TENSORS_COUNT)
        where: dict[str, str] = {}
        for i, shard in enumerate(self.shards):
            n, no = _split_key(shard, Keys.SPLIT_COUNT), _split_key(shard, Keys.SPLIT_NO)
            if n != count:
                raise GGUFError(
                    f"{shard.name}: key {Keys.SPLIT_COUNT!r} {_is(n)}, but the first shard {first.name} says "
                    f"{count}: a shard of another model"
                )
            if no != i:
                raise GGUFError(
                    f"{shard.name}: key {Keys.SPLIT_NO!r} {_is(no)}, but this is shard {i + 1} of {count} "
                    f"(split.no {i}): shards out of place or of another model"
                )
            for t in sorted(shard.tensors.values(), key=lambda t: t.index):
                if t.name in where:
                    raise GGUFError(f"{shard.name}: tensor {t.name!r} is also in {where[t.name]}")
                where[t.name] = shard.name
                self.tensors[t.name] = dataclasses.replace(t, index=len(self.tensors), shard=i)
        if total is None:
            raise GGUFError(f"{first.name}: a split model without key {Keys.SPLIT_TENSORS_COUNT!r}")
        if total != len(self.tensors):
            raise GGUFError(
                f"{first.name}: key {Keys.SPLIT_TENSORS_COUNT!r} is {total}, but the {count} shards hold "
                f"{len(self.tensors)} tensors"
            )

    # -- access, as GGUFFile's ------------------------------------------------------------------------------

    def tensor_data(self, name_or_info: str | TensorInfo) -> memoryview:
        info = self.tensors[name_or_info] if isinstance(name_or_info, str) else name_or_info
        return self.shards[info.shard].tensor_data(info)

    def close(self) -> None:
        for s in self.shards:
            s.close()


def open_split(first: GGUFFile, *, use_mmap: bool | None = None) -> SplitGGUF:
    """The whole split model whose first shard is `first` (already open; it belongs to the result, and is closed
    on any error): the other shards are opened by llama.cpp's naming rule."""
    shards = [first]
    try:
        paths = shard_paths(first)
        for path in paths[1:]:
            if not os.path.exists(path):
                raise GGUFError(
                    f"{path}: shard {len(shards) + 1} of {len(paths)} of the split model {first.name} is missing"
                )
            shards.append(GGUFFile.open(path, use_mmap=use_mmap))
    except BaseException:
        for s in shards:
            s.close()
        raise
    return SplitGGUF(shards)


def from_buffers(bufs: Sequence[Any], names: Sequence[str]) -> GGUFFile | SplitGGUF:
    """A model held in memory (Pyodide): one buffer for a whole file, or one per shard in order."""
    shards: list[GGUFFile] = []
    try:
        for buf, name in zip(bufs, names, strict=True):
            shards.append(GGUFFile.from_buffer(buf, name))
        if len(shards) == 1 and split_count(shards[0]) == 1:
            return shards[0]
        if split_count(shards[0]) > len(shards):
            parsed = split_prefix(shards[0].name)
            missing = split_path(parsed[0], len(shards), split_count(shards[0])) if parsed else "the next shard"
            raise GGUFError(
                f"{shards[0].name}: the first of {split_count(shards[0])} shards of a split model, but only "
                f"{len(shards)} given: {missing} is missing"
            )
    except BaseException:
        for s in shards:
            s.close()
        raise
    return SplitGGUF(shards)
