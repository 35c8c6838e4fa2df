"""GGUF reader: header, typed metadata, tensor index, zero-copy tensor bytes.

Natively the file is memory-mapped and tensor data are `memoryview` slices of the map; where there is no
mmap (Pyodide) the caller hands over a buffer that already holds the file. The whole header is parsed and
validated before a `GGUFFile` is returned: a malformed file raises one `GGUFError` naming the file, the
byte offset and the key or tensor, and nothing half-loaded escapes.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from array import array
from dataclasses import dataclass
from typing import Any, Self

from .. import platform
from ..errors import GGUFError, UnsupportedTypeError
from ..ggml_types import GGMLType, block_size, ggml_type, type_size
from .constants import (
    GGML_MAX_DIMS,
    GGML_MAX_ELEMENTS,
    GGML_MAX_NAME,
    GGUF_DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    GGUF_VERSIONS_READ,
    SCALAR_FORMAT,
    GGUFValueType,
    Keys,
)

MAX_ARRAY_NESTING = 8  # deeper nesting is certainly garbage, and recursion must stay bounded
SHOWN_ITEMS = 8  # array items an error quotes
SHOWN_CHARS = 80  # string characters an error quotes


class GGUFArray(list):
    """A metadata array: a plain list that remembers the GGUF type of its items (for exact rewriting)."""

    def __init__(self, item_type: GGUFValueType, items: Any = ()) -> None:
        super().__init__(items)
        self.item_type = GGUFValueType(item_type)

    def __repr__(self) -> str:
        return f"GGUFArray({self.item_type.name}, {list.__repr__(self)})"


@dataclass(frozen=True)
class MetadataField:
    key: str
    type: GGUFValueType
    value: Any  # int, float, bool, str, or GGUFArray
    offset: int  # where the key/value pair starts in the file

    def shown(self) -> str:
        """The field as an error quotes it: its GGUF type and (the start of) its value."""
        v = self.value
        if isinstance(v, GGUFArray):
            items = ", ".join(map(repr, v[:SHOWN_ITEMS])) + (", ..." if len(v) > SHOWN_ITEMS else "")
            return f"ARRAY of {len(v)} {v.item_type.name} [{items}]"
        if isinstance(v, str) and len(v) > SHOWN_CHARS:
            v = v[:SHOWN_CHARS] + "..."
        return f"{self.type.name} {v!r}"


@dataclass(frozen=True)
class TensorInfo:
    name: str
    type: GGMLType
    shape: tuple[int, ...]  # ggml order: shape[0] is the innermost (contiguous) dimension
    offset: int  # relative to the start of the data section, as stored
    data_start: int  # absolute offset in the file
    nbytes: int
    index: int  # position in the tensor index
    shard: int = 0  # which file of a split model holds the bytes (split.py)

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def n_rows(self) -> int:
        return self.n_elements // self.shape[0]


class _Cursor:
    """Bounds-checked little-endian reads over a buffer; every failure names the file and offset."""

    def __init__(self, buf: Any, name: str, size: int) -> None:
        self.buf = buf
        self.name = name
        self.size = size
        self.pos = 0

    def fail(self, what: str, at: int | None = None) -> GGUFError:
        return GGUFError(f"{self.name}: offset {self.pos if at is None else at}: {what}")

    def take(self, n: int, what: str) -> int:
        start = self.pos
        if n < 0 or start + n > self.size:
            raise self.fail(f"{what} needs {n} bytes but the file ends at byte {self.size} (truncated?)")
        self.pos = start + n
        return start

    def scalar(self, fmt: str, what: str) -> Any:
        n = struct.calcsize("<" + fmt)
        return struct.unpack_from("<" + fmt, self.buf, self.take(n, what))[0]

    def string(self, what: str, *, strict: bool = False) -> str:
        """A string value; `strict` for names (keys, tensor names), which must be valid UTF-8."""
        at = self.pos
        length = self.scalar("Q", f"length of {what}")
        if length > self.size - self.pos:
            raise self.fail(f"{what}: string length {length} runs past the end of the file", at)
        start = self.take(length, what)
        raw = bytes(self.buf[start : start + length])
        if strict:
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise self.fail(f"{what} is not valid UTF-8 (byte {e.start}: {raw[:64]!r})", at) from None
        # surrogateescape: a file with odd bytes in a string value still round-trips byte for byte
        return raw.decode("utf-8", "surrogateescape")

    def value(self, vtype: GGUFValueType, what: str, depth: int = 0) -> Any:
        if vtype == GGUFValueType.STRING:
            return self.string(what)
        if vtype == GGUFValueType.ARRAY:
            return self.array(what, depth)
        fmt = SCALAR_FORMAT[vtype]
        v = self.scalar(fmt, what)
        return v

    def value_type(self, what: str) -> GGUFValueType:
        at = self.pos
        raw = self.scalar("I", f"value type of {what}")
        try:
            return GGUFValueType(raw)
        except ValueError:
            raise self.fail(f"{what}: unknown metadata value type {raw}", at) from None

    def array(self, what: str, depth: int) -> GGUFArray:
        if depth >= MAX_ARRAY_NESTING:
            raise self.fail(f"{what}: arrays nested more than {MAX_ARRAY_NESTING} deep")
        item_type = self.value_type(f"items of {what}")
        at = self.pos
        count = self.scalar("Q", f"item count of {what}")
        # every item takes at least this many bytes: refuse a count the file cannot hold before allocating
        min_item = (
            8
            if item_type in (GGUFValueType.STRING, GGUFValueType.ARRAY)
            else struct.calcsize("<" + SCALAR_FORMAT[item_type])
        )
        if count * min_item > self.size - self.pos:
            raise self.fail(f"{what}: array count {count} runs past the end of the file", at)
        if item_type in SCALAR_FORMAT:
            fmt = SCALAR_FORMAT[item_type]
            start = self.take(count * min_item, what)
            raw = self.buf[start : start + count * min_item]
            if item_type == GGUFValueType.BOOL:
                return GGUFArray(item_type, (b != 0 for b in bytes(raw)))
            items = array(fmt)
            items.frombytes(raw)
            if not platform.LITTLE_ENDIAN:
                items.byteswap()
            return GGUFArray(item_type, items.tolist())
        return GGUFArray(item_type, [self.value(item_type, f"{what}[{i}]", depth + 1) for i in range(count)])


def _align(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def _describe(t: TensorInfo) -> str:
    return f"{t.type.name} {list(t.shape)}"


def _misplaced(t: TensorInfo, prev: TensorInfo | None, expected: int) -> str:
    """Why a tensor's data offset is not where the previous tensor's padded region ends."""
    if prev is None:
        return f"data offset {t.offset}, expected 0: the first tensor starts the data section"
    region = t.offset - prev.offset
    if t.offset < expected:
        return (
            f"data offset {t.offset} overlaps tensor {prev.name!r} ({_describe(prev)} takes {prev.nbytes} bytes from "
            f"offset {prev.offset}); expected {expected}"
        )
    return (
        f"data offset {t.offset}, expected {expected}: tensor {prev.name!r} ({_describe(prev)}) takes {prev.nbytes} "
        f"bytes but its region holds {region}: the region is not the size its type and shape require"
    )


class Fields:
    """What a GGUF file and a split model (split.py) read alike: metadata by key, and use in a `with`."""

    fields: dict[str, MetadataField]

    def close(self) -> None:
        raise NotImplementedError

    @property
    def metadata(self) -> dict[str, Any]:
        """Metadata as plain Python values (arrays are lists), in file order."""
        return {k: f.value for k, f in self.fields.items()}

    def get(self, key: str, default: Any = None) -> Any:
        f = self.fields.get(key)
        return default if f is None else f.value

    @property
    def architecture(self) -> str | None:
        return self.get(Keys.ARCHITECTURE)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GGUFFile(Fields):
    """A parsed GGUF file: `fields` (typed metadata, in file order), `tensors` (the index, in file order)."""

    def __init__(self, buf: Any, name: str, *, owner: Any = None) -> None:
        self.name = name
        self._owner = owner  # the mmap or file object to close, if any
        self._view = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf.cast("B")
        self.size = len(self._view)
        self.version = 0
        self.fields: dict[str, MetadataField] = {}
        self.tensors: dict[str, TensorInfo] = {}
        self.alignment = GGUF_DEFAULT_ALIGNMENT
        self.data_offset = 0
        try:
            self._parse()
        except BaseException:
            self.close()
            raise

    # -- construction -------------------------------------------------------------------------------------

    @classmethod
    def from_buffer(cls, buf: Any, name: str = "<buffer>") -> GGUFFile:
        """Parse a GGUF held in memory (bytes, bytearray, memoryview): the no-mmap path used under Pyodide."""
        return cls(buf, name)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, use_mmap: bool | None = None) -> GGUFFile:
        name = os.fspath(path)
        if use_mmap is None:
            use_mmap = not platform.IS_PYODIDE
        try:
            f = open(name, "rb")  # noqa: SIM115 - the map outlives this function
        except OSError as e:
            raise GGUFError(f"{name}: cannot open: {e.strerror or e}") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise GGUFError(f"{name}: offset 0: the file is empty, not a GGUF file")
            if use_mmap:
                m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                return cls(m, name, owner=m)
            # no mmap (Pyodide): one writable buffer, so kernels that need a writable view read weights in place
            buf = bytearray(size)
            if f.readinto(buf) != size:
                raise GGUFError(f"{name}: offset 0: the file changed size while being read")
            return cls(buf, name)

    def close(self) -> None:
        view, self._view = getattr(self, "_view", None), None
        if view is not None:
            view.release()
        owner, self._owner = self._owner, None
        if owner is not None:
            # a caller still holding a tensor view keeps the map open until the last view is gone
            with contextlib.suppress(BufferError):
                owner.close()

    # -- parsing ------------------------------------------------------------------------------------------

    def _parse(self) -> None:
        cur = _Cursor(self._view, self.name, self.size)
        self._parse_header(cur)
        n_tensors = cur.scalar("Q", "tensor count")
        n_kv = cur.scalar("Q", "metadata count")
        # each key/value pair takes at least 8 + 4 + 1 bytes, each tensor info 8 + 4 + 4 + 8
        if n_kv * 13 > self.size - cur.pos:
            raise cur.fail(f"metadata count {n_kv} runs past the end of the file", 16)
        if n_tensors * 24 > self.size - cur.pos:
            raise cur.fail(f"tensor count {n_tensors} runs past the end of the file", 8)
        self._parse_metadata(cur, n_kv)
        self._read_alignment()
        infos = [self._parse_tensor_info(cur, i) for i in range(n_tensors)]
        self.data_offset = _align(cur.pos, self.alignment)
        self._place_tensors(infos)

    def _parse_header(self, cur: _Cursor) -> None:
        magic = bytes(self._view[: min(4, self.size)])
        if magic != GGUF_MAGIC:
            raise cur.fail(f"bad magic {magic!r}: expected {GGUF_MAGIC!r}, this is not a GGUF file", 0)
        cur.take(4, "magic")
        version = cur.scalar("I", "version")
        if version not in GGUF_VERSIONS_READ:
            swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
            if swapped in GGUF_VERSIONS_READ:
                raise cur.fail(f"big-endian GGUF (version {swapped}) is not supported", 4)
            raise cur.fail(
                f"unsupported GGUF version {version}; readable versions: {', '.join(map(str, GGUF_VERSIONS_READ))}",
                4,
            )
        self.version = version

    def _parse_metadata(self, cur: _Cursor, n_kv: int) -> None:
        for i in range(n_kv):
            at = cur.pos
            key = cur.string(f"key of metadata entry {i}", strict=True)
            vtype = cur.value_type(f"key {key!r}")
            value = cur.value(vtype, f"key {key!r}")
            if key in self.fields:
                first = self.fields[key].offset
                raise cur.fail(f"duplicate metadata key {key!r} (first defined at offset {first})", at)
            self.fields[key] = MetadataField(key, vtype, value, at)

    def _read_alignment(self) -> None:
        field = self.fields.get(Keys.ALIGNMENT)
        if field is None:
            return
        a = field.value
        if field.type != GGUFValueType.UINT32 or a <= 0 or a & (a - 1):
            raise GGUFError(
                f"{self.name}: offset {field.offset}: key {Keys.ALIGNMENT!r} must be a UINT32 power of two, "
                f"got {field.type.name} {a!r}"
            )
        self.alignment = a

    def _parse_tensor_info(self, cur: _Cursor, i: int) -> tuple[int, str, int, tuple[int, ...], int]:
        at = cur.pos
        name = cur.string(f"name of tensor {i}", strict=True)
        where = f"tensor {name!r}"
        if len(name.encode()) >= GGML_MAX_NAME:
            raise cur.fail(f"{where}: name of {len(name.encode())} bytes (ggml allows at most {GGML_MAX_NAME - 1})", at)
        n_dims = cur.scalar("I", f"{where}: dimension count")
        if not 1 <= n_dims <= GGML_MAX_DIMS:
            raise cur.fail(f"{where}: {n_dims} dimensions (ggml allows 1 to {GGML_MAX_DIMS})", at)
        shape = tuple(cur.scalar("Q", f"{where}: dimension {d}") for d in range(n_dims))
        raw_type = cur.scalar("I", f"{where}: type")
        offset = cur.scalar("Q", f"{where}: data offset")
        return at, name, raw_type, shape, offset

    def _tensor(self, index: int, at: int, name: str, raw_type: int, shape: tuple[int, ...], offset: int) -> TensorInfo:
        """One index entry checked on its own: known type, positive dims, whole blocks, a countable size."""
        where = f"{self.name}: offset {at}: tensor {name!r}"
        if name in self.tensors:
            raise GGUFError(f"{where}: duplicate tensor name")
        try:
            t = ggml_type(raw_type)
        except UnsupportedTypeError as e:
            raise UnsupportedTypeError(f"{where}: {e}") from None
        n = 1
        for d in shape:
            if d <= 0 or d >= GGML_MAX_ELEMENTS:
                raise GGUFError(f"{where}: bad dimension {d} in shape {list(shape)}")
            n *= d
        if n >= GGML_MAX_ELEMENTS:
            raise GGUFError(f"{where}: shape {list(shape)} holds {n} elements, more than ggml can count (2^63)")
        if shape[0] % block_size(t):
            raise GGUFError(
                f"{where}: {t.name} rows of {shape[0]} elements are not a multiple of its block size {block_size(t)}"
            )
        if offset % self.alignment:
            raise GGUFError(f"{where}: data offset {offset} is not aligned to {self.alignment} bytes")
        nbytes = n // block_size(t) * type_size(t)
        return TensorInfo(name, t, shape, offset, self.data_offset + offset, nbytes, index)

    def _place_tensors(self, infos: list[tuple[int, str, int, tuple[int, ...], int]]) -> None:
        """Tensors lie back to back in index order, each padded to the alignment (as llama.cpp requires: it
        refuses a tensor whose offset is not the previous one's padded end). So every region is exactly the size
        its type and shape give, and the last one ends within the file, followed by at most its padding."""
        expected = 0  # where the next tensor must start, relative to the data section
        prev: TensorInfo | None = None
        for index, (at, name, raw_type, shape, offset) in enumerate(infos):
            t = self._tensor(index, at, name, raw_type, shape, offset)
            if t.offset != expected:
                raise GGUFError(f"{self.name}: offset {at}: tensor {name!r}: " + _misplaced(t, prev, expected))
            self.tensors[name] = t
            expected = _align(t.offset + t.nbytes, self.alignment)
            prev = t
        if prev is None:
            return
        end = prev.data_start + prev.nbytes
        if end > self.size:
            raise GGUFError(
                f"{self.name}: tensor {prev.name!r}: {_describe(prev)} data [{prev.data_start}, {end}) lies outside "
                f"the file ({self.size} bytes; truncated?)"
            )
        if self.size > self.data_offset + expected:
            extra = self.size - end
            raise GGUFError(
                f"{self.name}: tensor {prev.name!r}: {_describe(prev)} takes {prev.nbytes} bytes, but its region runs "
                f"{extra} bytes to the end of the file (at most {expected - prev.offset - prev.nbytes} bytes of "
                f"padding may follow): the region is not the size its type and shape require"
            )

    # -- access -------------------------------------------------------------------------------------------

    def tensor_data(self, name_or_info: str | TensorInfo) -> memoryview:
        """The tensor's raw bytes as a zero-copy view of the file."""
        info = self.tensors[name_or_info] if isinstance(name_or_info, str) else name_or_info
        if self._view is None:
            raise GGUFError(f"{self.name}: the file is closed")
        return self._view[info.data_start : info.data_start + info.nbytes]

    def raw_bytes(self, start: int, end: int) -> memoryview:
        if self._view is None:
            raise GGUFError(f"{self.name}: the file is closed")
        return self._view[start:end]


def open_gguf(path: str | os.PathLike[str], *, use_mmap: bool | None = None) -> GGUFFile:
    """Open and validate a GGUF file (memory-mapped natively); the first shard of a split model opens the whole
    model (a `SplitGGUF`, read like a `GGUFFile`)."""
    from .split import open_split, split_count

    f = GGUFFile.open(path, use_mmap=use_mmap)
    try:
        if split_count(f) == 1:
            return f
    except BaseException:
        f.close()
        raise
    return open_split(f, use_mmap=use_mmap)
