"""Request bodies read as strict JSON (RFC 8259), through FastAPI's own parsing step (a route class).

Python's `json` is lenient where the standard is not: it reads `NaN`, `Infinity` and `-Infinity`, a number
too large for a double becomes `inf` (`1e999`), and an integer of more than 4300 digits raises a ValueError
that is not a JSONDecodeError. None of those is a value a request field can take, so each is refused here as
malformed JSON (400 `invalid_json`, naming what was wrong), as is nesting deeper than MAX_JSON_DEPTH (every
later stage, pydantic, templates, the constraint compiler, then meets a bounded tree).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from .limits import MAX_JSON_DEPTH


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (numbers are finite)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is beyond the range of a double")
    return value


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (iterative: the value may be deep)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                return depth
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def strict_loads(data: bytes | str) -> Any:
    """json.loads, standard JSON only; json.JSONDecodeError (FastAPI's 400) for anything else."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", text, 0) from None
    except ValueError as e:  # NaN / Infinity / 1e999 / an integer beyond Python's digit limit
        raise json.JSONDecodeError(str(e), text, 0) from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", text, 0)
    return value


class StrictJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = strict_loads(body)
            except UnicodeDecodeError as e:
                raise json.JSONDecodeError(f"the body is not UTF-8 ({e.reason})", "", 0) from None
        return self._json


class StrictJsonRoute(APIRoute):
    """An APIRoute whose handler reads its JSON body with `strict_loads` (route_class= of every router)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict
