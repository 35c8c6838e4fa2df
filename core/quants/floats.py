"""The plain element types: F32 F16 BF16 F64 and the integers I8 I16 I32 I64, read as float32.

F16 and BF16 are bit-exact with numpy / gguf-py both ways (NaN payloads included); F64 and the integers are
rounded to the nearest float32 once (an int64 beyond 2^53 is rounded from the exact integer, not via a double).
"""

from __future__ import annotations

import math
from array import array

from ..ggml_types import GGMLType
from .minifloat import bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16

F32_MANTISSA = 24
EXACT_IN_DOUBLE = 1 << 53


def dequantize_f32(raw: bytes, out: array) -> None:
    out.frombytes(raw)


def dequantize_f16(raw: bytes, out: array) -> None:
    out.extend(f16_to_f32(raw))


def dequantize_bf16(raw: bytes, out: array) -> None:
    out.extend(bf16_to_f32(raw))


def dequantize_f64(raw: bytes, out: array) -> None:
    out.fromlist(array("d", raw).tolist())  # array('f') stores each double as C's (float)x


def _int_reader(typecode: str, itemsize: int):
    if array(typecode).itemsize != itemsize:
        raise ImportError(f"array('{typecode}') is not {itemsize} bytes on this platform")

    def dequantize_int(raw: bytes, out: array) -> None:
        out.fromlist(array(typecode, raw).tolist())  # exact in a double, then one rounding to float32

    return dequantize_int


def _int64_as_float32(v: int) -> float:
    """The float32 nearest to `v` (ties to even), from the exact integer: a double first could round twice."""
    if -EXACT_IN_DOUBLE <= v <= EXACT_IN_DOUBLE:
        return float(v)
    a = abs(v)
    shift = a.bit_length() - F32_MANTISSA
    q, r = divmod(a, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return math.copysign(float(q << shift), v)


def dequantize_i64(raw: bytes, out: array) -> None:
    out.fromlist([_int64_as_float32(v) for v in array("q", raw)])


def quantize_f32(values: array) -> bytes:
    return values.tobytes()


DEQUANTIZE = {
    GGMLType.F32: dequantize_f32,
    GGMLType.F16: dequantize_f16,
    GGMLType.BF16: dequantize_bf16,
    GGMLType.F64: dequantize_f64,
    GGMLType.I8: _int_reader("b", 1),
    GGMLType.I16: _int_reader("h", 2),
    GGMLType.I32: _int_reader("i", 4),
    GGMLType.I64: dequantize_i64,
}

QUANTIZE = {GGMLType.F32: quantize_f32, GGMLType.F16: f32_to_f16, GGMLType.BF16: f32_to_bf16}
