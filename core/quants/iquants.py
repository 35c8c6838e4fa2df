"""The i-quants: IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M (lattice grids) and IQ4_NL IQ4_XS (a 16-level
non-linear table). Decoders follow ggml's `dequantize_row_iq*`; the tables are in `iq_tables` (generated).

Each 8 (or 4) elements come from one grid entry, with signs from a sign byte (bit j negates element j) and a
per-32 (or per-16) scale. Scale times level is exact in float32, so the values need no rounding.
"""

from __future__ import annotations

from array import array

from ..ggml_types import GGMLType
from .bits import bits_lsb_first, nibbles
from .iq_tables import (
    IQ1S_GRID,
    IQ2S_GRID,
    IQ2XS_GRID,
    IQ2XXS_GRID,
    IQ3S_GRID,
    IQ3XXS_GRID,
    KSIGNS_IQ2XS,
    KVALUES_IQ4NL,
)
from .layout import Block
from .minifloat import half

# qs: 8 pairs of uint32 per 32 elements: the 4 bytes of the first are grid indices, the second holds four
# 7-bit sign indices (bits 7l..7l+6) and a 4-bit scale (bits 28..31)
IQ2_XXS = Block(GGMLType.IQ2_XXS, d="e", qs="64s")
# qs: 32 uint16, 9-bit grid index + 7-bit sign index; scales: two 4-bit scales per 32 elements
IQ2_XS = Block(GGMLType.IQ2_XS, d="e", qs="64s", scales="8s")
# qs: 32 grid index low bytes then 32 sign bytes; qh: 2 high index bits per 8 elements; scales as IQ2_XS
IQ2_S = Block(GGMLType.IQ2_S, d="e", qs="64s", qh="8s", scales="8s")
# qs: 64 grid indices (4 elements each), then 8 uint32 of four 7-bit sign indices and a 4-bit scale
IQ3_XXS = Block(GGMLType.IQ3_XXS, d="e", qs="96s")
# qs: 64 grid index low bytes; qh: their 9th bits; signs: 32 sign bytes; scales: 4-bit per 32 elements
IQ3_S = Block(GGMLType.IQ3_S, d="e", qs="64s", qh="8s", signs="32s", scales="4s")
# qs: grid index low bytes; qh: 8 uint16 = 4 x 3 high index bits, a 3-bit scale (12..14), the delta sign (15)
IQ1_S = Block(GGMLType.IQ1_S, d="e", qs="32s", qh="16s")
# qh: per 8 elements 3 high index bits and a delta sign (a nibble); scales: 4 uint16 of 3-bit scales whose
# top nibbles together form the fp16 d
IQ1_M = Block(GGMLType.IQ1_M, qs="32s", qh="16s", scales="8s")
IQ4_NL = Block(GGMLType.IQ4_NL, d="e", qs="16s")
# scales_h: 2 high bits per 32 elements; scales_l: their 4 low bits; 6-bit scales offset by 32
IQ4_XS = Block(GGMLType.IQ4_XS, d="e", scales_h="H", scales_l="4s", qs="128s")
IQ1_DELTA = 0.125  # ggml's IQ1S_DELTA, also used by IQ1_M


def _rows(grid: bytes, width: int, signed: bool = False) -> tuple[tuple[int, ...], ...]:
    levels = array("b", grid) if signed else grid
    return tuple(tuple(levels[i : i + width]) for i in range(0, len(levels), width))


IQ2XXS_ROWS = _rows(IQ2XXS_GRID, 8)
IQ2XS_ROWS = _rows(IQ2XS_GRID, 8)
IQ2S_ROWS = _rows(IQ2S_GRID, 8)
IQ3XXS_ROWS = _rows(IQ3XXS_GRID, 4)
IQ3S_ROWS = _rows(IQ3S_GRID, 4)
IQ1S_ROWS = _rows(IQ1S_GRID, 8, signed=True)
# SIGNS[s]: the 8 factors (+1 / -1) of sign byte s
SIGNS: tuple[tuple[int, ...], ...] = tuple(tuple(1 - 2 * b for b in bits_lsb_first(bytes((s,)))) for s in range(256))
KSIGNS = tuple(SIGNS[s] for s in KSIGNS_IQ2XS)  # sign factors of a 7-bit sign index (parity completes the 8th)


def _signed(db: float, levels: tuple[int, ...], signs: tuple[int, ...]) -> list[float]:
    return [db * g * s for g, s in zip(levels, signs, strict=True)]


def dequantize_iq2_xxs(raw: bytes, out: array) -> None:
    for d, qs in IQ2_XXS.iter_unpack(raw):
        for ib in range(8):
            aux = int.from_bytes(qs[8 * ib + 4 : 8 * ib + 8], "little")
            db = d * (0.5 + (aux >> 28)) * 0.25
            for l in range(4):
                out.fromlist(_signed(db, IQ2XXS_ROWS[qs[8 * ib + l]], KSIGNS[(aux >> (7 * l)) & 127]))


