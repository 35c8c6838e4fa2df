"""The first ggml block types: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 (32 elements) and Q1_0 (128 elements, sign bits).

Dequantizers follow ggml's `dequantize_row_*`; quantizers follow gguf-py's `gguf.quants` (numpy float32; its
Q8_0 is bit-exact with ggml's `quantize_row_q8_0_ref`), and ggml's `quantize_row_*_ref` for Q8_1 and Q1_0,
which gguf-py lacks. Products of an fp16 scale and a small integer are exact in float32, so a decoded value
needs at most one rounding (the `+ m` of the `_1` types), done when it is stored into the `array('f')`.
"""

from __future__ import annotations

from array import array

from ..ggml_types import GGMLType
from .bits import HIGH_NIBBLE, LOW_NIBBLE, bits_lsb_first, nibbles
from .layout import Block
from .minifloat import f32, pack_half

# qs: byte j holds element j in its low nibble and element j + 16 in its high nibble
Q4_0 = Block(GGMLType.Q4_0, d="e", qs="16s")
Q4_1 = Block(GGMLType.Q4_1, d="e", m="e", qs="16s")
# qh: bit j (of a little-endian uint32) is bit 4 of element j
Q5_0 = Block(GGMLType.Q5_0, d="e", qh="4s", qs="16s")
Q5_1 = Block(GGMLType.Q5_1, d="e", m="e", qh="4s", qs="16s")
Q8_0 = Block(GGMLType.Q8_0, d="e", qs="32b")
# s = d * sum(qs), kept for the dot products with Q4_1 / Q5_1
Q8_1 = Block(GGMLType.Q8_1, d="e", s="e", qs="32b")
# qs: bit j (byte j // 8, bit j % 8) set means +d, clear means -d
Q1_0 = Block(GGMLType.Q1_0, d="e", qs="16s")


# ---- dequantize: each appends the decoded blocks of `raw` (whole blocks) to `out`
# (one list comprehension per block into `array.fromlist` is the fastest pure-Python shape measured)

# _BIT4_OF[b]: the 8 bits of byte b, least significant first, each moved to bit 4 (0 or 16), one per byte
_BIT4_OF: tuple[bytes, ...] = tuple(bytes(((b >> j) & 1) << 4 for j in range(8)) for b in range(256))


def _five_bit(qh: bytes, qs: bytes) -> bytes:
    """The 32 5-bit quants of a Q5 block: the nibbles, OR bit 4 from qh (one big-integer OR for all 32)."""
    low = int.from_bytes(qs.translate(LOW_NIBBLE) + qs.translate(HIGH_NIBBLE), "little")
    high = int.from_bytes(b"".join(map(_BIT4_OF.__getitem__, qh)), "little")
    return (low | high).to_bytes(32, "little")


def dequantize_q4_0(raw: bytes, out: array) -> None:
    for d, qs in Q4_0.iter_unpack(raw):
        out.fromlist([d * (q - 8) for q in nibbles(qs)])


def dequantize_q4_1(raw: bytes, out: array) -> None:
    for d, m, qs in Q4_1.iter_unpack(raw):
        out.fromlist([d * q + m for q in nibbles(qs)])


def dequantize_q5_0(raw: bytes, out: array) -> None:
    for d, qh, qs in Q5_0.iter_unpack(raw):
        out.fromlist([d * (q - 16) for q in _five_bit(qh, qs)])


def dequantize_q5_1(raw: bytes, out: array) -> None:
    for d, m, qh, qs in Q5_1.iter_unpack(raw):
        out.fromlist([d * q + m for q in _five_bit(qh, qs)])


def dequantize_q8_0(raw: bytes, out: array) -> None:
    for block in Q8_0.iter_unpack(raw):
        d = block[0]
        out.fromlist([d * q for q in block[1:]])


def dequantize_q8_1(raw: bytes, out: array) -> None:
    for block in Q8_1.iter_unpack(raw):
        d = block[0]
        out.fromlist([d * q for q in block[2:]])


def dequantize_q1_0(raw: bytes, out: array) -> None:
    for d, qs in Q1_0.iter_unpack(raw):
        out.fromlist(list(map((-d, d).__getitem__, bits_lsb_first(qs))))


# ---- quantize: each takes the float32 values (a list of whole blocks) and returns the packed blocks


def _signed_absmax(x: list[float]) -> float:
    """The first value of largest magnitude, as numpy's `argmax(abs(x))`. (ggml's loop starts from +0.0 instead of
    x[0], so for an all-zero block led by -0.0 ggml's d is -0.0 where gguf-py's is +0.0; llamay follows gguf-py.)"""
    best = x[0]
    for v in x:
        if abs(v) > abs(best):
            best = v
    return best


def _inverse(d: float) -> float:
    return f32(1.0 / d) if d else 0.0


