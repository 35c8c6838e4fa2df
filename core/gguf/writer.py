"""GGUF writer: typed metadata and tensors, laid out as llama.cpp and gguf-py lay them out.

Layout: header, key/value pairs, tensor index, zero padding to the alignment, then each tensor's bytes
padded to the alignment. A file read with `GGUFFile` and written back with `GGUFWriter.from_file` is
byte-identical to the original when the original used that layout (as llama.cpp's and gguf-py's do).
"""

from __future__ import annotations

import os
import struct
from array import array
from typing import Any, BinaryIO

from .. import platform
from ..ggml_types import GGMLType, block_size, type_size
from .constants import (
    GGML_MAX_DIMS,
    GGUF_DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    GGUF_VERSION_WRITTEN,
    SCALAR_FORMAT,
    GGUFValueType,
    Keys,
)
from .reader import GGUFArray, GGUFFile


def _infer_type(value: Any) -> GGUFValueType:
    if isinstance(value, GGUFArray):
        return GGUFValueType.ARRAY
    if isinstance(value, bool):
        return GGUFValueType.BOOL
    if isinstance(value, int):
        return GGUFValueType.INT32 if -(1 << 31) <= value < 1 << 31 else GGUFValueType.INT64
    if isinstance(value, float):
        return GGUFValueType.FLOAT32
    if isinstance(value, str):
        return GGUFValueType.STRING
    if isinstance(value, (list, tuple)):
        return GGUFValueType.ARRAY
    raise TypeError(f"cannot store a {type(value).__name__} in GGUF metadata")


def _as_array(value: Any) -> GGUFArray:
    if isinstance(value, GGUFArray):
        return value
    items = list(value)
    item_type = _infer_type(items[0]) if items else GGUFValueType.INT32
    if item_type == GGUFValueType.INT32 and any(_infer_type(v) == GGUFValueType.INT64 for v in items):
        item_type = GGUFValueType.INT64
    return GGUFArray(item_type, items)


def _pack_string(s: str) -> bytes:
    raw = s.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(raw)) + raw


def _pack_value(vtype: GGUFValueType, value: Any) -> bytes:
    if vtype == GGUFValueType.STRING:
        return _pack_string(value)
    if vtype == GGUFValueType.ARRAY:
        arr = _as_array(value)
        head = struct.pack("<IQ", arr.item_type, len(arr))
        fmt = SCALAR_FORMAT.get(arr.item_type)
        if fmt is None:
            return head + b"".join(_pack_value(arr.item_type, v) for v in arr)
        if arr.item_type == GGUFValueType.BOOL:
            return head + bytes(1 if v else 0 for v in arr)
        packed = array(fmt, arr)
        if not platform.LITTLE_ENDIAN:
            packed.byteswap()
        return head + packed.tobytes()
    return struct.pack("<" + SCALAR_FORMAT[vtype], value)


class GGUFWriter:
    """Collects metadata and tensors, then writes one GGUF file."""

    def __init__(self, alignment: int | None = None, version: int = GGUF_VERSION_WRITTEN) -> None:
        self.version = version
        self.fields: dict[str, tuple[GGUFValueType, Any]] = {}
        self.tensors: list[tuple[str, GGMLType, tuple[int, ...], Any]] = []
        if alignment is not None:
            self.add(Keys.ALIGNMENT, alignment, GGUFValueType.UINT32)

    @property
    def alignment(self) -> int:
        field = self.fields.get(Keys.ALIGNMENT)
        return field[1] if field else GGUF_DEFAULT_ALIGNMENT

    def add(self, key: str, value: Any, vtype: GGUFValueType | None = None) -> None:
        """Add one metadata value; its GGUF type is inferred when not given (int → INT32, float → FLOAT32)."""
        if key in self.fields:
            raise ValueError(f"duplicate metadata key {key!r}")
        self.fields[key] = (vtype if vtype is not None else _infer_type(value), value)

    def add_tensor(self, name: str, ggml_type: GGMLType, shape: tuple[int, ...] | list[int], data: Any) -> None:
        """Add a tensor; `shape` is in ggml order (innermost first), `data` its raw bytes."""
        shape = tuple(int(d) for d in shape)
        if not 1 <= len(shape) <= GGML_MAX_DIMS:
            raise ValueError(f"tensor {name!r}: {len(shape)} dimensions")
        n = 1
        for d in shape:
            n *= d
        if shape[0] % block_size(ggml_type):
            raise ValueError(f"tensor {name!r}: {shape[0]} is not a multiple of {ggml_type.name}'s block size")
        expected = n // block_size(ggml_type) * type_size(ggml_type)
        nbytes = memoryview(data).nbytes
        if nbytes != expected:
            raise ValueError(f"tensor {name!r}: {nbytes} bytes given, {ggml_type.name}{list(shape)} takes {expected}")
        if any(t[0] == name for t in self.tensors):
            raise ValueError(f"duplicate tensor name {name!r}")
        self.tensors.append((name, ggml_type, shape, data))

    @classmethod
    def from_file(cls, f: GGUFFile) -> GGUFWriter:
        """A writer holding everything `f` holds, in the same order (for round trips and rewrites)."""
        w = cls(version=f.version)
        for field in f.fields.values():
            w.add(field.key, field.value, field.type)
        for info in sorted(f.tensors.values(), key=lambda t: t.index):
            w.add_tensor(info.name, info.type, info.shape, f.tensor_data(info))
        return w

    def _header(self) -> bytes:
        parts = [GGUF_MAGIC, struct.pack("<IQQ", self.version, len(self.tensors), len(self.fields))]
        for key, (vtype, value) in self.fields.items():
            parts += [_pack_string(key), struct.pack("<I", vtype), _pack_value(vtype, value)]
        offset = 0
        for name, t, shape, data in self.tensors:
            parts += [_pack_string(name), struct.pack("<I", len(shape)), struct.pack(f"<{len(shape)}Q", *shape)]
            parts.append(struct.pack("<IQ", t, offset))
            offset += self._padded(memoryview(data).nbytes)
        return b"".join(parts)

    def _padded(self, n: int) -> int:
        a = self.alignment
        return (n + a - 1) // a * a

    def write_to(self, out: BinaryIO) -> None:
        header = self._header()
        out.write(header)
        if not self.tensors:
            return
        out.write(bytes(self._padded(len(header)) - len(header)))
        for _name, _t, _shape, data in self.tensors:
            n = memoryview(data).nbytes
            out.write(data)
            out.write(bytes(self._padded(n) - n))

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the file; a partly written file never stays behind under the final name."""
        path = os.fspath(path)
        tmp = path + ".partial"
        try:
            with open(tmp, "wb") as out:
                self.write_to(out)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def to_bytes(self) -> bytes:
        import io

        buf = io.BytesIO()
        self.write_to(buf)
        return buf.getvalue()
