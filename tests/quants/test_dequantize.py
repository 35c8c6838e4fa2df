"""Dequantizers: bit for bit against gguf-py on random blocks (every type it decodes), and hand-built blocks for
the types it lacks (Q8_1, Q8_K, Q1_0, F64, the integers)."""

from __future__ import annotations

import math
import struct
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamay.errors import UnsupportedTypeError
from llamay.ggml_types import GGMLType, block_size, type_size
from llamay.quants import SUPPORTED_DEQUANTIZE, dequantize
from tests.quants.helpers import GGUF_PY_DEQUANTIZE, first_difference, n_elements, random_blocks, with_finite_scales

HAND_TESTED = frozenset(
    {GGMLType.Q8_1, GGMLType.Q8_K, GGMLType.Q1_0, GGMLType.F64, GGMLType.I8, GGMLType.I16, GGMLType.I32, GGMLType.I64}
)


@pytest.fixture(scope="module")
def gguf_dequantize():
    """gguf-py's decoder, as raw float32 bytes."""
    np = pytest.importorskip("numpy")
    gguf = pytest.importorskip("gguf")
    from gguf.quants import dequantize as reference

    def decode(t: GGMLType, raw: bytes) -> bytes:
        with np.errstate(all="ignore"):
            values = reference(np.frombuffer(raw, dtype=np.uint8), gguf.GGMLQuantizationType(int(t)))
        return values.astype(np.float32).tobytes()

    return decode


def test_every_type_is_decoded_and_checked():
    assert set(GGMLType) == SUPPORTED_DEQUANTIZE
    assert set(GGUF_PY_DEQUANTIZE) | HAND_TESTED == SUPPORTED_DEQUANTIZE


def _check_bits(t: GGMLType, raw: bytes, reference: bytes) -> None:
    mine = dequantize(t, raw, n_elements(t, raw)).tobytes()
    assert mine == reference, f"{t.name}: {first_difference(mine, reference)}"


@pytest.mark.native_only
@pytest.mark.parametrize("t", GGUF_PY_DEQUANTIZE, ids=lambda t: t.name)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_random_blocks_match_gguf_py(gguf_dequantize, t, data):
    n_blocks = data.draw(st.integers(1, 3)) * (64 if block_size(t) == 1 else 1)
    raw = with_finite_scales(
        t, data.draw(st.binary(min_size=n_blocks * type_size(t), max_size=n_blocks * type_size(t)))
    )
    _check_bits(t, raw, gguf_dequantize(t, raw))


@pytest.mark.native_only
@pytest.mark.parametrize("t", GGUF_PY_DEQUANTIZE, ids=lambda t: t.name)
def test_many_seeded_blocks_match_gguf_py(gguf_dequantize, t):
    raw = random_blocks(t, 256 if block_size(t) > 1 else 8192, seed=int(t))
    _check_bits(t, raw, gguf_dequantize(t, raw))


@pytest.mark.native_only
@pytest.mark.parametrize("t", GGUF_PY_DEQUANTIZE, ids=lambda t: t.name)
def test_raw_bytes_match_gguf_py_up_to_nan_payloads(gguf_dequantize, t):
    """Unpatched random bytes make some scales inf or NaN: values then agree, but a NaN's payload may not
    (struct drops it when reading an fp16 scale; F16 tensors themselves keep it, checked bit for bit above)."""
    import random

    raw = random.Random(1000 + int(t)).randbytes(64 * type_size(t))
    mine = array("f", dequantize(t, raw, n_elements(t, raw)))
    ref = array("f", gguf_dequantize(t, raw))
    bad = [i for i, (a, b) in enumerate(zip(mine, ref, strict=True)) if a != b and not (a != a and b != b)]
    bits_differ = [i for i in bad if struct.pack("<f", mine[i]) != struct.pack("<f", ref[i])]
    assert not bits_differ, f"{t.name}: first at {bits_differ[0]}: {mine[bits_differ[0]]} vs {ref[bits_differ[0]]}"


# ---- hand-built blocks for the types gguf-py does not decode


def half(x: float) -> bytes:
    return struct.pack("<e", x)


def test_q1_0_bits_select_plus_or_minus_d():
    qs = bytes([0b00000001, 0b10000000] + [0xFF] * 7 + [0] * 7)
    out = dequantize(GGMLType.Q1_0, half(0.75) + qs, 128)
    expected = [0.75] + [-0.75] * 14 + [0.75] + [0.75] * 56 + [-0.75] * 56
    assert out.tolist() == expected


