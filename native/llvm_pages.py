"""LLVM's pages handed back to the OS whenever numba is done compiling: a smaller resident set for a loaded model.

numba needs LLVM (llvmlite's shared library, some 150 MB of code and read-only data) only while it compiles a
kernel or loads one from its cache; a running kernel never calls into it. The pages it touches on the way (about
40 MiB at `import numba`, 30 more at the first load from the cache) would stay in this process's resident set for
good, as much again as a small model's weights. So every time numba's compiler lock is released by its last holder
(every compile and every cache load holds it), the library's read-only mappings are advised MADV_DONTNEED: their
pages leave this process but stay in the OS's page cache, and the next compile maps back what it touches (a few
milliseconds). Only mappings that are not writable and hold no private (copied-on-write) page are advised, so no
content is lost: a private file mapping that was never written reads the file again.

Linux only (/proc/self/smaps and madvise); elsewhere `install()` does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import re
from pathlib import Path
from typing import Any

from numba.core import event
from numba.core.compiler_lock import global_compiler_lock

LIBRARIES = ("libllvmlite", "libLLVM")  # llvmlite's wheels link LLVM into libllvmlite; some builds link a libLLVM
SMAPS = Path("/proc/self/smaps")
_MAPPING = re.compile(r"([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+ *(.*)")


def clean_mappings(smaps: str, libraries: tuple[str, ...] = LIBRARIES) -> list[tuple[int, int]]:
    """(start, length) of every mapping of the libraries in an smaps text that is not writable and has no
    anonymous page: the ones whose pages can be dropped and read back from the file unchanged."""
    found, current = [], None
    for line in smaps.splitlines():
        m = _MAPPING.fullmatch(line)
        if m:
            start, end, perms, path = int(m[1], 16), int(m[2], 16), m[3], m[4]
            name = path.rsplit("/", 1)[-1]
            current = [start, end - start] if "w" not in perms and name.startswith(libraries) else None
        elif current is not None and line.startswith("Anonymous:"):
            if int(line.split()[1]) == 0:
                found.append((current[0], current[1]))
            current = None
    return found


class LLVMPages(event.Listener):
    """Drops the clean mappings' pages (`release`) after each outermost compile: a numba event listener."""

    def __init__(self, regions: list[tuple[int, int]]) -> None:
        self.regions = regions
        self.releases = 0  # how often the pages were dropped (for tests and reports)
        libc = ctypes.CDLL(None, use_errno=True)
        self._madvise = libc.madvise
        self._madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)

    def release(self) -> None:
        for start, length in self.regions:
            if self._madvise(start, length, mmap.MADV_DONTNEED) != 0:
                raise OSError(ctypes.get_errno(), f"madvise of LLVM's pages at {start:#x} failed")
        self.releases += 1

    def on_start(self, event: Any) -> None:
        pass

    def on_end(self, event: Any) -> None:
        if not global_compiler_lock.is_locked():  # the outermost compile of this thread is over
            self.release()


@functools.cache
def install() -> LLVMPages | None:
    """Drop LLVM's pages now and after every compile from now on; the listener, or None where this cannot be
    done (not Linux, or no library found). Once per process."""
    if not hasattr(mmap, "MADV_DONTNEED") or not SMAPS.exists():
        return None
    regions = clean_mappings(SMAPS.read_text())
    if not regions:
        return None
    pages = LLVMPages(regions)
    pages.release()
    event.register("numba:compiler_lock", pages)
    return pages
