"""Ollama's `keep_alive`: how long a model stays loaded after its last request.

Ollama reads it as its `api.Duration`: a JSON number is seconds, a string is a Go duration (`"5m"`, `"1h30m"`,
`"250ms"`, `"0"`); zero unloads the model once its requests are done, anything negative keeps it loaded for the
server's lifetime. The server's default is `--keep-alive` (else $OLLAMA_KEEP_ALIVE, else 5 minutes).
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import Field

from .errors import bad_request

FOREVER = math.inf
DEFAULT = 300.0  # seconds: Ollama's 5 minutes
# Go's time.ParseDuration units, in seconds
UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
UNIT = "(?:ns|us|µs|μs|ms|s|m|h)"
PART = re.compile(f"({NUMBER})({UNIT})")
MAX_CHARS = 64  # a duration longer than this is no duration
# what the request schemas admit (the OpenAPI description publishes it): a Go duration, or seconds as text
PATTERN = f"^([-+]?(0|({NUMBER}{UNIT})+)|-?[0-9]+(\\.[0-9]+)?)$"
# the durations that are zero: what the one model of a server without a store refuses (it cannot be unloaded)
ZERO_PATTERN = f"^([-+]?(0|((?:0+(?:\\.0*)?|\\.0+){UNIT})+)|-?0+(\\.0+)?)$"
KeepAlive = (
    Annotated[str, Field(pattern=PATTERN, max_length=MAX_CHARS)]
    | Annotated[float, Field(description="seconds (negative: forever)")]
    | None
)


def parse_go_duration(text: str) -> float:
    """Seconds of a Go duration string (time.ParseDuration's grammar); ValueError naming what is wrong."""
    s = text.strip()
    if len(s) > MAX_CHARS:
        raise ValueError(f"longer than {MAX_CHARS} characters")
    sign = -1.0 if s.startswith("-") else 1.0
    s = s[1:] if s[:1] in ("+", "-") else s  # one sign at most, as Go reads it
    if s == "0":
        return 0.0
    if not s:
        raise ValueError("empty")
    total, pos = 0.0, 0
    for m in PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s):
        raise ValueError("not a Go duration (a number and a unit, e.g. 30s, 5m, 1h30m; a bare number is seconds)")
    return sign * total


def seconds(value: str | int | float | None, default: float, param: str = "keep_alive") -> float:
    """The seconds `value` asks a model to stay loaded for (FOREVER for a negative one; `default` for None);
    a 400 naming the field for anything else."""
    if value is None:
        return default
    if isinstance(value, bool):
        raise bad_request(f'{param} must be a duration (e.g. "5m") or a number of seconds, not {value}', param)
    if isinstance(value, int | float):
        s = float(value)
    else:
        try:
            s = float(value) if re.fullmatch(r"\s*-?[0-9]+(\.[0-9]+)?\s*", value) else parse_go_duration(value)
        except ValueError as e:
            raise bad_request(f"{param} {value[:MAX_CHARS]!r}: {e}", param) from None
    if math.isnan(s):
        raise bad_request(f"{param} is not a number", param)
    return FOREVER if s < 0 else s


def server_default(text: str | None) -> float:
    """--keep-alive / $OLLAMA_KEEP_ALIVE (None: Ollama's 5 minutes); ValueError naming the text."""
    if text is None or not text.strip():
        return DEFAULT
    try:
        s = float(text) if re.fullmatch(r"\s*-?[0-9]+(\.[0-9]+)?\s*", text) else parse_go_duration(text)
    except ValueError as e:
        raise ValueError(f"keep-alive {text!r}: {e}") from None
    return FOREVER if s < 0 else s
