"""Each fast backend's kernels equal portable's, within float tolerance."""

from __future__ import annotations

import math
import random
from array import array

import pytest

from llamay.ggml_types import GGMLType, block_size
from llamay.kernels import BatchView
from tests.kernels.data import MATMUL_TYPES, floats, weight_bytes

REL = 2e-5  # float32 sums in a different order
N = 3  # batch rows


def close(got: list[float], want: list[float], rel: float = REL, what: str = "") -> None:
    scale = max(1e-6, max(abs(v) for v in want))
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert abs(a - b) <= rel * scale + 1e-7, f"{what}[{i}]: {a} != {b} (scale {scale})"


def _vec(be, values):
    buf = be.alloc_f32(len(values))
    be.write_f32(buf, values)
    return buf


def _ivec(be, values):
    buf = be.alloc_i32(max(1, len(values)))
    be.write_i32(buf, values)
    return buf


def _weight(be, t, n_in, n_out, data, name="w"):
    shape = (n_in,) if n_out == 1 else (n_in, n_out)
    return be.bind(name, t, shape, memoryview(data))


@pytest.mark.parametrize("t", MATMUL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize(("n", "n_out"), [(1, 7), (N, 1), (N, 33), (9, 37), (1, 16), (N, 16), (9, 40)])
def test_matmul(backend, ref, t, n, n_out):
    """n = 1 is decode, a few rows a decode batch, 9 rows over 37 outputs reach the tiled prefill paths; outputs
    in multiples of 8 the weights numba repacks in strips of eight rows."""
    if t not in backend.runnable_types:
        pytest.skip(f"{backend.name} does not run {t.name}")
    rng = random.Random(f"{t.name}/{n}/{n_out}")
    n_in = 2 * max(block_size(t), 64)
    data = weight_bytes(rng, t, n_in, n_out)
    x = floats(rng, n * n_in)
    x[3] = 0.0
    if n > 1:
        x[n_in : n_in + 32] = floats(rng, 32, 0.0)  # an all-zero block: scale 0 must not divide by zero
    outs = []
    for be in (backend, ref):
        w = _weight(be, t, n_in, n_out, data)
        out = be.alloc_f32(n * n_out)
        be.matmul(out, w, _vec(be, x), n)
        outs.append(be.read_f32(out, 0, n * n_out))
    close(outs[0], outs[1], 5e-5, f"{t.name} matmul")


# Where a backend's batched matmul is not bit-identical to its one-token matmul, and why: numba's Q2_K row dot
# sums the mins as one scalar per super-block (ggml's AVX2 order), its tiles as vector lanes.
BATCH_NOT_EXACT = {"numba": {GGMLType.Q2_K}}


@pytest.mark.parametrize("t", MATMUL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("n_out", [37, 40])
def test_matmul_batch_equals_single_tokens(backend, t, n_out):
    """A batch of tokens (the tiled prefill paths) gives each token exactly what a one-token matmul (decode)
    gives: prefill and decode then agree bit for bit, as `llamay verify` checks on whole models."""
    if t not in backend.runnable_types:
        pytest.skip(f"{backend.name} does not run {t.name}")
    rng = random.Random(f"batch/{t.name}/{n_out}")
    n, n_in = 9, 2 * max(block_size(t), 64)
    w = _weight(backend, t, n_in, n_out, weight_bytes(rng, t, n_in, n_out))
    x = floats(rng, n * n_in, 3.0)
    out = backend.alloc_f32(n * n_out)
    backend.matmul(out, w, _vec(backend, x), n)
    batch = backend.read_f32(out, 0, n * n_out)
    single = []
    one = backend.alloc_f32(n_out)
    for i in range(n):
        backend.matmul(one, w, _vec(backend, x[i * n_in : (i + 1) * n_in]), 1)
        single += backend.read_f32(one, 0, n_out)
    if t in BATCH_NOT_EXACT.get(backend.name, ()):
        close(batch, single, 1e-5, f"{t.name} batch")
    else:
        differ = [i for i, (a, b) in enumerate(zip(batch, single, strict=True)) if a != b]
        assert not differ, f"{t.name}: {len(differ)} of {len(batch)} outputs differ, first at {differ[0]}"


@pytest.mark.parametrize("t", [GGMLType.F32, GGMLType.F16, GGMLType.Q8_0, GGMLType.Q4_K, GGMLType.Q6_K, GGMLType.Q4_1])
def test_get_rows(backend, ref, t):
    if t not in backend.runnable_types:
        pytest.skip(f"{backend.name} does not run {t.name}")
    rng = random.Random(t.name)
    n_in, n_out = 256, 10
    data = weight_bytes(rng, t, n_in, n_out)
    ids = [3, 0, 9, 3]
    outs = []
    for be in (backend, ref):
        out = be.alloc_f32(len(ids) * n_in)
        be.get_rows(out, _weight(be, t, n_in, n_out, data), _ivec(be, ids), len(ids))
        outs.append(be.read_f32(out, 0, len(ids) * n_in))
    assert outs[0] == outs[1]  # dequantisation is exact on every backend


def test_norms_and_elementwise(backend, ref):
    rng = random.Random(1)
    dim, n = 96, 3
    x, y = floats(rng, n * dim), floats(rng, n * dim)
    g, b = floats(rng, dim, 0.5), floats(rng, dim, 0.5)
    gbytes, bbytes = g.tobytes(), b.tobytes()
    results = []
    for be in (backend, ref):
        r = {}
        wg, wb = _weight(be, GGMLType.F32, dim, 1, gbytes, "g"), _weight(be, GGMLType.F32, dim, 1, bbytes, "b")
        out = be.alloc_f32(n * dim)
        be.rms_norm(out, _vec(be, x), wg, n, dim, 1e-5)
        r["rms"] = be.read_f32(out, 0, n * dim)
        be.rms_norm(out, _vec(be, x), None, n, dim, 1e-6)
        r["rms_noweight"] = be.read_f32(out, 0, n * dim)
        be.layer_norm(out, _vec(be, x), wg, wb, n, dim, 1e-12)
        r["layer"] = be.read_f32(out, 0, n * dim)
        xb = _vec(be, x)
        be.head_rms_norm(xb, _weight(be, GGMLType.F32, 32, 1, g[:32].tobytes(), "h"), n, dim // 32, 32, 1e-6)
        r["head_rms"] = be.read_f32(xb, 0, n * dim)
        xb, yb = _vec(be, x), _vec(be, y)
        be.add(out, xb, yb, n * dim)
        r["add"] = be.read_f32(out, 0, n * dim)
        be.add_bias(xb, wg, n)
        r["bias"] = be.read_f32(xb, 0, n * dim)
        be.scale(yb, 1.7, n * dim)
        r["scale"] = be.read_f32(yb, 0, n * dim)
        xb = _vec(be, x)
        be.clamp(xb, -0.3, 0.25, n * dim - 1)  # an odd count: the SIMD loop's tail too; the last value untouched
        r["clamp"] = be.read_f32(xb, 0, n * dim)
        xb, yb = _vec(be, x), _vec(be, y)
        be.swiglu(out, xb, yb, n * dim)
        r["swiglu"] = be.read_f32(out, 0, n * dim)
        be.geglu(out, xb, yb, n * dim)
        r["geglu"] = be.read_f32(out, 0, n * dim)
        be.gelu(xb, n * dim)
        r["gelu"] = be.read_f32(xb, 0, n * dim)
        be.mean_pool(out, _vec(be, x), n, dim)
        r["mean_pool"] = be.read_f32(out, 0, dim)
        xb = _vec(be, x)
        be.l2_normalize(xb, dim)
        r["l2"] = be.read_f32(xb, 0, dim)
        results.append(r)
    for k in results[1]:
        close(results[0][k], results[1][k], 1e-5, k)
    lo, hi = array("f", (-0.3, 0.25))  # the bounds as float32, as ggml_clamp takes them
    assert results[1]["clamp"] == [*(min(max(v, lo), hi) for v in x[:-1]), x[-1]]


# YaRN's arguments (ext_factor, mscale, corr_low, corr_high): plain rope, a ramp over pairs 1-4 with ggml's
# magnitude, and a ramp narrower than ggml's 0.001 floor
ROPE_YARN = {"plain": (0.0, 1.0, 0.0, 0.0), "yarn": (1.0, 1.1386294, 1.0, 4.0), "narrow": (0.5, 1.0, 2.0, 2.0)}


@pytest.mark.parametrize("neox", [False, True])
@pytest.mark.parametrize("with_factors", [False, True])
@pytest.mark.parametrize("yarn", list(ROPE_YARN))
def test_rope(backend, ref, neox, with_factors, yarn):
    rng = random.Random(2)
    n, n_heads, head_dim, n_rot = 4, 3, 16, 12
    x = floats(rng, n * n_heads * head_dim)
    pos = [0, 1, 7, 500]
    factors = [1.0 + i * 0.5 for i in range(n_rot // 2)]
    scale = 0.5 if yarn == "plain" else 0.25
    results = []
    for be, args in ((backend, ROPE_YARN[yarn]), (ref, ROPE_YARN[yarn]), (ref, ROPE_YARN["plain"])):
        xb = _vec(be, x)
        ff = _weight(be, GGMLType.F32, n_rot // 2, 1, _vec_bytes(factors), "ff") if with_factors else None
        be.rope(xb, _ivec(be, pos), n, n_heads, head_dim, n_rot, 10000.0, scale, neox, ff, *args)
        results.append(be.read_f32(xb, 0, len(x)))
    close(results[0], results[1], 1e-5, "rope")
    if yarn != "plain":  # the mix and the magnitude change the rotation
        assert max(abs(a - b) for a, b in zip(results[1], results[2], strict=True)) > 0.01


def _vec_bytes(values):
    from array import array

    return array("f", values).tobytes()


# (softcap, max_alibi_bias, sinks): none (today's attention), each alone, all three together
SCORING = [(0.0, 0.0, False), (0.7, 0.0, False), (0.0, 8.0, False), (0.0, 0.0, True), (0.7, 8.0, True)]
SCORING_IDS = ["plain", "softcap", "alibi", "sinks", "all"]


@pytest.mark.parametrize(("causal", "window"), [(True, 0), (True, 3), (False, 0)])
@pytest.mark.parametrize(("softcap", "max_bias", "with_sinks"), SCORING, ids=SCORING_IDS)
def test_kv_store_and_attention(backend, ref, causal, window, softcap, max_bias, with_sinks):
    """Two sequences in one batch, paged caches with scattered pages, GQA; six query heads, so ALiBi reaches both
    of ggml's slope series (heads below the largest power of two, 4, and those above); scores about as large as
    the cap, so soft-capping bends them."""
    rng = random.Random(3)
    n_head, n_head_kv, head_dim, head_dim_v = 6, 2, 8, 6
    page_size, n_pages, n_layer, layer = 4, 8, 2, 1
    n_slots = n_pages * page_size
    kdim, vdim = n_head_kv * head_dim, n_head_kv * head_dim_v
    tables = [[5, 2, 7], [0, 3]]  # seq 0 owns pages 5,2,7; seq 1 owns 0,3
    past = [6, 1]  # positions already cached per sequence
    new = [(0, 6), (0, 7), (0, 8), (1, 1), (1, 2)]  # (seq, position) of each batch token
    n = len(new)

    def slot(s, p):
        return tables[s][p // page_size] * page_size + p % page_size

    cache_k = floats(rng, n_layer * n_slots * kdim)
    cache_v = floats(rng, n_layer * n_slots * vdim)
    k_new, v_new, q = floats(rng, n * kdim), floats(rng, n * vdim), floats(rng, n * n_head * head_dim)
    sinks = floats(rng, n_head)
    seq_len = [past[0] + 3, past[1] + 2]
    results = []
    for be in (backend, ref):
        kc, vc = _vec(be, cache_k), _vec(be, cache_v)
        slots = _ivec(be, [slot(s, p) for s, p in new])
        be.kv_store(kc, layer, n_slots, slots, _vec(be, k_new), n, kdim)
        be.kv_store(vc, layer, n_slots, slots, _vec(be, v_new), n, vdim)
        batch = BatchView(
            n, _ivec(be, [p for _, p in new]), _ivec(be, [s for s, _ in new]), slots,
            _ivec(be, tables[0] + tables[1]), _ivec(be, [0, len(tables[0])]), _ivec(be, seq_len), page_size,
        )  # fmt: skip
        sk = _weight(be, GGMLType.F32, n_head, 1, _vec_bytes(sinks), "attn_sinks") if with_sinks else None
        out = be.alloc_f32(n * n_head * head_dim_v)
        be.attention(out, _vec(be, q), kc, vc, layer, n_slots, batch, n_head, n_head_kv, head_dim, head_dim_v,
                     1 / math.sqrt(head_dim), causal, window, softcap, max_bias, sk)  # fmt: skip
        results.append((be.read_f32(kc, 0, len(cache_k)), be.read_f32(out, 0, n * n_head * head_dim_v)))
    assert results[0][0] == results[1][0]  # stores are exact copies
    close(results[0][1], results[1][1], 1e-5, "attention")


def test_alibi_slopes_are_ggmls():
    """ggml's slopes for 8 heads and max_bias 8 are 2^-1 .. 2^-8; for 6 heads (n2 = 4): 2^-2 .. 2^-8 for heads 0-3,
    then m1 = 2^-1 to the powers 1 and 3 (the published ALiBi slopes)."""
    from llamay.kernels.portable import alibi_slope

    assert [alibi_slope(h, 8, 8.0) for h in range(8)] == [2.0**-k for k in range(1, 9)]
    assert [alibi_slope(h, 6, 8.0) for h in range(6)] == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]


def test_swiglu_oai(backend, ref):
    """Gates and ups spread past the limit on both sides, so both clamps cut."""
    rng = random.Random(6)
    gate, up = floats(rng, 41, 6.0), floats(rng, 41, 6.0)
    results = []
    for be in (backend, ref):
        out = be.alloc_f32(len(gate))
        be.swiglu_oai(out, _vec(be, gate), _vec(be, up), len(gate), 1.702, 7.0)
        results.append(be.read_f32(out, 0, len(gate)))
    close(results[0], results[1], 1e-5, "swiglu_oai")


def test_softcap(backend, ref):
    rng = random.Random(5)
    x = floats(rng, 37, 20.0)
    results = []
    for be in (backend, ref):
        xb = _vec(be, x)
        be.softcap(xb, 30.0, len(x))
        results.append(be.read_f32(xb, 0, len(x)))
    close(results[0], results[1], 1e-6, "softcap")
    assert all(abs(v) < 30.0 for v in results[1])


def test_argmax_and_top_k(backend, ref):
    rng = random.Random(4)
    x = floats(rng, 1000)
    x[500] = x[900] = 9.0  # a tie: the lower index wins, as in llama.cpp
    for be in (backend, ref):
        buf = _vec(be, x)
        assert be.argmax(buf, 100, 900) == 400
        top = be.top_k(buf, 0, 1000, 5)
        assert [i for i, _ in top[:2]] == [500, 900]
        assert [round(v, 5) for _, v in top] == [round(v, 5) for v in sorted(x, reverse=True)[:5]]


@pytest.mark.parametrize("n", [1, 7, 8, 9, 31, 1000])
def test_argmax_is_the_first_largest(backend, n):
    """Many ties, lengths around the vector width, an offset: the first index of the largest value."""
    rng = random.Random(n)
    x = [float(rng.randint(-3, 3)) for _ in range(n + 5)]
    want = max(range(n), key=lambda j: (x[5 + j], -j))
    assert backend.argmax(_vec(backend, x), 5, n) == want


@pytest.mark.parametrize("k", [1, 5, 40, 300])
def test_top_k_among_many_ties(backend, ref, k):
    """Few distinct values (ties everywhere) and -inf: the k largest by value, ties by lower index, on every
    backend (numba: a heap pass for small k, a partition for large)."""
    rng = random.Random(k)
    x = [rng.randint(-20, 20) / 4 for _ in range(5000)]
    x[17] = x[4000] = -math.inf
    want = sorted(range(len(x)), key=lambda j: (-x[j], j))[:k]
    for be in (backend, ref):
        top = be.top_k(_vec(be, x), 0, len(x), k)
        assert [i for i, _ in top] == want
        assert [v for _, v in top] == [x[i] for i in want]


def test_gelu_is_ggmls_fp16_table_exactly(backend, ref):
    """ggml's GELU: 0 at or below -10, x at or above 10, else a table of fp16 outputs at the fp16-rounded input
    (ties to even, subnormals included) — every backend reads the same table, so results are identical."""
    rng = random.Random(5)
    edge = [-10.0, 10.0, -9.9999, 9.9999, 0.0, -0.0, 1e-6, -1e-7, 6.0e-5, -6.1e-5, 2.98e-8, 1.0009765625, 3.00048828125]
    x = edge + [rng.gauss(0.0, 4.0) for _ in range(997)]
    up = [rng.gauss(0.0, 1.0) for _ in x]
    outs = []
    for be in (backend, ref):
        xb, ub, out = _vec(be, x), _vec(be, up), be.alloc_f32(len(x))
        be.geglu(out, xb, ub, len(x))
        be.gelu(xb, len(x))
        outs.append((be.read_f32(xb, 0, len(x)), be.read_f32(out, 0, len(x))))
    assert outs[0] == outs[1]
    from llamay.kernels.gelu import gelu

    assert outs[1][0][:4] == [0.0, 10.0, gelu(-9.9999), gelu(9.9999)]
