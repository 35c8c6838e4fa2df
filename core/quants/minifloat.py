"""The small float formats of ggml blocks and tensors: IEEE half (fp16), bfloat16, E8M0 and UE4M3; float32 rounding.

Python floats are doubles. Every float32 is exact in a double, and one IEEE operation (+ - * /) on float32 inputs,
done in double and then rounded to float32, gives exactly the float32 result (53 >= 2 * 24 + 2 bits, so the double
rounding is harmless). So the codecs compute in Python floats and round once per C operation with `f32`, or when
storing into an `array('f')` (whose item assignment is C's `(float)x`: ties to even, overflow to infinity).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable

_HALF = struct.Struct("<e")
F32_EXP = 0x7F800000
F32_MANT = 0x007FFFFF
F16_INF = 0x7C00


def f32(x: float) -> float:
    """`x` rounded to the nearest float32, as C's `(float)x` (ties to even, overflow to infinity)."""
    return array("f", (x,))[0]


def f32_array(values: Iterable[float] | bytes | memoryview) -> array:
    """Values as an `array('f')`: an `array('f')` is kept (its NaN payloads too), bytes are read as float32."""
    if isinstance(values, array) and values.typecode == "f":
        return values
    if isinstance(values, (bytes, bytearray, memoryview)):
        out = array("f")
        out.frombytes(bytes(values))
        return out
    return array("f", values)


def f32_bits(values: array) -> memoryview:
    """The uint32 bit patterns of an `array('f')`, as a writable view over the same memory."""
    return memoryview(values).cast("B").cast("I")


# ---- fp16 (IEEE binary16)


def half(raw: bytes, at: int = 0) -> float:
    """The fp16 at byte `at` of `raw` (ggml's `GGML_FP16_TO_FP32`; a NaN keeps no payload: use `f16_to_f32`)."""
    return _HALF.unpack_from(raw, at)[0]


def pack_half(x: float) -> bytes:
    """`x` (a float32 value) as fp16 bytes, rounded to nearest even, overflowing to infinity like numpy's cast."""
    try:
        return _HALF.pack(x)
    except OverflowError:  # struct refuses what rounds past 65504; C and numpy give infinity
        return (F16_INF | (0x8000 if x < 0 else 0)).to_bytes(2, "little")


def half_bits_of_f32_bits(bits: int) -> int:
    """fp16 bits for float32 bits, as numpy's `float32 -> float16` cast (a NaN keeps its top payload bits)."""
    if bits & F32_EXP == F32_EXP and bits & F32_MANT:
        sign = (bits >> 16) & 0x8000
        payload = (bits & F32_MANT) >> 13
        return sign | F16_INF | (payload or 1)  # a payload shifted out to zero would read as infinity
    value = struct.unpack("<f", bits.to_bytes(4, "little"))[0]
    return int.from_bytes(pack_half(value), "little")


def f16_to_f32(raw: bytes) -> array:
    """fp16 values as float32, bit-exact (NaN sign and payload kept, as numpy's and ggml's scalar conversion)."""
    n = len(raw) // 2
    out = array("f", struct.unpack(f"<{n}e", raw))
    total = sum(out)
    if total == total:  # no NaN (a NaN, or inf + -inf, makes the sum NaN): the fast path was exact
        return out
    bits = f32_bits(out)
    for i, h in enumerate(array("H", raw)):
        if h & F16_INF == F16_INF and h & 0x3FF:  # struct drops NaN payloads: rebuild those bits
            bits[i] = ((h & 0x8000) << 16) | F32_EXP | ((h & 0x3FF) << 13)
    return out


def f32_to_f16(values: array) -> bytes:
    """float32 values (an `array('f')`) as fp16 bytes: round to nearest even, overflow to inf, NaN as numpy."""
    total = sum(values)
    if total == total:  # no NaN: struct rounds like numpy (it only drops NaN payloads)
        try:
            return struct.pack(f"<{len(values)}e", *values)
        except OverflowError:
            pass  # a value rounds past 65504: take the per-element path
    return array("H", map(half_bits_of_f32_bits, f32_bits(values))).tobytes()


# ---- bfloat16 (the upper half of a float32)


def bf16_to_f32(raw: bytes) -> array:
    """bf16 values as float32: each is the upper 16 bits of a float32 whose lower 16 bits are zero."""
    wide = bytearray(2 * len(raw))
    wide[2::4] = raw[0::2]
    wide[3::4] = raw[1::2]
    out = array("f")
    out.frombytes(bytes(wide))
    return out


def bf16_bits_of_f32_bits(bits: int) -> int:
    """bf16 bits for float32 bits as gguf-py and ggml's `ggml_compute_fp32_to_bf16`: NaN made quiet, else
    rounded to nearest even (the carry may reach infinity)."""
    if bits & 0x7FFFFFFF > F32_EXP:
        bits = (bits & 0xFFFF0000) | 0x00400000
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def f32_to_bf16(values: array) -> bytes:
    return array("H", map(bf16_bits_of_f32_bits, f32_bits(values))).tobytes()


# ---- E8M0 (MXFP4 block scale) and UE4M3 (NVFP4 sub-block scale), both halved for the doubled E2M1 levels


def _e8m0_half(e: int) -> float:
    # ggml_e8m0_to_fp32_half: 2^(e - 128); e < 2 are float32 subnormals, built from their bits
    bits = 0x00200000 << e if e < 2 else (e - 1) << 23
    return struct.unpack("<f", bits.to_bytes(4, "little"))[0]


def _ue4m3_half(x: int) -> float:
    # ggml_ue4m3_to_fp32 (bit 7 is ignored; 0 and 0x7F read as zero), times 0.5
    if x in (0, 0x7F):
        return 0.0
    exp, man = (x >> 3) & 0xF, x & 0x7
    raw = man * 2.0**-9 if exp == 0 else (1.0 + man / 8.0) * 2.0 ** (exp - 7)
    return raw * 0.5


E8M0_HALF: tuple[float, ...] = tuple(_e8m0_half(e) for e in range(256))
UE4M3_HALF: tuple[float, ...] = tuple(_ue4m3_half(x) for x in range(256))
