"""From scheduler updates to text: one `Generation` per HTTP request, its choices' text assembled with the
tokenizer's streaming detokenizer and a `StopMatcher`; SSE and NDJSON framing; disconnect and timeout handling.

A choice whose text reaches a stop string is cancelled at once (its sequence is released); when the consumer
goes away (client disconnect: the response's task is cancelled) every unfinished job is cancelled likewise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from llamay.engine import StopMatcher, StopStrings

from .errors import ApiError
from .params import GenParams, check_supported, constraint_for, sampler_for, with_defaults
from .request_log import note_generation
from .scheduler import Job, JobFailed, Pin, QueueFull, Sink, Update
from .tools import reply_decoder

log = logging.getLogger("llamay.server")
DISCONNECT_POLL = 0.25  # seconds between checks that a non-streaming client is still there
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass
class Piece:
    """A bit of one choice's output: text (possibly empty), the token it came with, and/or its end."""

    index: int
    text: str = ""
    token: int | None = None
    logprob: float | None = None
    top: tuple[tuple[int, float], ...] = ()
    finish: str | None = None


@dataclass
class Choice:
    job: Job
    detok: Any  # the tokenizer's StreamDecoder
    matcher: StopMatcher
    tokens: list[int] = field(default_factory=list)  # accepted tokens (up to the stop string, if one matched)
    text: list[str] = field(default_factory=list)
    logprobs: list[tuple[int, float, tuple[tuple[int, float], ...]]] = field(default_factory=list)
    finish: str | None = None


def prepare(service: Any, prompts: list[list[int]], params: GenParams) -> tuple[list[Any], StopStrings]:
    """What a Generation needs that costs time: the constraint (compiled once per request), one sampler per
    choice (fed its prompt), the stop strings' tables. On a preparation thread (`Generation.create`)."""
    check_supported(params)
    constraint = constraint_for(params, service.tokenizer)
    samplers = [
        sampler_for(params, i, tokenizer=service.tokenizer, constraint=constraint, prompt=prompt)
        for prompt in prompts
        for i in range(params.n)
    ]
    return samplers, StopStrings(params.stop)


def check_room(service: Any, n: int = 1) -> None:
    """Refuse a request of n jobs (choices x prompts) the queue cannot take now, before its preparation
    (template, tokenizing, a grammar's compile) is done for nothing: what `Generation.start` answers after it."""
    queue(service, n)


def queue(service: Any, n: int, jobs: list[Job] | None = None) -> None:
    """Queue `jobs` (n of them), or, without jobs, only look whether the queue could take n now; refused as an
    ApiError: 400 too_many_sequences (more than the queue holds), 429 queue_full (with Retry-After), 503 while
    the server stops."""
    sched = service.scheduler
    if n > sched.cfg.queue:
        raise ApiError(400, f"this request needs {n} sequences (n x prompts); the server queues at most "
                       f"{sched.cfg.queue} (--queue)", param="n", code="too_many_sequences")  # fmt: skip
    try:
        if jobs is None:
            sched.room(n)
        else:
            sched.submit(jobs)
    except QueueFull as e:
        service.metrics.rejected["queue_full"] += 1
        raise ApiError(429, str(e), code="queue_full", headers={"Retry-After": str(e.retry_after)}) from None
    except JobFailed as e:
        raise ApiError(e.status, str(e)) from None


