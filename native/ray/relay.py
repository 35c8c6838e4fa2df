"""The ingress's helpers (a module of their own: Ray pickles the ingress class by value, its globals not): the
routing key of a body, the relay of a replica's stream with a last error event if the replica dies mid-stream."""

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import JSONResponse
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

from ..server.errors import error_type
from .prefix_key import prefix_key

REPLICA_HEADER = "x-llamay-replica"  # which replica answered (its Ray replica id)
RETRY_HEADER = "x-llamay-retried"  # why the ingress sent it to a second replica (429, replica-died)
GONE = (RayActorError, ActorDiedError, ActorUnavailableError)  # the replica's process is gone or unreachable
MAX_BODY = 8 << 20


def route_key(route: str, body: bytes, chars: int) -> str | None:
    try:
        return prefix_key(route, json.loads(body), chars)
    except ValueError:  # not JSON: the replica answers it (400); no key to route by
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


def error(status: int, message: str, code: str) -> JSONResponse:
    """The ingress's own error, in llamay's shape (its type by status, as `llamay serve` gives it)."""
    body = {"error": {"message": message, "type": error_type(status), "param": None, "code": code}}
    return JSONResponse(body, status_code=status)
