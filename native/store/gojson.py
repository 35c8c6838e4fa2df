"""JSON as Go's encoding/json writes it, so the blobs llamay writes are byte for byte the ones Ollama would:
no spaces, `<` `>` `&` U+2028 U+2029 escaped, floats in Go's shortest form (1 not 1.0, 0.00001 not 1e-05),
map keys sorted (the caller sorts: a Go struct keeps its field order, which a dict's order stands for), and
json.Encoder's newline at the end."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

HTML_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
FIXED_RANGE = (1e-6, 1e21)  # Go writes floats in this range without an exponent


def go_float(f: float) -> str:
    if f != f or f in (float("inf"), float("-inf")):
        raise ValueError(f"JSON has no {f}")
    if f == 0:
        return "0" if str(f)[0] != "-" else "-0"
    if FIXED_RANGE[0] <= abs(f) < FIXED_RANGE[1]:
        text = format(Decimal(repr(f)), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa, exponent = repr(f).split("e")
    return f"{mantissa.removesuffix('.0')}e{exponent[0]}{exponent[1:].lstrip('0')}"


def go_string(s: str) -> str:
    out = json.dumps(s, ensure_ascii=False)
    for ch, esc in HTML_ESCAPES.items():
        out = out.replace(ch, esc)
    return out


def encode(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_string(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{go_string(str(k))}:{encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(encode(v) for v in value) + "]"
    raise TypeError(f"cannot encode a {type(value).__name__} as JSON")


def dumps(value: Any) -> bytes:
    """What Go's json.NewEncoder(w).Encode(value) writes."""
    return (encode(value) + "\n").encode()
