"""Saving a KV snapshot to a file and loading it back, in this process or another.

Layout, format version 2 (little-endian):

    magic "LLAMAYKV" | u32 format version | 32-byte model fingerprint
    u32 n_tokens | u32 n_context | u32 n_groups | u32 label_bytes
    label: UTF-8, label_bytes long (what the snapshot was taken of, e.g. a server context's name)
    i32 × n_tokens: the tokens whose keys and values follow
    i32 × n_context: the tokens the snapshot stands for (a server context's; they share a prefix with the above)
    per group: u32 n_layers, u32 kdim, u32 vdim, u32 first (positions before it were freed by a window)
               then K as f32 (n_layers, n_tokens - first, kdim), then V likewise
    32-byte SHA-256 of everything above

One checksum covers everything that is read back (version 1 kept the context's tokens in an unchecked sidecar).
Loading has two halves: `read` does the file I/O and every check against a `Layout` of the State (on any
thread: it touches no page), `install` writes the checked data into a sequence (on the thread that owns the
State). So a file that is damaged, from another model, or that does not fit this State is refused, naming the
field, before anything is allocated. Writes are atomic: a temporary `.partial` file, fsync, rename.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import LlamayError
from .pages import NO_PAGE

if TYPE_CHECKING:
    from ..model.state import State
    from .cache import Snapshot

MAGIC = b"LLAMAYKV"
FORMAT_VERSION = 2
FINGERPRINT_BYTES = 32
DIGEST_BYTES = 32  # SHA-256
PREFIX = struct.Struct("<8sI32s")  # magic, version, fingerprint: the same in every version
COUNTS = struct.Struct("<IIII")  # n_tokens, n_context, n_groups, label_bytes
GROUP = struct.Struct("<IIII")  # n_layers, kdim, vdim, first
HEADER_BYTES = PREFIX.size + COUNTS.size
MAX_LABEL_BYTES = 255
PARTIAL = ".partial"  # suffix of a file being written (left behind only by a killed process)
F32 = I32 = 4


class SnapshotFileError(LlamayError):
    """A snapshot file that cannot be loaded here: wrong format, version, model, damaged, or not fitting."""


@dataclass(frozen=True)
class GroupShape:
    name: str
    n_layers: int
    kdim: int
    vdim: int
    window: int


@dataclass(frozen=True)
class Layout:
    """What a snapshot must match to be loaded into a State (read from the State once; immutable)."""

    n_ctx: int
    n_vocab: int
    groups: tuple[GroupShape, ...]

    @classmethod
    def of(cls, st: State, n_vocab: int | None = None) -> Layout:
        groups = tuple(GroupShape(g.name, len(g.layers), g.kdim, g.vdim, g.window) for g in st.kv.groups)
        return cls(st.n_ctx, n_vocab if n_vocab is not None else st.cfg.n_vocab, groups)

    @property
    def max_bytes(self) -> int:
        """The largest file a snapshot of this State can be (every position, the longest label)."""
        kv = sum(GROUP.size + F32 * self.n_ctx * (g.kdim + g.vdim) * g.n_layers for g in self.groups)
        return HEADER_BYTES + MAX_LABEL_BYTES + 2 * I32 * self.n_ctx + kv + DIGEST_BYTES


@dataclass(frozen=True)
class Header:
    """A snapshot file's header, read without the rest (for listings: not checked against the checksum)."""

    version: int
    fingerprint: bytes
    n_tokens: int
    n_context: int
    label: str


@dataclass(frozen=True)
class Saved:
    """A snapshot file read and fully checked, ready to `install`."""

    path: str
    layout: Layout
    label: str
    tokens: list[int]
    context: list[int]
    groups: tuple[tuple[int, int], ...]  # per group: (first position, offset of its K data in `data`)
    data: bytes


# -- saving ---------------------------------------------------------------------------------------------------


def _first_present(table: tuple[int, ...] | list[int], page_size: int, n: int) -> int:
    j = 0
    while j < len(table) and table[j] == NO_PAGE:
        j += 1
    return min(n, j * page_size)


def size(st: State, snap: Snapshot, n_context: int, label: str = "") -> int:
    """The bytes `encode` will make of `snap` (known before the work: a quota can refuse it first)."""
    n = len(snap.tokens)
    kv = 0
    for g, table in zip(st.kv.groups, snap.tables, strict=True):
        kv += GROUP.size + F32 * (n - _first_present(table, st.page_size, n)) * (g.kdim + g.vdim) * len(g.layers)
    return HEADER_BYTES + len(label.encode()) + I32 * (n + n_context) + kv + DIGEST_BYTES


