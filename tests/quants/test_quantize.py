"""Quantizers: byte for byte against gguf-py on random float32 blocks (zeros, ties, tiny and huge magnitudes, a
negative maximum), exhaustive fp16 / bf16 round trips, and properties for the types gguf-py cannot write."""

from __future__ import annotations

import math
import struct
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamay.errors import UnsupportedTypeError
from llamay.ggml_types import QK_K, GGMLType, block_size
from llamay.quants import SUPPORTED_QUANTIZE, dequantize, quantize
from tests.quants.helpers import GGUF_PY_QUANTIZE, first_difference

HAND_TESTED = frozenset({GGMLType.Q8_1, GGMLType.Q8_K, GGMLType.Q1_0})
TINY = 2.0**-100  # below about 1e-36 a block's 1/d overflows float32 and the reference casts NaN to an integer
HUGE = 2.0**100  # above about 1e38 max - min overflows


@pytest.fixture(scope="module")
def gguf_quantize():
    """gguf-py's encoder, on float32 bytes."""
    np = pytest.importorskip("numpy")
    gguf = pytest.importorskip("gguf")
    from gguf.quants import quantize as reference

    def encode(t: GGMLType, raw: bytes) -> bytes:
        values = np.frombuffer(raw, dtype=np.float32).reshape(1, -1)
        with np.errstate(all="ignore"):
            return reference(values, gguf.GGMLQuantizationType(int(t))).tobytes()

    return encode


def _float32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


# an element of a block of one scale: exact zero, a half-integer (a rounding tie once scaled by a power of two)
# or a small float; or any magnitude, unscaled
_SCALED = st.one_of(st.just(0.0), st.integers(-32, 32).map(lambda k: k / 2), st.floats(-4.0, 4.0, width=32))
_MAGNITUDE = st.floats(TINY, HUGE, width=32).flatmap(lambda m: st.sampled_from([m, -m]))
_POWER_OF_TWO = st.sampled_from([2.0**e for e in (-60, -12, -1, 0, 1, 7, 12, 60)])


@st.composite
def float32_blocks(draw, t: GGMLType) -> bytes:
    """Whole blocks of float32 values, with -0.0 read as 0.0 (see test_q4_1_takes_the_first_minimum_like_ggml)
    and nothing in the reference's undefined range between 0 and TINY."""
    n = block_size(t) * (1 if block_size(t) > 32 else draw(st.integers(1, 2)))  # big blocks draw slowly
    scale = draw(_POWER_OF_TWO)
    element = st.one_of(_SCALED.map(lambda v: _float32(v * scale)), _MAGNITUDE)
    values = [0.0 if abs(v) < TINY else v for v in draw(st.lists(element, min_size=n, max_size=n))]
    if draw(st.booleans()):  # a negative maximum: Q4_0 / Q5_0 take the sign of the largest magnitude
        i = draw(st.integers(0, n - 1))
        values[i] = -max(map(abs, values)) or -1.0
    return array("f", values).tobytes()


def test_every_quantizer_is_checked():
    assert set(GGUF_PY_QUANTIZE) | HAND_TESTED == SUPPORTED_QUANTIZE


@pytest.mark.native_only
@pytest.mark.parametrize("t", GGUF_PY_QUANTIZE, ids=lambda t: t.name)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_blocks_match_gguf_py(gguf_quantize, t, data):
    raw = data.draw(float32_blocks(t if block_size(t) > 1 else GGMLType.Q8_0))
    mine, ref = quantize(t, raw), gguf_quantize(t, raw)
    assert mine == ref, f"{t.name}: {first_difference(mine, ref, 1)}"


@pytest.mark.native_only
@pytest.mark.parametrize("t", GGUF_PY_QUANTIZE, ids=lambda t: t.name)
def test_gaussian_rows_match_gguf_py(gguf_quantize, t):
    import random

    rng = random.Random(int(t))
    for sigma in (1e-20, 0.02, 1.0, 300.0, 1e20):
        raw = array("f", [rng.gauss(0.0, sigma) for _ in range(4 * QK_K)]).tobytes()
        mine, ref = quantize(t, raw), gguf_quantize(t, raw)
        assert mine == ref, f"{t.name} sigma {sigma}: {first_difference(mine, ref, 1)}"


