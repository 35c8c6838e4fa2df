"""Shared test data for the quant codecs: random blocks with finite scales, and the gguf-py oracle's type lists."""

from __future__ import annotations

import random
import struct
from array import array

from llamay.ggml_types import GGMLType, block_size, type_size
from llamay.quants import BLOCKS

_T = GGMLType
# Types gguf-py 0.19 can dequantize (`gguf.quants.dequantize`): checked against it bit for bit.
GGUF_PY_DEQUANTIZE = (
    *(_T.F32, _T.F16, _T.BF16, _T.Q4_0, _T.Q4_1, _T.Q5_0, _T.Q5_1, _T.Q8_0),
    *(_T.Q2_K, _T.Q3_K, _T.Q4_K, _T.Q5_K, _T.Q6_K, _T.TQ1_0, _T.TQ2_0, _T.MXFP4, _T.NVFP4),
    *(_T.IQ2_XXS, _T.IQ2_XS, _T.IQ2_S, _T.IQ3_XXS, _T.IQ3_S, _T.IQ1_S, _T.IQ1_M, _T.IQ4_NL, _T.IQ4_XS),
)
# Types gguf-py 0.19 can quantize (`gguf.quants.quantize`): checked against it byte for byte.
GGUF_PY_QUANTIZE = (
    *(_T.F32, _T.F16, _T.BF16, _T.Q4_0, _T.Q4_1, _T.Q5_0, _T.Q5_1, _T.Q8_0),
    *(_T.TQ1_0, _T.TQ2_0, _T.MXFP4),
)

F16_EXP = 0x7C00
F32_EXP = 0x7F800000


def finite_half(h: int) -> int:
    """fp16 bits made finite: an all-ones exponent (inf / NaN) loses its top exponent bit."""
    return h & ~0x4000 if h & F16_EXP == F16_EXP else h


def finite_single(f: int) -> int:
    return f & ~0x40000000 if f & F32_EXP == F32_EXP else f


def _patch_u16(raw: bytearray, at: int, fix) -> None:
    raw[at : at + 2] = fix(int.from_bytes(raw[at : at + 2], "little")).to_bytes(2, "little")


def with_finite_scales(t: GGMLType, raw: bytes) -> bytes:
    """`raw` (whole blocks of type `t`) with every float scale field made finite, so that both decoders compute
    with numbers: NaN payloads are not part of ggml's contract for block scales."""
    block = BLOCKS.get(t)
    if block is None:
        return raw
    out = bytearray(raw)
    for start in range(0, len(out), block.size):
        for name, code in block.fields.items():
            at = start + block.offset[name]
            if code == "e":
                _patch_u16(out, at, finite_half)
            elif code == "f":
                out[at : at + 4] = finite_single(int.from_bytes(out[at : at + 4], "little")).to_bytes(4, "little")
        if t == GGMLType.IQ1_M:
            _patch_iq1_m_scale(out, start + block.offset["scales"])
    return bytes(out)


def _patch_iq1_m_scale(raw: bytearray, at: int) -> None:
    """IQ1_M's fp16 d is the top nibbles of its four uint16 scales (bits 12..15 of the last hold d's 12..15)."""
    sc = array("H", bytes(raw[at : at + 8]))
    d = (sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000)
    if finite_half(d) != d:
        sc[3] &= ~0x4000
        raw[at : at + 8] = sc.tobytes()


def random_blocks(t: GGMLType, n_blocks: int, seed: int) -> bytes:
    return with_finite_scales(t, random.Random(seed).randbytes(n_blocks * type_size(t)))


def n_elements(t: GGMLType, raw: bytes) -> int:
    return len(raw) // type_size(t) * block_size(t)


def f32_bits(values: array) -> list[int]:
    return list(array("I", values.tobytes()))


def first_difference(mine: bytes, ref: bytes, width: int = 4) -> str:
    """A readable note of where two buffers first differ (as `width`-byte items)."""
    for i in range(0, min(len(mine), len(ref)), width):
        if mine[i : i + width] != ref[i : i + width]:
            fmt = {4: "<f", 2: "<e"}.get(width)
            note = ""
            if fmt:
                a, b = struct.unpack(fmt, mine[i : i + width])[0], struct.unpack(fmt, ref[i : i + width])[0]
                note = f" ({a!r} vs {b!r})"
            return f"item {i // width}: {mine[i : i + width].hex()} vs {ref[i : i + width].hex()}{note}"
    return f"lengths {len(mine)} vs {len(ref)}"