def encode(st: State, snap: Snapshot, fingerprint: bytes, *, context: list[int] | None = None,
           label: str = "") -> bytes:  # fmt: skip
    """The file's bytes (on the thread that owns the State: it reads the KV cache). `context`: the tokens the
    snapshot stands for (default: its own)."""
    be, ps = st.backend, st.page_size
    n = len(snap.tokens)
    ctx = list(snap.tokens) if context is None else list(context)
    name = label.encode()
    if len(name) > MAX_LABEL_BYTES:
        raise SnapshotFileError(f"the label has {len(name)} bytes; a snapshot's holds at most {MAX_LABEL_BYTES}")
    parts = [PREFIX.pack(MAGIC, FORMAT_VERSION, fingerprint), COUNTS.pack(n, len(ctx), len(st.kv.groups), len(name)),
             name, array("i", snap.tokens).tobytes(), array("i", ctx).tobytes()]  # fmt: skip
    for g, table in zip(st.kv.groups, snap.tables, strict=True):
        first = _first_present(table, ps, n)
        parts.append(GROUP.pack(len(g.layers), g.kdim, g.vdim, first))
        for cache, dim in ((g.k, g.kdim), (g.v, g.vdim)):
            for li in range(len(g.layers)):
                base = li * g.n_slots * dim
                for p in range(first, n, ps):  # a page's positions are contiguous slots
                    count = min(ps, n - p)
                    values = be.read_f32(cache, base + g.slot(list(table), p) * dim, count * dim)
                    parts.append(array("f", values).tobytes())
    body = b"".join(parts)
    return body + hashlib.sha256(body).digest()


def write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write atomically: a reader sees the old file or the whole new one, never a part (OSError as it comes)."""
    name = os.fspath(path)
    tmp = name + PARTIAL
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError, AttributeError):  # the rename itself durable (not everywhere possible)
        fd = os.open(os.path.dirname(os.path.abspath(name)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save(st: State, snap: Snapshot, path: str | os.PathLike[str], fingerprint: bytes, **meta) -> int:
    """encode + write; returns the file's size."""
    data = encode(st, snap, fingerprint, **meta)
    write(path, data)
    return len(data)


# -- loading --------------------------------------------------------------------------------------------------


