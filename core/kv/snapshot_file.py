"""Saving a KV snapshot to a file and loading it back, in this process or another.

Layout (little-endian):

    magic "LLAMAYKV" | u32 format version | 32-byte model fingerprint | u32 n_tokens | u32 n_groups
    i32 × n_tokens: the tokens
    per group: u32 n_layers, u32 kdim, u32 vdim, u32 first (positions before it were freed by a window)
               then K as f32 (n_layers, n_tokens - first, kdim), then V likewise
    32-byte SHA-256 of everything above

Loading checks the magic, the version, the fingerprint (a snapshot from another model is refused, not
misread) and the checksum (a damaged file is refused), all before any page is touched.
"""

from __future__ import annotations

import hashlib
import os
import struct
from array import array
from typing import TYPE_CHECKING

from ..errors import LlamayError
from .pages import NO_PAGE

if TYPE_CHECKING:
    from ..model.state import Snapshot, State

MAGIC = b"LLAMAYKV"
FORMAT_VERSION = 1
FINGERPRINT_BYTES = 32
HEADER = struct.Struct("<8sI32sII")
GROUP = struct.Struct("<IIII")


class SnapshotFileError(LlamayError):
    """A snapshot file that cannot be loaded here: wrong format, version, model, or damaged."""


def _first_present(table: tuple[int, ...] | list[int], page_size: int, n: int) -> int:
    j = 0
    while j < len(table) and table[j] == NO_PAGE:
        j += 1
    return min(n, j * page_size)


def save(st: State, snap: Snapshot, path: str | os.PathLike[str], fingerprint: bytes) -> None:
    be, ps = st.backend, st.page_size
    n = len(snap.tokens)
    parts = [HEADER.pack(MAGIC, FORMAT_VERSION, fingerprint, n, len(st.groups)), array("i", snap.tokens).tobytes()]
    for g, table in zip(st.groups, snap.tables, strict=True):
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
    tmp = os.fspath(path) + ".partial"
    with open(tmp, "wb") as f:
        f.write(body)
        f.write(hashlib.sha256(body).digest())
    os.replace(tmp, path)


def load(st: State, path: str | os.PathLike[str], fingerprint: bytes, seq: int | None = None) -> int:
    """A sequence holding the saved positions; the file is fully checked before anything is allocated."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SnapshotFileError(f"{name}: cannot read: {e.strerror or e}") from None
    if len(data) < HEADER.size + 32 or data[:8] != MAGIC:
        raise SnapshotFileError(f"{name}: not a llamay KV snapshot")
    body, digest = data[:-32], data[-32:]
    _magic, version, fp, n, n_groups = HEADER.unpack_from(body, 0)
    if version != FORMAT_VERSION:
        raise SnapshotFileError(f"{name}: snapshot format version {version}; this llamay reads {FORMAT_VERSION}")
    if fp != fingerprint:
        raise SnapshotFileError(f"{name}: the snapshot was made with a different model (fingerprint mismatch)")
    if hashlib.sha256(body).digest() != digest:
        raise SnapshotFileError(f"{name}: checksum mismatch: the file is damaged")
    if n_groups != len(st.groups) or n > st.n_ctx:
        raise SnapshotFileError(f"{name}: {n} positions in {n_groups} KV groups do not fit this state")
    at = HEADER.size
    tokens = array("i")
    tokens.frombytes(body[at : at + 4 * n])
    at += 4 * n
    plan = []
    for g in st.groups:
        n_layers, kdim, vdim, first = GROUP.unpack_from(body, at)
        at += GROUP.size
        if (n_layers, kdim, vdim) != (len(g.layers), g.kdim, g.vdim):
            raise SnapshotFileError(f"{name}: KV group {g.name} has another shape in the snapshot")
        plan.append((g, first, at))
        at += 4 * (n - first) * (kdim + vdim) * n_layers
    if at != len(body):
        raise SnapshotFileError(f"{name}: {len(body) - at} unexpected bytes after the KV data")

    seq = st.acquire() if seq is None else seq
    st.truncate(seq, 0)
    s = st.sequences[seq]
    be, ps = st.backend, st.page_size
    for (g, first, off), table in zip(plan, s.tables, strict=True):
        table.extend([NO_PAGE] * (first // ps))
        g.prepare_write(table, first - first % ps, n)
        for cache, dim in ((g.k, g.kdim), (g.v, g.vdim)):
            for li in range(len(g.layers)):
                base = li * g.n_slots * dim
                for p in range(first, n, ps):
                    count = min(ps, n - p)
                    values = array("f")
                    values.frombytes(body[off : off + 4 * count * dim])
                    off += 4 * count * dim
                    be.write_f32(cache, values, base + g.slot(table, p) * dim)
    s.tokens.extend(tokens.tolist())
    return seq
