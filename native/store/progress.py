"""A progress bar on stderr for pulls, imports and copies: bytes done of the total, rate and time left.

Drawn only when the stream is a terminal (a pipe or a log gets nothing), at most ten times a second, and ended
with a newline; the rate is over the whole transfer so far.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

BAR = 24  # characters of the bar
INTERVAL = 0.1  # seconds between redraws
UNITS = (("GB", 10**9), ("MB", 10**6), ("kB", 10**3))  # decimal, as `ollama list` counts


Listener = Callable[[str, int, int], object]  # told (label, bytes done, total)
_listening = threading.local()


@contextlib.contextmanager
def reporting(listener: Listener) -> Iterator[None]:
    """Every Progress made on this thread within the block also tells `listener` (a server streams pulls' progress
    this way); listeners are called from the thread that reports, which may be another."""
    previous = getattr(_listening, "fn", None)
    _listening.fn = listener
    try:
        yield
    finally:
        _listening.fn = previous


def human_bytes(n: float) -> str:
    for unit, scale in UNITS:
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def line(label: str, done: int, total: int, elapsed: float) -> str:
    """One frame: `label [#####-----] 12.0 MB / 98.4 MB  4.0 MB/s  0:19 left`."""
    frac = min(done / total, 1.0) if total > 0 else 0.0
    fill = int(frac * BAR)
    rate = done / elapsed if elapsed > 0 else 0.0
    left = clock((total - done) / rate) if rate > 0 and total > done else "--:--" if total > done else "0:00"
    return (f"{label} [{'#' * fill}{'-' * (BAR - fill)}] {human_bytes(done)} / {human_bytes(total)} "
            f"{human_bytes(rate)}/s {left} left")  # fmt: skip


class Progress:
    """Call it with the bytes done so far; `close()` when finished."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None) -> None:
        self.label, self.total = label, total
        self.stream = stream or sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.drawn = 0.0
        self.done = 0
        self.listener: Listener | None = getattr(_listening, "fn", None)

    def __call__(self, done: int) -> None:
        self.done = done
        if self.listener is not None:
            self.listener(self.label, done, self.total)
        now = time.monotonic()
        if self.enabled and (now - self.drawn >= INTERVAL or done >= self.total):
            self.drawn = now
            self.stream.write("\r" + line(self.label, done, self.total, now - self.start) + "\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.drawn:
            self.stream.write("\r" + line(self.label, self.done, self.total, time.monotonic() - self.start) + "\n")
            self.stream.flush()
