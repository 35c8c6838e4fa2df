"""The scheduler: one thread owns the model, its State and the Batcher; HTTP handlers talk to it through a bounded
queue and get their tokens back on asyncio queues.

    event loop (HTTP)                          model thread
    ─────────────────                          ────────────
    submit(jobs) ──► pending (≤ --queue) ──►  admit while the Batcher has a sequence and pages
       full: QueueFull → 429                   step(): one forward over every running sequence
    cancel(job)  ──► control ops ─────────►   (decode tokens + a chunk of each prefill)
    call(fn)     ──►                            │
    Sink.queue   ◄── call_soon_threadsafe ◄─── events of the step, grouped per request, one wake-up a step

KV is acquired at admission, not at submission: a queued job holds nothing. Admission adopts the longest prefix
the radix cache holds (every request goes through it), and chunked prefill keeps a long prompt from stalling
the decoders. A job ends by its length, an end-of-generation token, a cancel (client gone, stop string) or
its deadline; its sequence is then released and its whole pages stay in the prefix cache.

Everything that touches the State runs on the model thread: control ops (cancels, context operations) are
run between steps, in the order they were sent. An op that needs a sequence waits for one, but not forever: it
fails (503) when no running job could free one, or after the request timeout.

One job's failure is that job's alone (the Batcher ends only the request whose sampling or forward failed).
Whenever the model thread goes idle it audits the KV accounting (`KVCache.audit`, `Batcher.audit`: every page's
count equals its owners, no sequence without a running job); `problems` is what `/health` reports.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import math
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llamay.batcher import Batcher, Request
from llamay.errors import LlamayError
from llamay.kv.cache import Snapshot
from llamay.model import Model
from llamay.model.state import State

from .metrics import Metrics

log = logging.getLogger("llamay.server")

IDLE_TICK = 0.05  # seconds between deadline checks while jobs wait and nothing runs (paused)


class QueueFull(LlamayError):
    def __init__(self, depth: int, retry_after: int) -> None:
        super().__init__(f"the queue is full ({depth} waiting); retry in {retry_after} s")
        self.retry_after = retry_after


class JobFailed(LlamayError):
    """A job that could not run (its prompt cannot fit the KV cache, the model raised)."""

    def __init__(self, message: str, status: int = 500, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Update:
    """What the model thread tells a request: a token, an end, or a failure."""

    job: Job
    token: int | None = None
    logprob: float | None = None
    top: tuple[tuple[int, float], ...] = ()
    finish: str | None = None  # stop | length | cancelled | timeout
    error: JobFailed | None = None


class Sink:
    """A request's inbox in the event loop; the model thread puts whole lists of updates into it."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop or asyncio.get_running_loop()
        self.queue: asyncio.Queue[Update] = asyncio.Queue()

    def put(self, updates: list[Update]) -> None:  # from the model thread
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is listening any more
            self.loop.call_soon_threadsafe(_put_all, self.queue, updates)


def _put_all(queue: asyncio.Queue[Update], updates: list[Update]) -> None:
    for u in updates:
        queue.put_nowait(u)


def _put_each(batches: list[tuple[asyncio.Queue[Update], list[Update]]]) -> None:
    for queue, updates in batches:
        _put_all(queue, updates)


