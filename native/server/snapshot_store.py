"""The snapshot files a server keeps in its `--snapshot-dir`: listing, the quota, writes and deletes.

The folder is the index (files may come from an earlier run): `{id}.llkv` files in `llamay.kv.snapshot_file`'s
format. Every file operation runs in a worker thread, never on the event loop. A quota bounds the files' number
and total size (`--max-snapshots`, `--max-snapshot-bytes`); a snapshot past it is refused with 507 Insufficient
Storage naming the limit, and a write in flight counts against it from the moment it is accepted. Leftovers of
writes a killed process interrupted (`*.partial`) are removed when the store opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llamay.kv import snapshot_file

from .errors import ApiError

SUFFIX = ".llkv"
ID_PATTERN = r"^[0-9a-f]{8,64}$"
DEFAULT_MAX_SNAPSHOTS = 32
DEFAULT_MAX_SNAPSHOT_BYTES = 1 << 30  # 1 GiB: the default folder is a temporary one, often in memory (tmpfs)
FULL = 507  # Insufficient Storage


@dataclass(frozen=True)
class Entry:
    id: str
    path: Path
    bytes: int
    created: int


class SnapshotStore:
    def __init__(self, directory: Path, fingerprint: bytes, max_count: int, max_bytes: int) -> None:
        if max_count < 1 or max_bytes < 1:
            raise ValueError("the snapshot quota must allow at least one snapshot of at least one byte")
        self.dir = directory
        self.fingerprint = fingerprint
        self.max_count = max_count
        self.max_bytes = max_bytes
        self._reserved: dict[str, int] = {}  # writes in flight: id -> bytes
        self.dir.mkdir(parents=True, exist_ok=True)
        for leftover in self.dir.glob(f"*{snapshot_file.PARTIAL}"):
            leftover.unlink(missing_ok=True)

    def path(self, sid: str) -> Path:
        return self.dir / f"{sid}{SUFFIX}"

    # -- reading the folder (worker thread) -----------------------------------------------------------------

    def _scan(self) -> list[Entry]:
        entries = []
        with os.scandir(self.dir) as it:
            for e in it:
                sid = e.name.removesuffix(SUFFIX)
                if e.name.endswith(SUFFIX) and re.match(ID_PATTERN, sid) and e.is_file(follow_symlinks=False):
                    with contextlib.suppress(FileNotFoundError):  # deleted meanwhile
                        st = e.stat(follow_symlinks=False)
                        entries.append(Entry(sid, Path(e.path), st.st_size, int(st.st_mtime)))
        return sorted(entries, key=lambda x: (x.created, x.id))

    def _describe(self, entry: Entry) -> dict[str, Any]:
        info = {"snapshot": entry.id, "context": None, "n_tokens": None, "bytes": entry.bytes,
                "created": entry.created, "error": None}  # fmt: skip
        try:
            head = snapshot_file.peek(entry.path)
        except snapshot_file.SnapshotFileError as e:
            return {**info, "error": str(e).removeprefix(f"{entry.path}: ")}
        if head.version != snapshot_file.FORMAT_VERSION:
            info["error"] = f"format version {head.version}; this llamay reads {snapshot_file.FORMAT_VERSION}"
        elif head.fingerprint != self.fingerprint:
            info["error"] = "made with a different model"
        else:
            info.update(context=head.label or None, n_tokens=head.n_context)
        return info

    async def list(self) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            entries = self._scan()
            return {"object": "list", "data": [self._describe(e) for e in entries], **self._usage(entries)}

        return await asyncio.to_thread(run)

    def _usage(self, entries: list[Entry]) -> dict[str, int]:
        return {"count": len(entries), "bytes": sum(e.bytes for e in entries), "max_count": self.max_count,
                "max_bytes": self.max_bytes}  # fmt: skip

    async def info(self, sid: str) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            path = self.path(sid)
            try:
                st = path.stat()
            except FileNotFoundError:
                raise _missing(sid) from None
            return self._describe(Entry(sid, path, st.st_size, int(st.st_mtime)))

        return await asyncio.to_thread(run)

    # -- quota ----------------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def reserving(self, nbytes: int, sid: str | None = None) -> AsyncIterator[str]:
        """A new snapshot's id (or `sid`, which a write then replaces: a slot's file), its bytes counted against
        the quota from now on (so snapshots made at once cannot pass it together) until it is written or given
        up; 507 at once when it does not fit; 409 while another write of `sid` is in flight."""
        if sid is not None and sid in self._reserved:
            raise ApiError(409, "this snapshot file is being written by another request", code="snapshot_busy")
        sid = sid or uuid.uuid4().hex[:16]
        self._reserved[sid] = nbytes
        try:
            await self._check_room(sid)
            yield sid
        finally:
            del self._reserved[sid]

    async def _check_room(self, sid: str) -> None:
        entries = await asyncio.to_thread(self._scan)
        others = {k: v for k, v in self._reserved.items() if k != sid}
        count = len(entries) + len(others)
        used = sum(e.bytes for e in entries) + sum(others.values())
        if count + 1 > self.max_count:
            raise ApiError(FULL, f"the snapshot quota is full: {count} snapshots, at most {self.max_count} "
                           "(--max-snapshots); delete some: DELETE /llamay/snapshots/{id}",
                           code="snapshot_quota_full")  # fmt: skip
        if used + self._reserved[sid] > self.max_bytes:
            raise ApiError(FULL, f"the snapshot quota is full: {used} bytes used + {self._reserved[sid]} for this "
                           f"one > {self.max_bytes} (--max-snapshot-bytes); delete some: "
                           "DELETE /llamay/snapshots/{id}", code="snapshot_quota_full")  # fmt: skip

    # -- writing and deleting -------------------------------------------------------------------------------

    async def write(self, sid: str, data: bytes) -> Entry:
        """Write a reserved snapshot (atomically, in a worker thread)."""
        if len(data) > self._reserved[sid]:
            raise ApiError(500, f"the snapshot has {len(data)} bytes, not the {self._reserved[sid]} reserved")
        try:
            await asyncio.to_thread(snapshot_file.write, self.path(sid), data)
        except OSError as e:
            full = e.errno in (errno.ENOSPC, errno.EDQUOT)
            raise ApiError(FULL if full else 500, f"cannot write the snapshot: {e.strerror or e}",
                           code="snapshot_write_failed") from None  # fmt: skip
        return Entry(sid, self.path(sid), len(data), int(time.time()))

    async def delete(self, sid: str) -> None:
        try:
            await asyncio.to_thread(self.path(sid).unlink)
        except FileNotFoundError:
            raise _missing(sid) from None


def _missing(sid: str) -> ApiError:
    return ApiError(404, f"no snapshot {sid!r}", param="snapshot", code="snapshot_not_found")
