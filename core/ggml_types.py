"""Tensor types of ggml (the ids stored in a GGUF tensor index) and their block layouts.

Ids, block sizes and byte layouts follow ggml's `ggml.h` / `ggml-common.h`. A block holds `block_size`
elements in `type_size` bytes; each type size is written as the sum of its struct fields.
"""

from __future__ import annotations

from enum import IntEnum

from .errors import UnsupportedTypeError

QK_K = 256  # elements in a k-quant / i-quant super-block
K_SCALE_SIZE = 12  # packed 6-bit scales and mins of Q4_K / Q5_K
FP16 = 2  # bytes of a ggml_half
FP32 = 4


class GGMLType(IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    # 4 (Q4_2) and 5 (Q4_3) were removed from ggml
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    IQ1_M = 29
    BF16 = 30
    # 31..33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) were removed from GGUF files
    TQ1_0 = 34
    TQ2_0 = 35
    # 36..38 (IQ4_NL_4_4, _4_8, _8_8) were removed from GGUF files
    MXFP4 = 39
    NVFP4 = 40
    Q1_0 = 41


# (elements per block, bytes per block), sizes spelt as the sum of the block struct's fields.
BLOCK_LAYOUT: dict[GGMLType, tuple[int, int]] = {
    GGMLType.F32: (1, FP32),
    GGMLType.F16: (1, FP16),
    GGMLType.BF16: (1, 2),
    GGMLType.F64: (1, 8),
    GGMLType.I8: (1, 1),
    GGMLType.I16: (1, 2),
    GGMLType.I32: (1, 4),
    GGMLType.I64: (1, 8),
    GGMLType.Q4_0: (32, FP16 + 32 // 2),  # d, qs[16]
    GGMLType.Q4_1: (32, FP16 + FP16 + 32 // 2),  # d, m, qs[16]
    GGMLType.Q5_0: (32, FP16 + 4 + 32 // 2),  # d, qh[4], qs[16]
    GGMLType.Q5_1: (32, FP16 + FP16 + 4 + 32 // 2),  # d, m, qh[4], qs[16]
    GGMLType.Q8_0: (32, FP16 + 32),  # d, qs[32]
    GGMLType.Q8_1: (32, FP16 + FP16 + 32),  # d, s, qs[32]
    GGMLType.Q2_K: (QK_K, QK_K // 16 + QK_K // 4 + FP16 + FP16),  # scales, qs, d, dmin
    GGMLType.Q3_K: (QK_K, QK_K // 8 + QK_K // 4 + 12 + FP16),  # hmask, qs, scales, d
    GGMLType.Q4_K: (QK_K, FP16 + FP16 + K_SCALE_SIZE + QK_K // 2),  # d, dmin, scales, qs
    GGMLType.Q5_K: (QK_K, FP16 + FP16 + K_SCALE_SIZE + QK_K // 8 + QK_K // 2),  # d, dmin, scales, qh, qs
    GGMLType.Q6_K: (QK_K, QK_K // 2 + QK_K // 4 + QK_K // 16 + FP16),  # ql, qh, scales, d
    GGMLType.Q8_K: (QK_K, FP32 + QK_K + 2 * (QK_K // 16)),  # d (f32), qs, bsums (i16)
    GGMLType.IQ2_XXS: (QK_K, FP16 + 2 * (QK_K // 8)),  # d, qs (u16)
    GGMLType.IQ2_XS: (QK_K, FP16 + 2 * (QK_K // 8) + QK_K // 32),  # d, qs (u16), scales
    GGMLType.IQ2_S: (QK_K, FP16 + QK_K // 4 + QK_K // 32 + QK_K // 32),  # d, qs, qh, scales
    GGMLType.IQ3_XXS: (QK_K, FP16 + 3 * QK_K // 8),  # d, qs (grid indices + signs/scales)
    GGMLType.IQ3_S: (QK_K, FP16 + QK_K // 4 + QK_K // 32 + QK_K // 8 + 4),  # d, qs, qh, signs, scales
    GGMLType.IQ1_S: (QK_K, FP16 + QK_K // 8 + 2 * (QK_K // 32)),  # d, qs, qh (u16)
    GGMLType.IQ1_M: (QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),  # qs, qh, scales (d packed inside)
    GGMLType.IQ4_NL: (32, FP16 + 32 // 2),  # d, qs
    GGMLType.IQ4_XS: (QK_K, FP16 + 2 + QK_K // 64 + QK_K // 2),  # d, scales_h, scales_l, qs
    GGMLType.TQ1_0: (QK_K, (QK_K - 4 * QK_K // 64) // 5 + QK_K // 64 + FP16),  # qs, qh, d
    GGMLType.TQ2_0: (QK_K, QK_K // 4 + FP16),  # qs, d
    GGMLType.MXFP4: (32, 1 + 32 // 2),  # e (E8M0), qs
    GGMLType.NVFP4: (64, 64 // 16 + 64 // 2),  # d[4] (UE4M3 per 16), qs
    GGMLType.Q1_0: (128, FP16 + 128 // 8),  # d, sign bits
}

FLOAT_TYPES = frozenset({GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.F64})
INT_TYPES = frozenset({GGMLType.I8, GGMLType.I16, GGMLType.I32, GGMLType.I64})


def ggml_type(type_id: int, where: str = "") -> GGMLType:
    """The GGMLType for a stored id, or a clear refusal naming the id."""
    try:
        return GGMLType(type_id)
    except ValueError:
        known = ", ".join(f"{t.name}={t.value}" for t in GGMLType)
        place = f"{where}: " if where else ""
        raise UnsupportedTypeError(f"{place}unknown ggml tensor type id {type_id}; known types: {known}") from None


def block_size(t: GGMLType) -> int:
    return BLOCK_LAYOUT[t][0]


def type_size(t: GGMLType) -> int:
    return BLOCK_LAYOUT[t][1]


def is_quantized(t: GGMLType) -> bool:
    return t not in FLOAT_TYPES and t not in INT_TYPES


def row_bytes(t: GGMLType, n_elements: int) -> int:
    """Bytes taken by `n_elements` consecutive elements (a multiple of the block size)."""
    bs, ts = BLOCK_LAYOUT[t]
    if n_elements % bs:
        raise ValueError(f"{t.name}: {n_elements} elements is not a multiple of the block size {bs}")
    return n_elements // bs * ts
