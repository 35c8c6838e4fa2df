"""Content-addressed blobs: `blobs/sha256-<hex>` holds exactly the bytes whose SHA-256 is <hex>.

A blob is written to a temporary file in blobs/ (`.partial-*`, a dotfile nothing lists or serves), hashed while
written, synced, and renamed to the name of its finished bytes' digest: it is never installed under another
name, and never half-written (a rename is all or nothing). Its writer holds an flock on the temporary file for
as long as it writes; a temporary file nobody holds is what a killed writer left, and `remove_stale` deletes it
(the next writer runs it first). Writes are atomic in the same way for manifests (`write_atomic`).

`LLAMAY_STORE_KILL_AT=<point>[:<signal>]` makes this process send itself SIGKILL (or the signal named) at that
point, for the tests: blob-opened, blob-writing, blob-written, blob-synced, blob-installed, manifest-written.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from llamay.errors import LlamayError

PREFIX = "sha256-"
TEMP = ".partial-"
HEX_DIGITS = 64
CHUNK = 1 << 20
KILL_AT = "LLAMAY_STORE_KILL_AT"
Progress = Callable[[int], object]  # told the bytes done so far


class BlobError(LlamayError):
    """A blob that is missing, damaged or not what was expected (digest, size)."""


def checkpoint(point: str) -> None:
    """The test hook: die here, as a crash would (or take the signal asked for), when asked to."""
    asked = os.environ.get(KILL_AT, "")
    if asked.split(":")[0] == point:
        os.kill(os.getpid(), getattr(signal, asked.partition(":")[2] or "SIGKILL"))


def parse_digest(digest: str) -> str:
    """The hex of `sha256:<hex>` or `sha256-<hex>`; BlobError for anything else (never a path)."""
    for sep in (":", "-"):
        if digest.startswith("sha256" + sep):
            hexa = digest[7:]
            if len(hexa) == HEX_DIGITS and all(c in "0123456789abcdef" for c in hexa.lower()):
                return hexa.lower()
    raise BlobError(f"{digest!r} is not a sha256 digest (sha256:<64 hex digits>)")


def sync_dir(path: Path) -> None:
    """fsync a folder, so a rename in it survives a power cut."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def open_locked(folder: Path) -> tuple[int, Path]:
    """A new temporary file in `folder`, flock()ed by us, still linked under its name once locked (a clean-up
    that took it for stale between its creation and our lock deleted it: then another is made)."""
    while True:
        fd, name = tempfile.mkstemp(prefix=TEMP, dir=folder)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(name).st_ino == os.fstat(fd).st_ino:
                return fd, Path(name)
        except FileNotFoundError:
            pass
        os.close(fd)


