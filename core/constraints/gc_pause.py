"""Python's cyclic garbage collector held off while a lazy rule compiles (compile._Compiler.compile_rule).

A rule's compile, in the middle of a mask, is a burst of allocations that mostly survive (grammar nodes, lazy
rules, program lists). Left on, the collector runs every few hundred of them, and each object that survives two
young collections counts toward a full one, which walks every tracked object of the process: on
JSONSchemaBench's slice 0 the full collections were about half of the time masks spent compiling lazy rules (54
of them at ~180 ms). Held off, the burst's young objects are looked at once when it ends, and the full
collections become rare. A rule's burst is bounded by max_work, so the garbage it may leave uncollected
meanwhile is too; a whole schema's compile is not paused (its cyclic garbage, uncollected for a second, raised
the peak memory of the largest schema of the sample from 87 to 131 MB). Pauses nest and may overlap across
threads: the collector comes back when the last one ends, and only if it was on when the first began.
"""

from __future__ import annotations

import gc
import threading


class _Pause:
    """A re-entrant, thread-safe `with` block that keeps the collector off (one instance: `gc_paused`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0  # pauses open, in every thread
        self.restore = False  # whether the collector was on when the first of them began

    def __enter__(self) -> None:
        with self.lock:
            if not self.depth:
                self.restore = gc.isenabled()
                gc.disable()
            self.depth += 1

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.depth -= 1
            if not self.depth and self.restore:
                gc.enable()


gc_paused = _Pause()