def test_q1_0_zero_scale_keeps_the_sign_of_zero():
    out = dequantize(GGMLType.Q1_0, half(0.0) + bytes([0x0F]) + bytes(15), 128)
    assert [math.copysign(1, v) for v in out[:8]] == [1, 1, 1, 1, -1, -1, -1, -1]


def test_q8_1_is_d_times_q_and_ignores_s():
    qs = list(range(-16, 16))
    raw = half(0.375) + half(-1234.0) + array("b", qs).tobytes()
    assert dequantize(GGMLType.Q8_1, raw, 32).tolist() == [0.375 * q for q in qs]


def test_q8_k_rounds_d_times_q_to_float32():
    d = 0.1  # not a float32: the block stores float32(0.1)
    qs = [(-128 + 7 * i) % 256 - 128 for i in range(256)]
    raw = struct.pack("<f", d) + array("b", qs).tobytes() + array("h", range(16)).tobytes()
    d32 = struct.unpack("<f", struct.pack("<f", d))[0]
    assert dequantize(GGMLType.Q8_K, raw, 256).tolist() == array("f", [d32 * q for q in qs]).tolist()


def test_f64_rounds_to_nearest_float32():
    flt_max = 3.4028234663852886e38
    midpoint = flt_max + 2.0**103  # half an ulp above FLT_MAX: the tie goes to even, which is infinity
    values = [1 / 3, -2.5, 1e300, -1e-300, math.nextafter(midpoint, 0), midpoint, float("inf")]
    out = dequantize(GGMLType.F64, array("d", values).tobytes(), len(values))
    assert out.tolist() == array("f", values).tolist()
    assert out[2] == math.inf and math.copysign(1, out[3]) == -1
    assert out[4] == flt_max and out[5] == math.inf


@pytest.mark.parametrize(
    ("t", "typecode", "values"),
    [
        (GGMLType.I8, "b", [-128, -1, 0, 1, 127]),
        (GGMLType.I16, "h", [-32768, -1, 0, 32767]),
        (GGMLType.I32, "i", [-(2**31), 2**24 + 1, 2**24 + 3, 2**31 - 1]),
    ],
    ids=lambda v: v.name if isinstance(v, GGMLType) else None,
)
def test_small_integers_round_once(t, typecode, values):
    out = dequantize(t, array(typecode, values).tobytes(), len(values))
    assert out.tolist() == array("f", values).tolist()


def test_int64_rounds_from_the_exact_integer():
    values = [
        2**24 + 1,  # tie: to even (2^24)
        2**24 + 3,  # tie: to even (2^24 + 4)
        2**53 + 2**29 + 1,  # via a double this would round twice, to 2^53
        -(2**63),
        2**63 - 1,  # rounds up to 2^63
        2**60 + 2**36,  # tie: to even (2^60)
        2**60 + 3 * 2**36,  # tie: to even (2^60 + 2^38)
    ]
    expected = [2.0**24, 2.0**24 + 4, 2.0**53 + 2**30, -(2.0**63), 2.0**63, 2.0**60, 2.0**60 + 2**38]
    assert dequantize(GGMLType.I64, array("q", values).tobytes(), len(values)).tolist() == expected


# ---- the API around the codecs


def test_reads_only_the_elements_asked_for():
    raw = random_blocks(GGMLType.Q4_K, 3, seed=5)
    whole = dequantize(GGMLType.Q4_K, raw, 768)
    assert dequantize(GGMLType.Q4_K, memoryview(raw), 512) == whole[:512]
    assert dequantize(GGMLType.Q4_K, bytearray(raw) + b"tail", 256) == whole[:256]


def test_a_short_buffer_is_refused():
    with pytest.raises(ValueError, match="Q8_0: 64 elements need 68 bytes"):
        dequantize(GGMLType.Q8_0, bytes(67), 64)


def test_a_partial_block_is_refused():
    with pytest.raises(ValueError, match="not a multiple of the block size 32"):
        dequantize(GGMLType.Q4_0, bytes(36), 48)


def test_an_unknown_type_id_is_refused_by_name():
    with pytest.raises(UnsupportedTypeError, match=r"unknown ggml type id 4\b.*supported: F32, F16"):
        dequantize(4, b"", 0)
