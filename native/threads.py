"""How many threads a kernel runs on: numba's parallel loops, guarded against a busy machine.

A parallel kernel ends when its slowest thread does. On a machine shared with other busy processes the OS now
and then preempts one of our threads, and a kernel that takes 50 µs waits a whole time slice (4-12 ms) instead;
one decode step runs some 200 such kernels, so a few preemptions cost more than the second thread saves. Hence:

- below `small_work` multiply-adds a kernel runs on one thread (fork and join cost what a second thread saves);
- from `big_work` up it runs on all of them (its work hides a stall);
- in between it runs on all of them while they keep up: the caller reports how long each took (`observe`), and
  after STALLS of them took longer than STALL_S within the last WINDOW, the next BACK_OFF run on one thread
  before all threads are tried again.
"""

from __future__ import annotations

from collections import deque

SMALL_WORK = 200_000  # multiply-adds: about 10 µs on one core
BIG_WORK = 4_000_000  # about 200 µs on one core
STALL_S = 0.002  # a small kernel that took this long waited for a preempted thread
STALLS = 3
WINDOW = 2_000  # small parallel kernels (about ten decode steps of a small model)
BACK_OFF = 20_000  # small kernels run on one thread after a back-off (about a hundred decode steps)


class ThreadPolicy:
    def __init__(self, n_threads: int, small_work: int = SMALL_WORK, big_work: int = BIG_WORK) -> None:
        self.n_threads = n_threads
        self.small_work = small_work
        self.big_work = big_work
        self._seen = 0  # small kernels run on all threads so far
        self._stalls: deque[int] = deque()  # when (in _seen) the recent stalls happened
        self._serial_left = 0  # small kernels still to run on one thread
        self.back_offs = 0  # how often the policy backed off (for reports and tests)

    def threads(self, work: int) -> int:
        """Threads for a kernel of `work` multiply-adds; if it is more than one and `watched(work)`, report the
        kernel's duration to `observe`."""
        if self.n_threads == 1 or work < self.small_work:
            return 1
        if work >= self.big_work:
            return self.n_threads
        if self._serial_left:
            self._serial_left -= 1
            return 1
        return self.n_threads

    def watched(self, work: int) -> bool:
        return self.small_work <= work < self.big_work

    def observe(self, seconds: float) -> None:
        """The duration of a small kernel that ran on all threads."""
        self._seen += 1
        if seconds < STALL_S:
            return
        self._stalls.append(self._seen)
        while self._stalls[0] <= self._seen - WINDOW:
            self._stalls.popleft()
        if len(self._stalls) >= STALLS:
            self._stalls.clear()
            self._serial_left = BACK_OFF
            self.back_offs += 1
