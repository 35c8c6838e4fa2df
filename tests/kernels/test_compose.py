"""The fused ops (`llamay.kernels.compose`): on every backend each gives bit for bit the ops it is made of, for the
weight types a backend runs fused (numba's strips: Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL) and those it composes."""

from __future__ import annotations

import random

import pytest

from llamay.ggml_types import GGMLType
from tests.backends import require_backend
from tests.kernels.data import floats, weight_bytes
from tests.kernels.test_kernels import _vec, _vec_bytes, _weight, close

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


# (n_expert, k, gating, norm_w, w_scale): qwen3moe / Mixtral (softmax, renormalised), qwen2moe (softmax), a sigmoid
# router (deepseek's), gpt-oss's softmax over the k, a scaled one, every expert chosen
ROUTE_CASES = [(8, 2, 1, True, 0.0), (60, 4, 1, False, 0.0), (16, 3, 2, True, 2.5), (32, 4, 3, False, 0.0),
               (8, 8, 1, True, 16.0)]  # fmt: skip


def _route_groups(logits, k, gating, norm_w, w_scale):
    """The experts and weights `arch.moe.route` gives a batch of one row: what decode wrote before moe_route."""
    from llamay.arch import moe

    p = moe.MoEParams(n_expert=len(logits), n_expert_used=k, gating=gating, norm_w=norm_w, w_scale=w_scale)
    groups = moe.route(logits, 1, p)
    return list(groups), [scales[0] for _, scales in groups.values()]


@pytest.mark.parametrize("case", ROUTE_CASES, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("t", [GGMLType.F32, GGMLType.Q8_0], ids=lambda t: t.name)
@pytest.mark.parametrize("name", ["portable", "numba", "wasm"])
def test_moe_route_is_the_router_matmul_and_route(name, t, case):
    """One op for a decode step's router: bit for bit its matmul, then `arch.moe.route` on the host (float32
    weights, experts in id order), on each backend; ties go to the lower id."""
    n_expert, k, gating, norm_w, w_scale = case
    be = require_backend(name)
    rng = random.Random(f"route/{case}/{t.name}")
    router = _weight(be, t, N_IN, n_expert, weight_bytes(rng, t, N_IN, n_expert))
    for trial in range(4):
        x = _vec(be, floats(rng, N_IN) if trial < 3 else [0.0] * N_IN)  # all logits equal: ties everywhere
        logits, ids, weights = be.alloc_f32(n_expert), be.alloc_i32(k), be.alloc_f32(k)
        be.moe_route(ids, weights, logits, router, x, k, gating, norm_w, w_scale)
        want_logits = be.alloc_f32(n_expert)
        be.matmul(want_logits, router, x, 1)
        want_ids, want_w = _route_groups(be.read_f32(want_logits, 0, n_expert), k, gating, norm_w, w_scale)
        got_ids = list(memoryview(be.read_bytes(ids, 0, k)).cast("i"))
        assert be.read_f32(logits, 0, n_expert) == be.read_f32(want_logits, 0, n_expert)
        assert got_ids == want_ids
        assert be.read_bytes(weights, 0, k) == _vec_bytes(want_w)
        if trial == 3:
            assert got_ids == list(range(k))
