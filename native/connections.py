"""Connection limits for a uvicorn server, so clients that connect and never finish a request cannot exhaust it.

uvicorn times out a kept-alive connection between requests, but not one that connects and sends its request
head slowly or never: each such connection stays open for good. `guarded_protocol` gives uvicorn's h11
protocol a deadline for the request head (from the connection, and again after each response) and a bound on
open connections: a new connection beyond it closes the longest-idle connection (one with no request being
answered), so half-open connections give way to real ones; only when every connection is busy does a request
get uvicorn's 503.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # uvicorn is imported where a server is built: `Limits` is read by the CLI without the extra
    from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclass(frozen=True)
class Limits:
    head_timeout: float = 10.0  # seconds to send a whole request head, from connecting or from the last response
    keep_alive: int = 5  # seconds an idle kept-alive connection stays open (uvicorn's timeout_keep_alive)
    connections: int = 256  # open connections at most; beyond, the longest-idle one is closed

    def uvicorn_options(self) -> dict:
        """The uvicorn.Config arguments that go with `guarded_protocol(self)`."""
        # uvicorn answers 503 once connections reach limit_concurrency: one more than we keep open
        return {"http": guarded_protocol(self), "timeout_keep_alive": self.keep_alive,
                "limit_concurrency": self.connections + 1}  # fmt: skip


def guarded_protocol(limits: Limits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with `limits.head_timeout` and `limits.connections` enforced."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        head_timer: asyncio.TimerHandle | None = None
        idle_since = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.wait_for_head()
            self.make_room()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self.wait_for_head()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
            super().connection_lost(exc)

        def answering(self) -> bool:
            """Whether a request on this connection is being answered (its head came in, its response is not
            complete)."""
            return self.cycle is not None and not self.cycle.response_complete

        def wait_for_head(self) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
            self.idle_since = self.loop.time()
            self.head_timer = self.loop.call_later(limits.head_timeout, self.head_deadline)

        def head_deadline(self) -> None:
            if not self.answering() and not self.transport.is_closing():
                self.transport.close()

        def make_room(self) -> None:
            while len(self.connections) > limits.connections:
                idle = [c for c in self.connections if c is not self and not c.answering()]
                if not idle:
                    return
                oldest = min(idle, key=lambda c: c.idle_since)
                # counted out now: its connection_lost comes on a later turn of the loop
                self.connections.discard(oldest)
                oldest.transport.close()

    return GuardedH11Protocol