def dequantize_iq2_xs(raw: bytes, out: array) -> None:
    for d, qs, scales in IQ2_XS.iter_unpack(raw):
        q16 = array("H", qs)
        for ib in range(8):
            db = (d * (0.5 + (scales[ib] & 0xF)) * 0.25, d * (0.5 + (scales[ib] >> 4)) * 0.25)
            for l in range(4):
                q = q16[4 * ib + l]
                out.fromlist(_signed(db[l // 2], IQ2XS_ROWS[q & 511], KSIGNS[q >> 9]))


def dequantize_iq2_s(raw: bytes, out: array) -> None:
    for d, qs, qh, scales in IQ2_S.iter_unpack(raw):
        for ib in range(8):
            db = (d * (0.5 + (scales[ib] & 0xF)) * 0.25, d * (0.5 + (scales[ib] >> 4)) * 0.25)
            for l in range(4):
                index = qs[4 * ib + l] | (((qh[ib] >> (2 * l)) & 3) << 8)
                out.fromlist(_signed(db[l // 2], IQ2S_ROWS[index], SIGNS[qs[32 + 4 * ib + l]]))


def dequantize_iq3_xxs(raw: bytes, out: array) -> None:
    for d, qs in IQ3_XXS.iter_unpack(raw):
        for ib in range(8):
            aux = int.from_bytes(qs[64 + 4 * ib : 68 + 4 * ib], "little")
            db = d * (0.5 + (aux >> 28)) * 0.5
            for l in range(4):
                levels = IQ3XXS_ROWS[qs[8 * ib + 2 * l]] + IQ3XXS_ROWS[qs[8 * ib + 2 * l + 1]]
                out.fromlist(_signed(db, levels, KSIGNS[(aux >> (7 * l)) & 127]))


def dequantize_iq3_s(raw: bytes, out: array) -> None:
    for d, qs, qh, signs, scales in IQ3_S.iter_unpack(raw):
        for ib in range(8):
            db = d * (1 + 2 * ((scales[ib // 2] >> (4 * (ib % 2))) & 0xF))
            high = qh[ib]
            for l in range(4):
                first = qs[8 * ib + 2 * l] | (((high >> (2 * l)) & 1) << 8)
                second = qs[8 * ib + 2 * l + 1] | (((high >> (2 * l + 1)) & 1) << 8)
                out.fromlist(_signed(db, IQ3S_ROWS[first] + IQ3S_ROWS[second], SIGNS[signs[4 * ib + l]]))


def dequantize_iq1_s(raw: bytes, out: array) -> None:
    for d, qs, qh in IQ1_S.iter_unpack(raw):
        for ib, h in enumerate(array("H", qh)):
            dl = d * (2 * ((h >> 12) & 7) + 1)
            delta = -IQ1_DELTA if h & 0x8000 else IQ1_DELTA
            for l in range(4):
                levels = IQ1S_ROWS[qs[4 * ib + l] | (((h >> (3 * l)) & 7) << 8)]
                out.fromlist([dl * (g + delta) for g in levels])


def dequantize_iq1_m(raw: bytes, out: array) -> None:
    for qs, qh, scales in IQ1_M.iter_unpack(raw):
        sc = array("H", scales)
        d_bits = (sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000)
        d = half(d_bits.to_bytes(2, "little"))
        for ib in range(8):
            s = sc[ib // 2] >> (6 * (ib % 2))
            dls = (d * (2 * (s & 7) + 1), d * (2 * ((s >> 3) & 7) + 1))
            for l in range(4):
                nibble = qh[2 * ib + l // 2] >> (4 * (l % 2))  # 3 high index bits, then the delta sign
                levels = IQ1S_ROWS[qs[4 * ib + l] | ((nibble & 7) << 8)]
                delta = -IQ1_DELTA if nibble & 8 else IQ1_DELTA
                dl = dls[l // 2]
                out.fromlist([dl * (g + delta) for g in levels])


def dequantize_iq4_nl(raw: bytes, out: array) -> None:
    for d, qs in IQ4_NL.iter_unpack(raw):
        levels = [d * k for k in KVALUES_IQ4NL]
        out.fromlist(list(map(levels.__getitem__, nibbles(qs))))


def dequantize_iq4_xs(raw: bytes, out: array) -> None:
    for d, scales_h, scales_l, qs in IQ4_XS.iter_unpack(raw):
        for ib in range(8):
            ls = ((scales_l[ib // 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4)
            dl = d * (ls - 32)
            levels = [dl * k for k in KVALUES_IQ4NL]
            out.fromlist(list(map(levels.__getitem__, nibbles(qs[16 * ib : 16 * ib + 16]))))


DEQUANTIZE = {
    GGMLType.IQ2_XXS: dequantize_iq2_xxs,
    GGMLType.IQ2_XS: dequantize_iq2_xs,
    GGMLType.IQ2_S: dequantize_iq2_s,
    GGMLType.IQ3_XXS: dequantize_iq3_xxs,
    GGMLType.IQ3_S: dequantize_iq3_s,
    GGMLType.IQ1_S: dequantize_iq1_s,
    GGMLType.IQ1_M: dequantize_iq1_m,
    GGMLType.IQ4_NL: dequantize_iq4_nl,
    GGMLType.IQ4_XS: dequantize_iq4_xs,
}

# ggml's i-quant quantizers search the grids with an importance matrix; gguf-py has none to check against.
QUANTIZE: dict = {}