def _round_half_away(y: float) -> int:
    """C's `roundf` (gguf-py's `np_roundf`); exact since y + 0.5 needs no rounding in a double here."""
    return int(y + 0.5) if y >= 0 else -int(0.5 - y)


def _pack_nibbles(q: list[int]) -> bytes:
    half = len(q) // 2
    return bytes((q[j] & 0xF) | ((q[j + half] & 0xF) << 4) for j in range(half))


def _pack_high_bits(q: list[int]) -> bytes:
    """Bit 4 of each of the 32 quants, as a little-endian uint32 (bit j from element j)."""
    return sum(((v >> 4) & 1) << j for j, v in enumerate(q)).to_bytes(4, "little")


def _blocks(values: array, n: int) -> list[list[float]]:
    floats = values.tolist()
    return [floats[i : i + n] for i in range(0, len(floats), n)]


def quantize_q4_0(values: array) -> bytes:
    out = bytearray()
    for x in _blocks(values, 32):
        d = f32(_signed_absmax(x) / -8)
        inv = _inverse(d)
        q = [min(15, int(f32(f32(v * inv) + 8.5))) for v in x]  # truncation toward zero, as the C cast
        out += pack_half(d) + _pack_nibbles(q)
    return bytes(out)


def quantize_q4_1(values: array) -> bytes:
    out = bytearray()
    for x in _blocks(values, 32):
        lo, hi = min(x), max(x)  # the first minimum, as ggml (numpy's may be either of 0.0 and -0.0)
        d = f32(f32(hi - lo) / 15)
        inv = _inverse(d)
        q = [min(15, int(f32(f32(f32(v - lo) * inv) + 0.5))) for v in x]
        out += pack_half(d) + pack_half(lo) + _pack_nibbles(q)
    return bytes(out)


def quantize_q5_0(values: array) -> bytes:
    out = bytearray()
    for x in _blocks(values, 32):
        d = f32(_signed_absmax(x) / -16)
        inv = _inverse(d)
        q = [min(31, int(f32(f32(v * inv) + 16.5))) for v in x]
        out += pack_half(d) + _pack_high_bits(q) + _pack_nibbles(q)
    return bytes(out)


def quantize_q5_1(values: array) -> bytes:
    out = bytearray()
    for x in _blocks(values, 32):
        lo, hi = min(x), max(x)
        d = f32(f32(hi - lo) / 31)
        inv = _inverse(d)
        q = [min(31, int(f32(f32(f32(v - lo) * inv) + 0.5))) for v in x]
        out += pack_half(d) + pack_half(lo) + _pack_high_bits(q) + _pack_nibbles(q)
    return bytes(out)


def _q8(x: list[float]) -> tuple[float, list[int]]:
    """The shared core of Q8_0 and Q8_1: d = amax / 127 and the quants rounded half away from zero."""
    d = f32(max(map(abs, x)) / 127)
    inv = _inverse(d)
    return d, [_round_half_away(f32(v * inv)) for v in x]


def quantize_q8_0(values: array) -> bytes:
    out = bytearray()
    for x in _blocks(values, 32):
        d, q = _q8(x)
        out += pack_half(d) + array("b", q).tobytes()
    return bytes(out)


def quantize_q8_1(values: array) -> bytes:
    out = bytearray()
    for x in _blocks(values, 32):
        d, q = _q8(x)
        out += pack_half(d) + pack_half(f32(sum(q) * d)) + array("b", q).tobytes()
    return bytes(out)


def quantize_q1_0(values: array) -> bytes:
    out = bytearray()
    for x in _blocks(values, 128):
        total = 0.0
        for v in x:  # float32 accumulation in order, as the C loop
            total = f32(total + abs(v))
        signs = sum(1 << j for j, v in enumerate(x) if v >= 0.0)
        out += pack_half(f32(total / 128)) + signs.to_bytes(16, "little")
    return bytes(out)


DEQUANTIZE = {
    GGMLType.Q4_0: dequantize_q4_0,
    GGMLType.Q4_1: dequantize_q4_1,
    GGMLType.Q5_0: dequantize_q5_0,
    GGMLType.Q5_1: dequantize_q5_1,
    GGMLType.Q8_0: dequantize_q8_0,
    GGMLType.Q8_1: dequantize_q8_1,
    GGMLType.Q1_0: dequantize_q1_0,
}

QUANTIZE = {
    GGMLType.Q4_0: quantize_q4_0,
    GGMLType.Q4_1: quantize_q4_1,
    GGMLType.Q5_0: quantize_q5_0,
    GGMLType.Q5_1: quantize_q5_1,
    GGMLType.Q8_0: quantize_q8_0,
    GGMLType.Q8_1: quantize_q8_1,
    GGMLType.Q1_0: quantize_q1_0,
}
