"""Errors the server answers with: OpenAI-style bodies, `{"error": {"message", "type", "param", "code"}}`, except on
Ollama's routes (`/api/...`), which answer as Ollama does, `{"error": "message"}`: its clients read that string."""

from __future__ import annotations

from typing import Any

# the `type` OpenAI gives each status
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "server_overloaded",
}


class ApiError(Exception):
    """An answer other than success: raised anywhere in a route, turned into its JSON body by the app."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type or error_type(status)
        self.headers = headers or {}

    def body(self, path: str = "") -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code, path)


def error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


OLLAMA_PREFIX = "/api/"
STATUSES = (400, 401, 403, 404, 408, 409, 413, 415, 429, 500, 503)  # the errors every route may answer


def error_body(message: str, type: str, param: str | None = None, code: str | None = None,
               path: str = "") -> dict[str, Any]:  # fmt: skip
    """The error body for a request to `path`: Ollama's shape on its routes, OpenAI's elsewhere."""
    if path.startswith(OLLAMA_PREFIX):
        return {"error": message}
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def validation_errors(errors: list[dict[str, Any]], body: Any) -> list[tuple[str, str]]:
    """(field path, message) of pydantic's errors, the most telling first. A union field reports one error per
    type it could have been (`prompt.str`, `prompt.list[str]`): those tags are not places in the request, so they
    are dropped from the path, and the errors of the type the value has (a list for a list) come first."""
    out = []
    for err in errors:
        path, fits = _place(err.get("loc", ()), body, err.get("type") == "missing")
        out.append((not fits, ".".join(str(p) for p in path) or "body", err.get("msg", "invalid")))
    out.sort(key=lambda e: e[0])  # stable: pydantic's order among equals
    return [(path, msg) for _, path, msg in out]


def _place(loc: Any, body: Any, missing: bool) -> tuple[list[Any], bool]:
    if loc and loc[0] in ("query", "path", "header"):  # a parameter: its name
        return list(loc[1:]), True
    parts = list(loc[1:] if loc and loc[0] == "body" else loc)
    path: list[Any] = []
    value, fits = body, True
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        inside = (isinstance(value, dict) and isinstance(part, str) and part in value) or (
            isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value)
        )
        if inside:
            value = value[part]
        elif isinstance(part, str) and not (missing and last):  # a union's branch, named by its type
            fits = fits and _fits(part, value)
            continue
        else:
            value = None
        path.append(part)
    return path, fits


def _fits(tag: str, value: Any) -> bool:
    kinds = {list: ("list", "tuple"), str: ("str", "constrained-str", "literal"), bool: ("bool",),
             int: ("int", "constrained-int"), float: ("float", "constrained-float"), type(None): ("none",)}  # fmt: skip
    if isinstance(value, dict):
        return tag.startswith("dict") or tag[:1].isupper()  # a model's name
    return tag.startswith(kinds.get(type(value), ()))
