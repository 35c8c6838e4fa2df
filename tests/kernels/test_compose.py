"""The fused ops (`llamay.kernels.compose`): on every backend each gives bit for bit the ops it is made of, for the
weight types a backend runs fused (numba's strips: Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL) and those it composes."""

from __future__ import annotations

import random

import pytest

from llamay.ggml_types import GGMLType
from tests.backends import require_backend
from tests.kernels.data import floats, weight_bytes
from tests.kernels.test_kernels import _vec, _weight, close

N_IN = 256
# (q, k, v) types and widths: strips of one format; a v of another format, or not in strips of eight rows (9
# outputs), or of a type numba does not repack, composes
QKV_CASES = [
    ((GGMLType.Q4_0,) * 3, (64, 16, 24)),
    ((GGMLType.Q8_0,) * 3, (32, 16, 16)),
    ((GGMLType.Q4_1,) * 3, (32, 8, 8)),
    ((GGMLType.Q5_0,) * 3, (16, 8, 8)),
    ((GGMLType.IQ4_NL,) * 3, (16, 8, 8)),
    ((GGMLType.Q4_0, GGMLType.Q4_0, GGMLType.Q8_0), (32, 16, 16)),
    ((GGMLType.Q8_0,) * 3, (32, 16, 9)),
    ((GGMLType.Q4_K,) * 3, (16, 8, 8)),
    ((GGMLType.F16,) * 3, (16, 8, 8)),
]


def qkv(be, types, widths, n, fused):
    """The three projections of n rows: `qkv`, or three matmuls."""
    rng = random.Random(f"qkv/{types}/{widths}")
    ws = [
        _weight(be, t, N_IN, m, weight_bytes(rng, t, N_IN, m), f"w{i}")
        for i, (t, m) in enumerate(zip(types, widths, strict=True))
    ]
    x = _vec(be, floats(rng, n * N_IN))
    outs = [be.alloc_f32(n * m) for m in widths]
    if fused:
        be.qkv(*outs, *ws, x, n)
    else:
        for out, w in zip(outs, ws, strict=True):
            be.matmul(out, w, x, n)
    return [be.read_f32(out, 0, n * m) for out, m in zip(outs, widths, strict=True)]


def _ids(v):
    return "-".join(t.name for t in v) if isinstance(v[0], GGMLType) else "x".join(map(str, v))


@pytest.mark.parametrize(("types", "widths"), QKV_CASES, ids=_ids)
@pytest.mark.parametrize("n", [1, 5])
@pytest.mark.parametrize("name", ["portable", "numba", "wasm"])
def test_qkv_is_three_matmuls(name, types, widths, n):
    be = require_backend(name)
    if name == "portable" and n > 1 and types[0] != GGMLType.Q4_0:
        pytest.skip("portable runs qkv as the three matmuls: one case of a batch is enough")
    if any(t not in be.runnable_types for t in types):
        pytest.skip(f"{name} does not run {types}")
    assert qkv(be, types, widths, n, fused=True) == qkv(be, types, widths, n, fused=False)


@pytest.mark.parametrize(("types", "widths"), QKV_CASES[:2], ids=_ids)
def test_qkv_fast_backends_near_portable(backend, ref, types, widths):
    for got, want in zip(qkv(backend, types, widths, 3, True), qkv(ref, types, widths, 3, True), strict=True):
        close(got, want, 5e-5, "qkv")