class Generation:
    """The jobs of one request (n choices × prompts), submitted together and followed to their end."""

    def __init__(self, service: Any, prompts: list[list[int]], params: GenParams, budgets: list[int], *,
                 keep: bool = False, pin: Pin | None = None, reuse_cache: bool = True,
                 prepared: tuple[list[Any], StopStrings] | None = None) -> None:  # fmt: skip
        samplers, stop_strings = prepared or prepare(service, prompts, params)
        self.service = service
        self.params = params
        self.tokenizer = service.tokenizer
        self.prompts = prompts
        self.t_start = time.monotonic()
        self.sink = Sink()
        self.pin = pin
        self.choices: list[Choice] = []
        for p, (prompt, budget) in enumerate(zip(prompts, budgets, strict=True)):
            for i in range(params.n):
                index = p * params.n + i
                job = Job(prompt, budget, samplers[index], logprobs=params.logprobs, index=index,
                          sink=self.sink, keep=keep, pin=pin.hold() if pin else None,
                          reuse_cache=reuse_cache)  # fmt: skip
                self.choices.append(Choice(job, reply_decoder(self.tokenizer, params.tools), StopMatcher(stop_strings)))
        self._open = len(self.choices)
        self._closed = False
        self.truncated = 0  # prompt tokens cut (a request's truncation)
        note_generation(self)  # its tokens in the request's log line

    @classmethod
    async def create(cls, service: Any, prompts: list[list[int]], params: GenParams, budgets: list[int], *,
                     keep: bool = False, pin: Pin | None = None, reuse_cache: bool = True) -> Generation:  # fmt: skip
        """A Generation whose constraint and samplers are built on a preparation thread, off the event loop
        (a schema may take a while to compile); the pin is held here, on the loop."""
        if pin is not None:
            pin.hold()  # the context may be deleted meanwhile: its snapshot must outlive the preparation
        try:
            # a stored model's PARAMETERs under what the request set (store.options.Options, or None)
            params = with_defaults(params, getattr(service, "defaults", None))
            check_room(service, len(prompts) * params.n)  # before a grammar is compiled for nothing
            prepared = await service.offload(prepare, service, prompts, params)
            return cls(
                service, prompts, params, budgets, keep=keep, pin=pin, reuse_cache=reuse_cache, prepared=prepared
            )
        finally:
            if pin is not None:
                pin.let_go()

    def start(self) -> Generation:
        """Queue every job now (before any response is sent, so that a full queue is a real 429)."""
        try:
            queue(self.service, len(self.choices), [c.job for c in self.choices])
        except ApiError:
            self._release_pins()
            raise
        return self

    # -- following ------------------------------------------------------------------------------------------

    async def pieces(self) -> AsyncIterator[Piece]:
        """Every piece of output until all choices end; cancels what is left if the consumer stops early."""
        try:
            while self._open:
                update = await self.sink.queue.get()
                for piece in self._take(update):
                    yield piece
        except (asyncio.CancelledError, GeneratorExit):
            self.close("the client went away mid-stream")
            raise
        finally:
            self.close()

    def _take(self, u: Update) -> list[Piece]:
        ch = self.choices[u.job.index]
        if ch.finish is not None:
            return []  # tokens that were on their way when the choice stopped
        if u.error is not None:
            self.close()
            status = u.error.status
            raise ApiError(status, str(u.error), code="generation_failed" if status >= 500 else None)
        out = []
        if u.token is not None:
            ch.tokens.append(u.token)
            if u.logprob is not None:
                ch.logprobs.append((u.token, u.logprob, u.top))
            text = ch.matcher.push(ch.detok.push(u.token))
            out.append(Piece(u.job.index, text, u.token, u.logprob, u.top))
            if ch.matcher.stopped:
                self.service.scheduler.cancel(ch.job, "stop")
                out[-1].finish = self._end(ch, "stop")
        if u.finish is not None and ch.finish is None:
            if u.finish == "timeout":
                self.close()
                raise ApiError(408, f"the request did not finish within {self.service.scheduler.cfg.timeout:g} s; "
                               "it was stopped and its sequence released", code="request_timeout")  # fmt: skip
            tail = "" if ch.matcher.stopped else ch.matcher.push(ch.detok.flush()) + ch.matcher.flush()
            out.append(Piece(u.job.index, tail, finish=self._end(ch, u.finish)))
        for piece in out:
            if piece.text:
                ch.text.append(piece.text)
        return out

    def _end(self, ch: Choice, reason: str) -> str:
        ch.finish = "stop" if reason == "stop" else "length" if reason == "length" else reason
        self._open -= 1
        return ch.finish

    def close(self, why: str | None = None) -> None:
        """Cancel every job not yet over (a gone client, an error) and let go of the context pin; `why`, when
        jobs were cut short, is logged in one line."""
        if self._closed:
            return
        self._closed = True
        cut = 0
        for ch in self.choices:
            if ch.finish is None:
                ch.finish = "cancelled"
                cut += 1
                self.service.scheduler.cancel(ch.job, "cancelled")
        if cut and why:
            log.warning("%s: cancelled %d of %d choices", why, cut, len(self.choices))
        self._release_pins()

    def _release_pins(self) -> None:
        for ch in self.choices:
            if ch.job.pin is not None:
                ch.job.pin.let_go()
                ch.job.pin = None

    async def collect(self, is_disconnected: Callable[[], Awaitable[bool]] | None = None) -> Generation:
        """Run to the end (non-streaming); a client that disconnects meanwhile cancels the jobs."""

        async def drain() -> None:
            async for _ in self.pieces():
                pass

        task = asyncio.ensure_future(drain())
        try:
            while not task.done():
                await asyncio.wait([task], timeout=DISCONNECT_POLL)
                if not task.done() and is_disconnected is not None and await is_disconnected():
                    self.close("the client went away before its reply")
                    break
        finally:  # also when this request's own task is cancelled (the server stopping)
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()
        return self

    # -- accounting -----------------------------------------------------------------------------------------

    def text(self, index: int) -> str:
        return "".join(self.choices[index].text)

    @property
    def prompt_tokens(self) -> int:
        return sum(len(p) for p in self.prompts)

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens reused from the prefix cache (the first choice of each prompt)."""
        n = self.params.n
        return sum(self.choices[p * n].job.cached_tokens for p in range(len(self.prompts)))

    @property
    def completion_tokens(self) -> int:
        return sum(len(c.tokens) for c in self.choices)

    def usage(self) -> dict[str, Any]:
        cached = self.cached_tokens
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
            "llamay_cached_prompt_tokens": cached,
            "llamay_truncated_prompt_tokens": self.truncated,
        }

    def timings_ns(self) -> dict[str, int]:
        """Ollama's durations (nanoseconds) of the first choice: queue wait reported as load_duration."""
        job = self.choices[0].job
        end = job.t_done or time.monotonic()
        first = job.t_first or end
        admit = job.t_admit or first
        ns = 1_000_000_000
        return {
            "total_duration": int((end - self.t_start) * ns),
            "load_duration": int(max(admit - job.t_submit, 0.0) * ns),
            "prompt_eval_count": len(job.prompt) - job.cached_tokens,
            "prompt_eval_duration": int(max(first - admit, 0.0) * ns),
            "eval_count": len(self.choices[0].tokens),
            "eval_duration": int(max(end - first, 0.0) * ns),
        }


