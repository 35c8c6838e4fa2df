"""The ingress's helpers (a module of their own: Ray pickles the ingress class by value, its globals not): the
routing key of a body, the relay of a replica's stream with a last error event if the replica dies mid-stream,
llamay's request guard in front of it all."""

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi.responses import JSONResponse
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..server.errors import error_body, error_type
from ..server.guard import Guard, GuardConfig
from .prefix_key import prefix_key

REPLICA_HEADER = "x-llamay-replica"  # which replica answered (its Ray replica id)
RETRY_HEADER = "x-llamay-retried"  # why the ingress sent it to a second replica (429, replica-died)
GONE = (RayActorError, ActorDiedError, ActorUnavailableError)  # the replica's process is gone or unreachable
MAX_BODY = 8 << 20


def route_key(route: str, body: bytes, chars: int) -> str | None:
    try:
        return prefix_key(route, json.loads(body), chars)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read: the replica answers it (400)
        return None


async def relay(stream: Any, content_type: str) -> AsyncIterator[bytes]:
    """The replica's body chunks; if its process dies mid-stream, a last error event in the route's format."""
    done = False
    try:
        async for chunk in stream:
            yield chunk
        done = True
    except GONE as e:
        msg = (f"the replica serving this request stopped mid-stream ({e.__class__.__name__}); the answer is "
               "incomplete: send the request again")  # fmt: skip
        if content_type.startswith("text/event-stream"):
            err = {"error": {"message": msg, "type": "server_error", "param": None, "code": "replica_died"}}
            yield f"data: {json.dumps(err)}\n\ndata: [DONE]\n\n".encode()
        else:  # NDJSON (Ollama) or a body cut short: Ollama's error line
            yield (json.dumps({"error": msg}) + "\n").encode()
        done = True
    finally:
        if not done:  # the client went away: the replica's generator is stopped, and its llamay stream releases
            stream.cancel()


def error(status: int, message: str, code: str, path: str) -> JSONResponse:
    """The ingress's own error, in llamay's shape for the route (Ollama's on its routes; the type by status), as
    `llamay serve` gives it."""
    return JSONResponse(error_body(message, error_type(status), None, code, path), status_code=status)


class Guarded(Response):
    """The ingress's answer to a request: `answer(request)` run behind llamay's request guard (`server/guard.py`),
    so that a request is refused as `llamay serve` refuses it, for the same reason first (its Host, its Origin,
    its content type, then its size, from Content-Length before the body is read), before any replica is asked."""

    def __init__(self, config: GuardConfig, answer: Callable[[Request], Awaitable[Response]]) -> None:
        super().__init__()
        self.config, self.answer = config, answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            response = await self.answer(Request(scope, receive))
            await response(scope, receive, send)

        await Guard(app, self.config)(scope, receive, send)