def peek(path: str | os.PathLike[str]) -> Header:
    """The header alone (version, fingerprint, counts, label) of a file in the current format."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            head = f.read(HEADER_BYTES + MAX_LABEL_BYTES)
    except OSError as e:
        raise SnapshotFileError(f"{name}: cannot read: {e.strerror or e}") from None
    version, fingerprint = _prefix(name, head, len(head) + DIGEST_BYTES)
    if version != FORMAT_VERSION or len(head) < HEADER_BYTES:
        return Header(version, fingerprint, 0, 0, "")
    n, n_context, _n_groups, label_bytes = COUNTS.unpack_from(head, PREFIX.size)
    label = head[HEADER_BYTES : HEADER_BYTES + min(label_bytes, MAX_LABEL_BYTES)].decode("utf-8", "replace")
    return Header(version, fingerprint, n, n_context, label)


def read(path: str | os.PathLike[str], layout: Layout, fingerprint: bytes) -> Saved:
    """Read and check a whole snapshot file: format, version, model, checksum, then every field against the
    layout. SnapshotFileError names the file and the field; nothing is allocated in any State."""
    name = os.fspath(path)
    limit = layout.max_bytes
    try:
        with open(name, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise SnapshotFileError(f"{name}: {size} bytes, more than any snapshot of this model and context "
                                        f"({limit} at most)")  # fmt: skip
            data = f.read(limit + 1)
    except OSError as e:
        raise SnapshotFileError(f"{name}: cannot read: {e.strerror or e}") from None
    if len(data) > limit:
        raise SnapshotFileError(f"{name}: more than {limit} bytes: larger than any snapshot of this model and context")
    version, fp = _prefix(name, data, len(data))
    if version != FORMAT_VERSION:
        raise SnapshotFileError(f"{name}: snapshot format version {version}; this llamay reads {FORMAT_VERSION}")
    if fp != fingerprint:
        raise SnapshotFileError(f"{name}: the snapshot was made with a different model (fingerprint mismatch)")
    if len(data) < HEADER_BYTES + DIGEST_BYTES:
        raise SnapshotFileError(f"{name}: truncated: {len(data)} bytes, less than a header and a checksum")
    body, digest = memoryview(data)[:-DIGEST_BYTES], data[-DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise SnapshotFileError(f"{name}: checksum mismatch: the file is damaged or truncated")
    return _fields(name, data, len(body), layout)


def _prefix(name: str, data: bytes, size: int) -> tuple[int, bytes]:
    if not data:
        raise SnapshotFileError(f"{name}: empty file: not a llamay KV snapshot")
    if data[: len(MAGIC)] != MAGIC[: len(data)]:
        raise SnapshotFileError(f"{name}: not a llamay KV snapshot (no {MAGIC.decode()} magic)")
    if size < PREFIX.size + DIGEST_BYTES:
        raise SnapshotFileError(f"{name}: truncated: {size} bytes, less than a header and a checksum")
    _magic, version, fingerprint = PREFIX.unpack_from(data, 0)
    return version, fingerprint


class _Cursor:
    """Reads fields of a checked body in order; a field past the end is a clear error, not a struct.error."""

    def __init__(self, name: str, data: bytes, end: int) -> None:
        self.name, self.data, self.end, self.at = name, data, end, HEADER_BYTES

    def take(self, n: int, field: str) -> int:
        if self.at + n > self.end:
            raise SnapshotFileError(f"{self.name}: {field} runs past the end of the data ({self.end - self.at} "
                                    f"bytes left, {n} needed)")  # fmt: skip
        at = self.at
        self.at += n
        return at

    def ints(self, count: int, field: str) -> list[int]:
        at = self.take(I32 * count, field)
        values = array("i")
        values.frombytes(self.data[at : at + I32 * count])
        return values.tolist()


def _fields(name: str, data: bytes, end: int, layout: Layout) -> Saved:
    n, n_context, n_groups, label_bytes = COUNTS.unpack_from(data, PREFIX.size)
    err = SnapshotFileError
    if n_groups != len(layout.groups):
        raise err(f"{name}: n_groups is {n_groups}; this model has {len(layout.groups)} KV groups")
    for field, value in (("n_tokens", n), ("n_context", n_context)):
        if value > layout.n_ctx:
            raise err(f"{name}: {field} is {value}; the context holds {layout.n_ctx} positions")
    if label_bytes > MAX_LABEL_BYTES:
        raise err(f"{name}: label_bytes is {label_bytes}; at most {MAX_LABEL_BYTES}")
    cur = _Cursor(name, data, end)
    at = cur.take(label_bytes, "label")
    try:
        label = data[at : at + label_bytes].decode()
    except UnicodeDecodeError as e:
        raise err(f"{name}: label is not UTF-8 (byte {e.start})") from None
    tokens = cur.ints(n, "tokens")
    context = cur.ints(n_context, "context")
    for field, ids in (("tokens", tokens), ("context", context)):
        bad = next((i for i, t in enumerate(ids) if not 0 <= t < layout.n_vocab), None)
        if bad is not None:
            raise err(f"{name}: {field}[{bad}] is {ids[bad]}, outside the vocabulary of {layout.n_vocab}")
    groups = []
    for shape in layout.groups:
        n_layers, kdim, vdim, first = GROUP.unpack_from(data, cur.take(GROUP.size, f"group {shape.name}"))
        if (n_layers, kdim, vdim) != (shape.n_layers, shape.kdim, shape.vdim):
            raise err(f"{name}: group {shape.name} has n_layers={n_layers}, kdim={kdim}, vdim={vdim}; this model's "
                      f"has {shape.n_layers}, {shape.kdim}, {shape.vdim}")  # fmt: skip
        bound = max(0, n - shape.window + 1) if shape.window else 0  # what the next position still reads
        if first > bound:
            why = f"the next position reads the last {shape.window}" if shape.window else "it keeps every position"
            raise err(f"{name}: group {shape.name}: first is {first}; {why} (first must be at most {bound})")
        groups.append((first, cur.take(F32 * (n - first) * (kdim + vdim) * n_layers, f"group {shape.name} KV")))
    if cur.at != end:
        raise err(f"{name}: {end - cur.at} unexpected bytes after the KV data")
    return Saved(name, layout, label, tokens, context, tuple(groups), data)


def install(st: State, saved: Saved, seq: int) -> None:
    """Write a checked snapshot into sequence `seq` (emptied first). On any error (OutOfPages: the pool is full)
    the sequence is left empty, its pages given back."""
    if Layout.of(st, saved.layout.n_vocab) != saved.layout:
        raise SnapshotFileError(f"{saved.path}: was checked against another State's layout")
    st.kv.truncate(seq, 0)
    s = st.kv.sequences[seq]
    be, ps = st.backend, st.page_size
    n = len(saved.tokens)
    try:
        for (first, off), g, table in zip(saved.groups, st.kv.groups, s.tables, strict=True):
            table.extend([NO_PAGE] * (first // ps))
            g.prepare_write(table, first - first % ps, n)
            for cache, dim in ((g.k, g.kdim), (g.v, g.vdim)):
                for li in range(len(g.layers)):
                    base = li * g.n_slots * dim
                    for p in range(first, n, ps):
                        count = min(ps, n - p)
                        values = array("f")
                        values.frombytes(saved.data[off : off + F32 * count * dim])
                        off += F32 * count * dim
                        be.write_f32(cache, values, base + g.slot(table, p) * dim)
    except BaseException:
        st.kv.truncate(seq, 0)
        raise
    s.tokens.extend(saved.tokens)


def load(st: State, path: str | os.PathLike[str], fingerprint: bytes, seq: int | None = None,
         n_vocab: int | None = None) -> int:  # fmt: skip
    """read + install into `seq` or a new sequence (given back on any error); returns the sequence."""
    saved = read(path, Layout.of(st, n_vocab), fingerprint)
    if seq is not None:
        install(st, saved, seq)
        return seq
    with st.kv.claimed() as new:
        install(st, saved, new)
    return new
