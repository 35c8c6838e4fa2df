"""Every answered request counted by method, route template and status (the metrics), and written in one line
on the `llamay.server.requests` logger (INFO): method, path, status, the tokens read and generated where the
request had any, and the milliseconds until its last byte:

    POST /v1/chat/completions 200 in=23 out=16 41 ms

A pure ASGI middleware, outermost (streaming responses and disconnects pass through untouched; the guard's
refusals are counted and logged too; a stream is logged once it ends). The
routes' work reports its tokens into the request's record through a context variable (`note_generation`,
`note_tokens`): the record is made in the request's task, which the handler and its streaming task share.
`llamay serve --quiet` turns the lines off.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("llamay.server.requests")
HTTP_METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))
# nginx's code for a request the client closed before any answer: counted as the server's 500 it was, a client
# that hung up mid-body looked like a server failure on every dashboard alerting on 5xx
CLIENT_CLOSED = 499


@dataclass
class Record:
    generations: list[Any] = field(default_factory=list)  # streaming.Generation: counted once they are over
    tokens_in: int = 0  # tokens read outside a generation (embeddings)

    def tokens(self) -> str:
        n_in = self.tokens_in + sum(g.prompt_tokens for g in self.generations)
        if not self.generations:
            return f" in={n_in}" if n_in else ""
        return f" in={n_in} out={sum(g.completion_tokens for g in self.generations)}"


_current: ContextVar[Record | None] = ContextVar("llamay_request_record", default=None)


def note_generation(gen: Any) -> None:
    """Count this generation's prompt and completion tokens in the current request's line."""
    record = _current.get()
    if record is not None:
        record.generations.append(gen)


def note_tokens(n_in: int) -> None:
    """Count tokens read (not generated) in the current request's line."""
    record = _current.get()
    if record is not None:
        record.tokens_in += n_in


class RequestLog:
    def __init__(self, app: ASGIApp, metrics: Any) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        record = Record() if log.isEnabledFor(logging.INFO) else None
        token = _current.set(record)
        t0 = time.perf_counter()
        status = 500  # what the client gets if nothing is sent (an error past every handler)
        started = gone = False

        async def watching_receive() -> Message:
            nonlocal gone
            message = await receive()
            gone = gone or message["type"] == "http.disconnect"
            return message

        async def watching_send(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
            await send(message)

        try:
            await self.app(scope, watching_receive, watching_send)
        finally:
            if gone and not started:
                status = CLIENT_CLOSED
            _current.reset(token)
            method = scope.get("method", "")
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            # labels from a fixed set: a client's made-up methods must not add series without bound
            label = method if method in HTTP_METHODS else "other"
            self.metrics.requests[(label, route, status)] += 1
            if record is not None:
                ms = (time.perf_counter() - t0) * 1000
                log.info("%s %s %d%s %.0f ms", method, scope.get("path", ""), status, record.tokens(), ms)