class BlobWriter:
    """Bytes on their way to becoming a blob. `finish()` installs them under their digest (and returns it); any
    other way out, `abort()`, removes the temporary file. `expect` (hex) refuses bytes of another digest."""

    def __init__(self, blobs: Path, expect: str | None = None) -> None:
        blobs.mkdir(parents=True, exist_ok=True)
        self.blobs, self.expect = blobs, expect
        self.fd, self.temp = open_locked(blobs)
        self.hash = hashlib.sha256()
        self.size = 0
        checkpoint("blob-opened")

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        self.hash.update(data)
        self.size += len(data)
        checkpoint("blob-writing")

    def copy_from(self, src: BinaryIO, progress: Progress | None = None) -> None:
        while chunk := src.read(CHUNK):
            self.write(chunk)
            if progress:
                progress(self.size)

    def finish(self) -> str:
        """Sync the bytes and rename them to blobs/sha256-<their digest>; the hex digest."""
        checkpoint("blob-written")
        digest = self.hash.hexdigest()
        if self.expect is not None and digest != self.expect:
            self.abort()
            raise BlobError(f"the bytes written have SHA-256 {digest}, not the expected {self.expect}")
        os.fsync(self.fd)
        checkpoint("blob-synced")
        final = self.blobs / f"{PREFIX}{digest}"
        os.replace(self.temp, final)  # a blob there already has these very bytes
        os.chmod(final, 0o644)
        sync_dir(self.blobs)
        checkpoint("blob-installed")
        os.close(self.fd)
        self.fd = -1
        return digest

    def abort(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(FileNotFoundError):
                self.temp.unlink()
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> BlobWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()  # after finish() there is nothing left to remove


def write_bytes(blobs: Path, data: bytes) -> str:
    with BlobWriter(blobs) as w:
        w.write(data)
        return w.finish()


def write_atomic(path: Path, data: bytes, point: str = "manifest-written") -> None:
    """`path` holds `data` whole or keeps what it held: a locked temporary file beside it, synced, renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = open_locked(path.parent)
    try:
        os.fchmod(fd, 0o644)  # readable as Ollama's manifests are (mkstemp makes 0600)
        os.write(fd, data)
        os.fsync(fd)
        checkpoint(point)
        os.replace(temp, path)
        sync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
    finally:
        os.close(fd)


def link_in(blobs: Path, src: Path, digest: str) -> bool:
    """Install `src` (whose bytes were just hashed to `digest`) as a blob by hard link, no copy: a link under a
    temporary name, checked to be the same file, renamed into place. False where the file system cannot link
    (another device): the caller copies instead."""
    blobs.mkdir(parents=True, exist_ok=True)
    final = blobs / f"{PREFIX}{digest}"
    if final.exists():
        return True
    fd, temp = open_locked(blobs)
    src_fd = os.open(src, os.O_RDONLY)
    try:
        # the link is src's inode: locked through src from before the link exists, so a clean-up (which takes
        # only the temporary files it can lock) leaves it alone
        fcntl.flock(src_fd, fcntl.LOCK_SH)
        os.unlink(temp)  # the name only: our linked copy takes it
        try:
            os.link(src, temp)
        except OSError:
            return False
        if os.stat(temp).st_ino != os.fstat(src_fd).st_ino:
            raise BlobError(f"{src} changed while it was being linked into the store")
        os.replace(temp, final)
        sync_dir(blobs)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        os.close(src_fd)
        os.close(fd)


def iter_temps(folder: Path) -> Iterator[Path]:
    if folder.is_dir():
        yield from (p for p in folder.iterdir() if p.name.startswith(TEMP))


def remove_stale(folder: Path, recursive: bool = False) -> list[Path]:
    """Delete the temporary files no writer holds (killed writers' leftovers) in `folder` (and below)."""
    removed = []
    folders = [folder] + ([p for p in folder.rglob("*") if p.is_dir()] if recursive and folder.is_dir() else [])
    for d in folders:
        for p in iter_temps(d):
            try:
                fd = os.open(p, os.O_RDONLY)
            except (FileNotFoundError, IsADirectoryError):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue  # a writer is at work
            try:
                if os.stat(p).st_ino == os.fstat(fd).st_ino:
                    p.unlink()
                    removed.append(p)
            except FileNotFoundError:
                pass
            finally:
                os.close(fd)
    return removed


def problem(path: Path, size: int, hexa: str, verify: bool = False) -> str | None:
    """What is wrong with the file that should hold `size` bytes of SHA-256 `hexa`: missing, of another size, or
    (`verify`: hashed whole) of another digest; None when nothing is. Every integrity check in the store is this one
    (`llamay list --verify`, `llamay models --verify`, `pull --verify`)."""
    try:
        got = path.stat().st_size
    except FileNotFoundError:
        return "missing"
    if got != size:
        return f"{got:,} bytes where there should be {size:,} (truncated or damaged)"
    if verify and (digest := hash_file(path)) != hexa:
        return f"SHA-256 {digest} is not the expected {hexa} (damaged)"
    return None


def hash_file(path: Path, progress: Progress | None = None) -> str:
    h, done = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            done += len(chunk)
            if progress:
                progress(done)
    return h.hexdigest()
