"""llvm_pages: which mappings may be dropped (read-only, never copied on write), and that after a compile LLVM's
pages are out of the resident set while what numba compiled still runs, and the next compile still works."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

numba = pytest.importorskip("numba")

from llamay.native import llvm_pages  # noqa: E402
from llamay.native.numba_backend import NumbaBackend  # noqa: E402

pytestmark = [
    pytest.mark.native_only,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps and madvise: Linux"),
]

SMAPS = """\
7f0000000000-7f0000365000 r--p 00000000 fe:00 42    /site-packages/llvmlite/binding/libllvmlite.so
Rss:                1024 kB
Anonymous:             0 kB
7f0000365000-7f0005394000 r-xp 00365000 fe:00 42    /site-packages/llvmlite/binding/libllvmlite.so
Anonymous:             0 kB
7f0005394000-7f0009877000 r--p 05394000 fe:00 42    /site-packages/llvmlite/binding/libllvmlite.so
Anonymous:          1900 kB
7f0009877000-7f0009a3c000 rw-p 09677000 fe:00 42    /site-packages/llvmlite/binding/libllvmlite.so
Anonymous:             0 kB
7f000a000000-7f000a100000 r-xp 00000000 fe:00 43    /usr/lib/libLLVM-17.so.1
Anonymous:             0 kB
7f000b000000-7f000b100000 r-xp 00000000 fe:00 44    /usr/lib/libc.so.6
Anonymous:             0 kB
7f000c000000-7f000c100000 r--p 00000000 00:00 0
Anonymous:             0 kB
"""


def test_only_clean_read_only_mappings_of_llvm():
    found = llvm_pages.clean_mappings(SMAPS)
    assert found == [
        (0x7F0000000000, 0x365000),  # read-only, no private page
        (0x7F0000365000, 0x7F0005394000 - 0x7F0000365000),  # the code
        (0x7F000A000000, 0x100000),  # a system LLVM
    ]  # not: relocated read-only data (copied on write), writable data, another library, anonymous memory


def _llvm_resident_kib() -> int:
    """Resident KiB of the mappings llvm_pages drops."""
    regions = set(llvm_pages.clean_mappings(Path("/proc/self/smaps").read_text()))
    total, current = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        m = llvm_pages._MAPPING.fullmatch(line)
        if m:
            start, end = int(m[1], 16), int(m[2], 16)
            current = (start, end - start) in regions
        elif current and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def test_pages_leave_after_a_compile_and_compiled_code_still_runs():
    NumbaBackend()  # installs
    pages = llvm_pages.install()
    assert pages is not None and pages.regions
    ns: dict = {}
    exec("def f(x):\n    return x * 3 + 1\n", ns)  # a fresh function: numba compiles it (no cache)
    f = numba.njit(ns["f"])
    before = pages.releases
    assert f(2) == 7
    assert pages.releases == before + 1  # one outermost compile, one release (not one per nested compile)
    assert _llvm_resident_kib() < 1024  # LLVM ran for the compile; its pages are gone again
    assert f(5) == 16 and f(2.5) == 8.5  # the machine code stays (a second signature compiles again, pages back)
    assert pages.releases == before + 2