@pytest.mark.native_only
@pytest.mark.parametrize("t", [GGMLType.F16, GGMLType.BF16], ids=lambda t: t.name)
@settings(max_examples=200, deadline=None)
@given(bits=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64))
def test_any_float32_bits_convert_like_gguf_py(gguf_quantize, t, bits):
    """Every float32, NaN payloads and signaling NaNs included, rounds to half / bfloat16 like numpy."""
    raw = array("I", bits).tobytes()
    assert quantize(t, raw) == gguf_quantize(t, raw)


@pytest.mark.native_only
@pytest.mark.parametrize("t", [GGMLType.Q4_0, GGMLType.Q5_0, GGMLType.Q8_0], ids=lambda t: t.name)
def test_an_all_zero_block_starting_with_minus_zero_matches_gguf_py(gguf_quantize, t):
    raw = array("f", [-0.0] + [0.0] * 31).tobytes()
    assert quantize(t, raw) == gguf_quantize(t, raw)


# ---- exhaustive round trips of the 16-bit float formats (no numpy needed)


def test_every_half_round_trips_bit_for_bit():
    halves = array("H", range(65536)).tobytes()
    assert quantize(GGMLType.F16, dequantize(GGMLType.F16, halves, 65536)) == halves


def test_every_bfloat16_round_trips_except_that_nans_become_quiet():
    wide = dequantize(GGMLType.BF16, array("H", range(65536)).tobytes(), 65536)
    back = array("H", quantize(GGMLType.BF16, wide))
    for h in range(65536):
        is_nan = h & 0x7F80 == 0x7F80 and h & 0x7F
        assert back[h] == (h | 0x40 if is_nan else h), hex(h)


def test_f16_overflows_to_infinity_and_rounds_ties_to_even():
    values = [65504.0, 65519.99, 65520.0, -1e9, 2.0**-25, 2.0**-25 * 1.0000001, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11]
    assert array("H", quantize(GGMLType.F16, values)).tolist() == [
        0x7BFF,
        0x7BFF,
        0x7C00,
        0xFC00,
        0x0000,
        0x0001,
        0x3C00,
        0x3C02,
    ]


def test_f32_stores_the_float32_values():
    assert quantize(GGMLType.F32, [0.1, -2.0]) == struct.pack("<2f", 0.1, -2.0)


# ---- the types gguf-py cannot write: ggml's reference quantizers, checked by their properties


def _random_values(seed: int, n: int, sigma: float = 1.0) -> array:
    import random

    rng = random.Random(seed)
    return array("f", [rng.gauss(0.0, sigma) for _ in range(n)])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), sigma=st.sampled_from([1e-3, 1.0, 100.0]))
def test_q8_1_is_q8_0_plus_the_scaled_sum(seed, sigma):
    x = _random_values(seed, 64, sigma)
    q8_0, q8_1 = quantize(GGMLType.Q8_0, x), quantize(GGMLType.Q8_1, x)
    for b in range(2):
        assert q8_1[36 * b : 36 * b + 2] == q8_0[34 * b : 34 * b + 2]  # d
        qs = q8_1[36 * b + 4 : 36 * b + 36]
        assert qs == q8_0[34 * b + 2 : 34 * b + 34]
        d = _float32(max(abs(v) for v in x[32 * b : 32 * b + 32]) / 127)  # s uses d before its fp16 rounding
        assert q8_1[36 * b + 2 : 36 * b + 4] == struct.pack("<e", _float32(sum(array("b", qs)) * d))
    assert dequantize(GGMLType.Q8_1, q8_1, 64) == dequantize(GGMLType.Q8_0, q8_0, 64)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), sigma=st.sampled_from([1e-30, 1e-3, 1.0, 1e30]))