def deliver(by_sink: dict[Sink, list[Update]]) -> None:
    """Hand a step's updates to their sinks with one wake-up per event loop, not one per request: each
    call_soon_threadsafe writes to the loop's self-pipe, and every such write lets the event loop take the GIL
    from the model thread (the kernels hold it), so at 16 requests a step paid 16 hand-overs instead of one."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Queue[Update], list[Update]]]] = {}
    for sink, updates in by_sink.items():
        by_loop.setdefault(sink.loop, []).append((sink.queue, updates))
    for loop, batches in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is listening any more
            loop.call_soon_threadsafe(_put_each, batches)


def _failure(error: Exception) -> JobFailed:
    """What a client is told about its request's own failure (the others' go on)."""
    if isinstance(error, LlamayError):
        return JobFailed(f"this request failed: {error}", 400)
    log.error("a request failed:\n%s", "".join(traceback.format_exception(error)))
    return JobFailed(f"this request failed: {type(error).__name__}: {error}", 500)


class Pin:
    """A KV snapshot held by contexts and by the jobs continuing them; dropped (pages released) on the model
    thread when its last holder lets go. Holders are counted on the event loop only; the scheduler knows every
    live pin (for the audit)."""

    def __init__(self, snapshot: Snapshot, scheduler: Scheduler) -> None:
        self.snapshot = snapshot
        self.scheduler = scheduler
        self.holders = 1
        scheduler.pinned(self, True)

    def hold(self) -> Pin:
        self.holders += 1
        return self

    def let_go(self) -> None:
        self.holders -= 1
        if self.holders == 0:
            snap = self.snapshot
            self.scheduler.call(lambda st: st.kv.drop(snap))
            self.scheduler.pinned(self, False)  # after the drop is queued: an audit never sees it unowned


@dataclass(eq=False)
class Job(Request):
    """A Batcher request plus what the server needs to route and time it."""

    index: int = 0  # the choice (or prompt) it answers within its HTTP request
    sink: Sink | None = None
    timeout: float = math.inf  # seconds from submission
    keep: bool = False  # snapshot the sequence before it is released (contexts)
    kept: Snapshot | None = None
    pin: Pin | None = None  # a context's snapshot, offered to the prefix cache before admission
    t_submit: float = 0.0
    t_admit: float = 0.0
    t_first: float = 0.0  # first token sampled (the prompt is done)
    t_done: float = 0.0

    @property
    def deadline(self) -> float:
        return self.t_submit + self.timeout


class _KeepingBatcher(Batcher):
    """The Batcher, snapshotting the sequence of a `keep` job just before it is released."""

    def _finish(self, req: Request, reason: str) -> None:
        if isinstance(req, Job) and req.keep and req.seq is not None and req.kept is None and reason != "error":
            req.kept = self.st.kv.snapshot(req.seq)
        super()._finish(req, reason)


@dataclass
class _Op:
    fn: Callable[[State], Any]
    future: concurrent.futures.Future[Any]
    needs_sequence: bool = False
    deadline: float = math.inf  # an op waiting for a sequence fails (503) at this time


def _refuse(op: _Op, error: JobFailed) -> None:
    if op.future.set_running_or_notify_cancel():  # False: its caller went away already
        op.future.set_exception(error)


@dataclass
class SchedulerConfig:
    n_ctx: int
    n_seq: int = 4  # sequences decoded together
    queue: int = 64  # jobs waiting for admission
    n_batch: int = 512  # tokens per forward
    prefill_chunk: int = 256  # prompt tokens of one sequence per forward
    spare_contexts: int = 2  # full contexts' worth of pages beyond the sequences (prefix cache, contexts)
    timeout: float = 600.0  # seconds a request may take, queued and running
    page_size: int = 16
    extra: dict[str, Any] = field(default_factory=dict)


class Scheduler:
    def __init__(self, model: Model, cfg: SchedulerConfig, metrics: Metrics | None = None) -> None:
        self.model = model
        self.cfg = cfg
        self.metrics = metrics or Metrics()
        pages_per_seq = -(-cfg.n_ctx // cfg.page_size)
        self.state = model.new_state(
            n_ctx=cfg.n_ctx, n_batch=cfg.n_batch, n_seq=cfg.n_seq, n_outputs=cfg.n_seq,
            page_size=cfg.page_size, n_pages=(cfg.n_seq + cfg.spare_contexts) * pages_per_seq, prefix_cache=True,
        )  # fmt: skip
        self.batcher = _KeepingBatcher(model, self.state, prefill_chunk=cfg.prefill_chunk)
        self._cond = threading.Condition()
        self._pending: collections.deque[Job] = collections.deque()
        self._control: collections.deque[_Op] = collections.deque()
        self._deferred: list[_Op] = []  # ops waiting for a free sequence
        self._paused = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._last_error = ""
        self._pins: set[Pin] = set()  # live pins (touched on the event loop, read by the audit)
        self._pins_lock = threading.Lock()
        self._dirty = True  # something ran since the last idle audit
        self.problems: tuple[str, ...] = ()  # what the last idle audit found ([] = the accounting is exact)

    # -- event-loop side ------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="llamay-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def submit(self, jobs: list[Job]) -> None:
        """Queue jobs, all or none; QueueFull when the queue cannot take them all."""
        now = time.monotonic()
        with self._cond:
            self._check_room(len(jobs))
            for job in jobs:
                job.t_submit = now
                if job.timeout == math.inf:
                    job.timeout = self.cfg.timeout
                self._pending.append(job)
            self._cond.notify_all()

    def room(self, n: int) -> None:
        """Raise what `submit` would raise for n jobs now (QueueFull, or JobFailed while stopping), queueing nothing:
        a cheap look before a request spends time on its preparation."""
        with self._cond:
            self._check_room(n)

    def _check_room(self, n: int) -> None:
        if self._stopping:
            raise JobFailed("the server is shutting down", 503)
        if len(self._pending) + n > self.cfg.queue:
            raise QueueFull(len(self._pending), self._retry_after())

    def cancel(self, job: Job, reason: str = "cancelled") -> None:
        """Stop a job wherever it is (queued or running); its sequence and pages are released."""
        self.call(lambda _st: self._cancel(job, reason))

    def call(self, fn: Callable[[State], Any], needs_sequence: bool = False) -> concurrent.futures.Future[Any]:
        """Run fn(state) on the model thread between steps; `needs_sequence`: only once a sequence is free (fails
        with a 503 JobFailed when none can become free, or none did within the request timeout)."""
        op = _Op(fn, concurrent.futures.Future(), needs_sequence, time.monotonic() + self.cfg.timeout)
        with self._cond:
            if self._stopping:
                _refuse(op, JobFailed("the server is shutting down", 503))
                return op.future
            self._control.append(op)
            self._cond.notify_all()
        return op.future

    def pause(self) -> None:
        """Stop admitting and stepping (control ops still run): for maintenance and tests."""
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    @property
    def queue_depth(self) -> int:
        return len(self._pending)

    @property
    def running(self) -> int:
        return len(self.batcher.running)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def pinned(self, pin: Pin, live: bool) -> None:
        with self._pins_lock:
            (self._pins.add if live else self._pins.discard)(pin)

    def audit(self, strict: bool = False) -> concurrent.futures.Future[list[str]]:
        """The accounting problems now ([] when exact), checked on the model thread between steps. `strict`
        (for tests, once every request is over): also every live snapshot must be held by a context's pin."""
        return self.call(lambda _st: self._audit(strict))

    def _audit(self, strict: bool) -> list[str]:
        problems = self.state.kv.audit() + self.batcher.audit()
        if strict:
            with self._pins_lock:
                pinned = {p.snapshot for p in self._pins}
            for snap in self.state.kv.snapshots - pinned:
                problems.append(f"a snapshot of {len(snap.tokens)} tokens is live but no context holds it")
        return problems

    def describe_pages(self) -> str:
        """Who holds the KV pages now (model thread), for messages that say why something does not fit."""
        st = self.state
        use = st.kv.page_use()
        total = sum(g.pages.n_pages for g in st.kv.groups)
        said = [f"{use['free']} are free"]
        if use["sequences"]:
            said.append(f"{use['sequences']} are held by the sequences of {self.running} running requests")
        if use["snapshots"]:
            said.append(f"{use['snapshots']} are held by {len(st.kv.snapshots)} snapshots (named contexts and forks)")
        if use["prefix_cache"]:
            said.append(f"{use['prefix_cache']} are held by the prefix cache alone")
        return f"of the KV cache's {total} pages, " + ", ".join(said)

    def _retry_after(self) -> int:
        """Seconds a refused client should wait: a rough time for the queue ahead of it to drain."""
        m = self.metrics
        rate = m.generated_tokens / max(m.steps, 1)  # tokens per step, a crude throughput proxy
        return max(1, min(60, int(len(self._pending) / max(rate, 1.0))))

    # -- model thread ---------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._run_control()
                self._expire(time.monotonic())
                if not self._paused:
                    self._admit()
                    if self.batcher.running:
                        self._step()
                        continue
                self._wait()
        finally:
            self._shutdown()

    def _wait(self) -> None:
        with self._cond:
            if self._stopping or self._control or (self._pending and not self._paused):
                return
            if self._deferred and self.batcher.can_admit():
                return
            waiting = self._pending or self._deferred or self.batcher.running
            if not waiting and self._dirty:
                self._audit_idle()
            self._cond.wait(IDLE_TICK if waiting else None)
            self._dirty = True

    def _audit_idle(self) -> None:
        """With nothing queued or running, the accounting must be exact; what is wrong goes to `problems`."""
        self._dirty = False
        try:
            problems = tuple(self.state.kv.audit() + self.batcher.audit())
        except Exception as e:  # a broken structure the audit cannot even walk
            problems = (f"the audit failed: {type(e).__name__}: {e}",)
        if problems and problems != self.problems:
            log.error("KV accounting is broken:\n  %s", "\n  ".join(problems))
        self.problems = problems

    def _run_control(self) -> None:
        with self._cond:
            ops = list(self._control)
            self._control.clear()
        ops = self._deferred + ops
        self._deferred = []
        now = time.monotonic()
        for op in ops:
            if op.future.cancelled():  # its caller went away before it ran
                continue
            if op.needs_sequence and not self.batcher.can_admit():
                error = self._no_sequence(op, now)
                if error is None:
                    self._deferred.append(op)
                else:
                    _refuse(op, error)
                continue
            if not op.future.set_running_or_notify_cancel():  # from here on a cancel cannot race set_result
                continue
            try:
                op.future.set_result(op.fn(self.state))
            except Exception as e:  # the op's caller gets the error, the server keeps serving
                op.future.set_exception(e)

    def _no_sequence(self, op: _Op, now: float) -> JobFailed | None:
        """Why an op waiting for a sequence must stop waiting (None: one may still become free in time)."""
        n = self.cfg.n_seq
        if not self.batcher.running:  # no job could ever give one back
            return JobFailed(f"no sequence is free and no request is running to free one: all {n} are held by no "
                             "request (see /health)", 503)  # fmt: skip
        if now >= op.deadline:
            return JobFailed(f"no sequence became free within {self.cfg.timeout:g} s: all {n} are busy", 503)
        return None

    def _cancel(self, job: Job, reason: str) -> None:
        with self._cond:
            queued = job in self._pending
            if queued:
                self._pending.remove(job)
        if not queued and job not in self.batcher.running:
            return  # already over
        if not queued:
            self.batcher.cancel(job, reason)
        self._end(job, reason)

    def _end(self, job: Job, reason: str) -> None:
        job.finish_reason = job.finish_reason or reason
        job.t_done = time.monotonic()
        self.metrics.finished[reason] += 1
        if job.sink is not None:
            job.sink.put([Update(job, finish=reason)])

    def _fail(self, job: Job, error: JobFailed) -> None:
        job.t_done = time.monotonic()
        self.metrics.finished["error"] += 1
        if job.sink is not None:
            job.sink.put([Update(job, error=error)])

    def _expire(self, now: float) -> None:
        with self._cond:
            late = [j for j in self._pending if j.deadline <= now]
        late += [j for j in self.batcher.running if isinstance(j, Job) and j.deadline <= now]
        for job in late:
            self._cancel(job, "timeout")

    def _admit(self) -> None:
        while True:
            with self._cond:
                if not self._pending:
                    return
                job = self._pending[0]
            if len(self.batcher.running) >= self.cfg.n_seq:
                return
            if job.pin is not None:
                self._offer(job.pin.snapshot)
            try:
                admitted = self.batcher.admit(job)
            except LlamayError as e:
                admitted, error = False, JobFailed(str(e), 400)
            except Exception as e:  # a bug must fail this job, not the model thread
                log.error("admission failed:\n%s", traceback.format_exc())
                admitted, error = False, JobFailed(f"admission failed: {type(e).__name__}: {e}", 500)
            else:
                error = None
                if not admitted and not self.batcher.running:  # nothing will free a sequence or pages
                    error = self._never_fits(job)
            if not admitted and error is None:
                return  # wait for a running job to end
            with self._cond:
                self._pending.popleft()
            if error is not None:
                self._fail(job, error)
                continue
            job.t_admit = time.monotonic()
            self.metrics.prompt_tokens += len(job.prompt)
            self.metrics.cached_prompt_tokens += job.cached_tokens

    def _never_fits(self, job: Job) -> JobFailed:
        """Why a job cannot be admitted while nothing runs: the true holders, not a guess."""
        if not self.batcher.can_admit():
            return JobFailed(f"no sequence is free and no request is running: all {self.cfg.n_seq} are held by no "
                             "request (see /health)", 503)  # fmt: skip
        hint = "; delete some contexts" if self.state.kv.snapshots else ""
        return JobFailed(f"the KV cache cannot hold this prompt of {len(job.prompt)} tokens now: "
                         f"{self.describe_pages()}{hint}", 503)  # fmt: skip

    def _offer(self, snap: Snapshot) -> None:
        """Put a context's whole pages back into the prefix cache, so that admission adopts them."""
        st = self.state
        n_full = len(snap.tokens) // st.page_size
        pages = [tuple(t[j] for t in snap.tables) for j in range(n_full)]
        st.kv.prefix_cache.insert(snap.tokens, pages)

    def _step(self) -> None:
        try:
            events = self.batcher.step()
        except Exception as e:  # the Batcher ends failing requests itself; this is a bug in it: fail what ran
            self._last_error = traceback.format_exc()
            log.error("batcher step failed:\n%s", self._last_error)
            for job in list(self.batcher.running):
                self.batcher.cancel(job, "error")
                if isinstance(job, Job):
                    self._fail(job, JobFailed(f"generation failed: {type(e).__name__}: {e}", 500))
            return
        m = self.metrics
        m.steps += 1
        m.step_sequences += self.batcher.last_batch_width
        m.step_tokens += self.batcher.last_batch_tokens
        now = time.monotonic()
        by_sink: dict[Sink, list[Update]] = {}
        for ev in events:
            job = ev.request
            if not isinstance(job, Job):
                continue
            if ev.error is not None:
                self._fail(job, _failure(ev.error))
                continue
            if ev.token is not None:
                m.generated_tokens += 1
                job.t_first = job.t_first or now
            if ev.finish_reason:
                job.t_done = now
                m.finished[ev.finish_reason] += 1
            if job.sink is not None:
                update = Update(job, ev.token, ev.logprob, ev.top, ev.finish_reason)
                by_sink.setdefault(job.sink, []).append(update)
        deliver(by_sink)

    def _shutdown(self) -> None:
        gone = JobFailed("the server is shutting down", 503)
        with self._cond:
            pending = list(self._pending)
            self._pending.clear()
            ops = self._deferred + list(self._control)
            self._control.clear()
            self._deferred = []
        for job in pending:
            self._fail(job, gone)
        for job in list(self.batcher.running):
            self.batcher.cancel(job, "cancelled")
            if isinstance(job, Job):
                self._fail(job, gone)
        for op in ops:
            _refuse(op, gone)