# -- framing -----------------------------------------------------------------------------------------------------


def sse(data: dict[str, Any] | str) -> str:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {payload}\n\n"


def ndjson(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"


class Stream(StreamingResponse):
    """A streamed response whose clean-up (`on_close`) runs once it is over, however it ends: sent to its end,
    its client gone mid-stream, or gone before the first byte. In that last case the body is never iterated,
    so no `finally` of its generators runs: what the route acquired (its jobs, a kept snapshot, its model's
    lease) must be given back here."""

    def __init__(self, content: AsyncIterator[str], on_close: Callable[[], None], *, media_type: str,
                 headers: dict[str, str] | None = None) -> None:  # fmt: skip
        super().__init__(content, media_type=media_type, headers=headers)
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.on_close()


def sse_response(events: AsyncIterator[str], gen: Generation, *also: Callable[[], None]) -> Stream:
    """An SSE `Stream` of `gen`: at its end, every job of `gen` not yet over is cancelled (its pins let go), then
    `also` run (a kept snapshot dropped, a lease released)."""
    return Stream(events, _closing(gen, also), media_type="text/event-stream", headers=SSE_HEADERS)


def ndjson_response(lines: AsyncIterator[str], gen: Generation, *also: Callable[[], None]) -> Stream:
    """An NDJSON `Stream` of `gen`, closed as `sse_response` closes its stream."""
    return Stream(lines, _closing(gen, also), media_type="application/x-ndjson")


def _closing(gen: Generation, also: tuple[Callable[[], None], ...]) -> Callable[[], None]:
    def close() -> None:
        gen.close("the client went away before its stream ended")
        for fn in also:
            fn()

    return close


async def sse_stream(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    """SSE frames of `events`, then `data: [DONE]`; an error after the headers went out becomes an error event."""
    try:
        async for event in events:
            yield sse(event)
    except ApiError as e:
        yield sse(e.body())
    yield sse("[DONE]")


async def ndjson_stream(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    """NDJSON lines of `events`; an error after the headers went out becomes an `{"error": ...}` line."""
    try:
        async for event in events:
            yield ndjson(event)
    except ApiError as e:
        yield ndjson({"error": e.message})
