"""Progress of numba compiling the kernels, for a cold start (no cached machine code yet: some 30 s of silence
before `llamay serve` answers otherwise).

numba announces a "numba:compile" event only when a kernel is not in its cache, so a warm start prints nothing.
On a cold one, `compile_progress(say)` prints a line every few seconds while numba compiles: how many kernels are
compiled so far, the family (module of `llamay.native.kernels`) compiling now and the time since the first
compile; and one line at the end. No total:
which kernels a model needs depends on its tensor types (a count of the uncached kernels of the loaded modules
was 91 where SmolLM2 compiled 25, a misleading total).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from numba.core import event

KERNELS = "llamay.native.kernels."
EVERY = 3.0  # seconds between progress lines


class Progress(event.Listener):
    """A numba event listener counting the kernels compiled; `tick()` prints where compiling is, at most every
    `every` seconds (a ticker thread calls it: one kernel may take many seconds)."""

    def __init__(self, say: Callable[[str], None], every: float = EVERY) -> None:
        self.say, self.every = say, every
        self.t0: float | None = None  # the first compile's start
        self.last = -math.inf
        self.active = 0  # compiles under way (numba nests them: a kernel compiles what it calls)
        self.done = 0
        self.family = ""
        self.lock = threading.Lock()

    def on_start(self, event: Any) -> None:
        module = getattr(event.data["dispatcher"].py_func, "__module__", "") or ""
        with self.lock:
            self.active += 1
            if self.t0 is None:
                self.t0 = time.perf_counter()
            if module.startswith(KERNELS):  # not numba's own helpers, which it compiles on the way
                self.family = module.removeprefix(KERNELS)
        self.tick()

    def on_end(self, event: Any) -> None:
        module = getattr(event.data["dispatcher"].py_func, "__module__", "") or ""
        with self.lock:
            self.active -= 1
            self.done += module.startswith(KERNELS)

    def tick(self) -> None:
        with self.lock:
            if not self.active or self.t0 is None:
                return
            now = time.perf_counter()
            if now - self.last < self.every:
                return
            self.last = now
            line = (f"llamay: compiling the kernels, once (numba caches them for the next start): {self.done} so "
                    f"far, now {self.family or 'the first'}, {now - self.t0:.0f} s")  # fmt: skip
        self.say(line)

    def summary(self) -> str | None:
        if not self.done or self.t0 is None:
            return None
        return f"llamay: compiled {self.done} kernels in {time.perf_counter() - self.t0:.0f} s (cached from now on)"


@contextlib.contextmanager
def compile_progress(say: Callable[[str], None], every: float = EVERY) -> Iterator[Progress]:
    """Report numba's compiling on `say` while the block runs (any thread's), and a summary line if it compiled."""
    progress = Progress(say, every)
    stopped = threading.Event()

    def ticker() -> None:
        while not stopped.wait(every):
            progress.tick()

    event.register("numba:compile", progress)
    thread = threading.Thread(target=ticker, name="llamay-compile-progress", daemon=True)
    if every > 0:
        thread.start()
    try:
        yield progress
    finally:
        stopped.set()
        event.unregister("numba:compile", progress)
        if thread.is_alive():
            thread.join()
        summary = progress.summary()
        if summary:
            say(summary)