def test_q8_k_quantizes_to_within_half_a_step(seed, sigma):
    x = _random_values(seed, 2 * QK_K, sigma)
    packed = quantize(GGMLType.Q8_K, x)
    y = dequantize(GGMLType.Q8_K, packed, len(x))
    for b in range(2):
        block = packed[292 * b : 292 * (b + 1)]
        d = struct.unpack_from("<f", block)[0]
        qs, bsums = array("b", block[4:260]), array("h", block[260:])
        amax = max(abs(v) for v in x[256 * b : 256 * (b + 1)])
        assert max(abs(q) for q in qs) == 127 and abs(d) == pytest.approx(amax / 127, rel=1e-6)
        assert list(bsums) == [sum(qs[j : j + 16]) for j in range(0, 256, 16)]
        pairs = zip(x[256 * b : 256 * (b + 1)], y[256 * b : 256 * (b + 1)], strict=True)
        assert all(abs(v - w) <= abs(d) * 0.5001 for v, w in pairs)


def test_q8_k_of_zeros_is_all_zero():
    assert quantize(GGMLType.Q8_K, [0.0] * QK_K) == bytes(292)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), sigma=st.sampled_from([1e-3, 1.0, 100.0]))
def test_q1_0_keeps_the_signs_and_the_mean_magnitude(seed, sigma):
    x = _random_values(seed, 256, sigma)
    y = dequantize(GGMLType.Q1_0, quantize(GGMLType.Q1_0, x), 256)
    for b in range(2):
        block = x[128 * b : 128 * (b + 1)]
        mean = math.fsum(abs(v) for v in block) / 128
        assert abs(y[128 * b]) == pytest.approx(mean, rel=2e-3)  # fp16 d, float32 running sum
        assert all(abs(v) == abs(y[128 * b]) for v in y[128 * b : 128 * (b + 1)])
    assert all((v >= 0) == (w > 0) for v, w in zip(x, y, strict=True))


def test_q1_0_by_hand():
    x = [1.0, -3.0] * 64
    packed = quantize(GGMLType.Q1_0, x)
    assert packed == struct.pack("<e", 2.0) + bytes([0b01010101] * 16)


def test_q4_1_takes_the_first_minimum_like_ggml():
    """gguf-py's numpy min may pick either zero of a block whose minimum is 0.0 and -0.0 (the decoded values
    are the same); llamay keeps the first, as ggml's `quantize_row_q4_1_ref` does."""
    packed = quantize(GGMLType.Q4_1, [-0.0] + [0.0] * 31)
    assert packed[2:4] == struct.pack("<e", -0.0)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_ternary_values_are_minus_zero_or_plus_d(seed):
    x = _random_values(seed, QK_K)
    for t in (GGMLType.TQ1_0, GGMLType.TQ2_0):
        y = dequantize(t, quantize(t, x), QK_K)
        d = max(abs(v) for v in y)
        assert d == struct.unpack("<e", struct.pack("<e", max(abs(v) for v in x)))[0]
        assert {abs(v) for v in y} <= {0.0, d}


# ---- the API around the codecs


def test_values_are_rounded_to_float32_first():
    assert quantize(GGMLType.Q8_0, [0.1] * 32) == quantize(GGMLType.Q8_0, array("f", [0.1] * 32))


def test_a_partial_block_is_refused():
    with pytest.raises(ValueError, match="Q4_0: 33 values is not a multiple of the block size 32"):
        quantize(GGMLType.Q4_0, [0.0] * 33)


@pytest.mark.parametrize("t", [GGMLType.Q4_K, GGMLType.IQ2_XXS, GGMLType.I32], ids=lambda t: t.name)
def test_an_unsupported_target_is_refused_by_name(t):
    with pytest.raises(UnsupportedTypeError, match=rf"cannot quantize {t.name} \(type {int(t)}\); supported: F32"):
        quantize(t, [0.0] * 256)


def test_an_unknown_type_id_is_refused():
    with pytest.raises(UnsupportedTypeError, match=r"unknown ggml type id 99; supported: .*Q8_0"):
        quantize(99, [])
