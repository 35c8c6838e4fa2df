"""Progress of numba compiling the kernels, for a cold start (no cached machine code yet: some 30 s of silence
before `llamay serve` answers otherwise).

numba announces a "numba:compile" event only when a kernel is not in its cache, so a warm start prints nothing.
On a cold one, `compile_progress(say)` prints a line every few seconds: how many kernels are compiled so far, the
family (module of `llamay.native.kernels`) compiling now and the time so far; and one line at the end. No total:
which kernels a model needs depends on its tensor types (a count of the uncached kernels of the loaded modules
was 91 where SmolLM2 compiled 25, a misleading total).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from numba.core import event

KERNELS = "llamay.native.kernels."
EVERY = 3.0  # seconds between progress lines


class Progress(event.Listener):
    """A numba event listener counting the kernels compiled; `line()` says where compiling is."""

    def __init__(self, say: Callable[[str], None], every: float = EVERY) -> None:
        self.say, self.every = say, every
        self.t0 = time.perf_counter()
        self.last = -every
        self.done = 0
        self.family = ""
        self.lock = threading.Lock()

    def on_start(self, event: Any) -> None:
        module = getattr(event.data["dispatcher"].py_func, "__module__", "") or ""
        with self.lock:
            if module.startswith(KERNELS):  # not numba's own helpers, which it compiles on the way
                self.family = module.removeprefix(KERNELS)
            now = time.perf_counter() - self.t0
            if now - self.last >= self.every:
                self.last = now
                self.say(self.line(now))

    def on_end(self, event: Any) -> None:
        module = getattr(event.data["dispatcher"].py_func, "__module__", "") or ""
        if module.startswith(KERNELS):
            with self.lock:
                self.done += 1

    def line(self, now: float) -> str:
        return (f"llamay: compiling the kernels, once (numba caches them for the next start): {self.done} so far, "
                f"now {self.family or 'the first'}, {now:.0f} s")  # fmt: skip

    def summary(self) -> str | None:
        if not self.done:
            return None
        return f"llamay: compiled {self.done} kernels in {time.perf_counter() - self.t0:.0f} s (cached from now on)"


@contextlib.contextmanager
def compile_progress(say: Callable[[str], None], every: float = EVERY) -> Iterator[Progress]:
    """Report numba's compiling on `say` while the block runs (any thread's), and a summary line if it compiled."""
    progress = Progress(say, every)
    event.register("numba:compile", progress)
    try:
        yield progress
    finally:
        event.unregister("numba:compile", progress)
        summary = progress.summary()
        if summary:
            say(summary)
