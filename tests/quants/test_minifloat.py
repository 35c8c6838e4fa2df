"""The small float formats: E8M0 and UE4M3 scale tables, float32 rounding (fp16 and bf16 are checked
exhaustively in test_quantize)."""

from __future__ import annotations

import math

from llamay.quants.minifloat import E8M0_HALF, UE4M3_HALF, f32, pack_half


def test_e8m0_half_is_two_to_the_e_minus_128():
    assert all(E8M0_HALF[e] == math.ldexp(1.0, e - 128) for e in range(256))


def test_ue4m3_half_reads_zero_nan_subnormals_and_normals():
    assert UE4M3_HALF[0x00] == 0.0 and UE4M3_HALF[0x7F] == 0.0  # 0x7F is E4M3's NaN: ggml reads it as zero
    assert UE4M3_HALF[0x01] == 2.0**-9 * 0.5  # smallest subnormal
    assert UE4M3_HALF[0x38] == 0.5  # exponent 7 (bias 7), mantissa 0: 1.0, halved
    assert UE4M3_HALF[0x7E] == 448.0 * 0.5  # largest finite
    assert UE4M3_HALF[0x80 | 0x38] == 0.5  # the sign bit is ignored


def test_f32_rounds_to_nearest_even_and_overflows_to_infinity():
    assert f32(0.1) == 0.10000000149011612
    assert f32(1.0 + 2.0**-24) == 1.0 and f32(1.0 + 3 * 2.0**-24) == 1.0 + 2.0**-22
    assert f32(3.4028235677973366e38) == math.inf and f32(-1e39) == -math.inf


def test_pack_half_overflows_to_signed_infinity():
    assert pack_half(65520.0) == b"\x00\x7c" and pack_half(-1e10) == b"\x00\xfc"
    assert pack_half(65519.99) == b"\xff\x7b"
