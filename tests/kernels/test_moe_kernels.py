"""The mixture-of-experts row kernels (gather the rows routed to an expert, add its weighted output back):
portable against their definition, each fast backend bit for bit against portable; `moe_experts` (one token's
experts in one op) against the per-expert sequence on each backend, and the fast backends near portable."""

from __future__ import annotations

import random
import struct

import pytest

from llamay.ggml_types import GGMLType
from tests.backends import require_backend
from tests.kernels.data import floats, weight_bytes
from tests.kernels.test_kernels import _ivec, _vec, _weight, close

DIM, N_ROWS = 37, 6  # a width that is not a multiple of the vector width: the tails run too


def f32(v: float) -> float:
    return struct.unpack("f", struct.pack("f", v))[0]


def _case(seed: int = 3):
    rng = random.Random(seed)
    x = floats(rng, N_ROWS * DIM)
    rows = [4, 1, 5]  # the batch rows one expert got, in batch order
    scales = [0.7, 0.125, 0.33]
    base = floats(rng, N_ROWS * DIM)
    return x, rows, scales, base


def run(be):
    x, rows, scales, base = _case()
    k = len(rows)
    out = be.alloc_f32(k * DIM)
    be.gather_rows(out, _vec(be, x), _ivec(be, rows), k, DIM)
    gathered = be.read_f32(out, 0, k * DIM)
    acc = _vec(be, base)
    be.add_rows_scaled(acc, out, _ivec(be, rows), _vec(be, scales), k, DIM)
    return gathered, be.read_f32(acc, 0, N_ROWS * DIM)


def test_portable_follows_the_definition(ref):
    x, rows, scales, base = _case()
    gathered, added = run(ref)
    assert gathered == [v for r in rows for v in x[r * DIM : (r + 1) * DIM]]
    want = list(base)
    for j, r in enumerate(rows):
        for c in range(DIM):
            want[r * DIM + c] = f32(want[r * DIM + c] + f32(f32(scales[j]) * x[r * DIM + c]))
    assert added == want
    assert added[0:DIM] == list(base[0:DIM])  # a row no expert got is left alone


def test_fast_backends_equal_portable(backend, ref):
    assert run(backend) == run(ref)


# -- moe_experts: one token's chosen experts in one op --------------------------------------------------------

EXPERT_TYPES = [(GGMLType.Q4_0, 64, 96), (GGMLType.Q8_0, 64, 96), (GGMLType.F16, 32, 24), (GGMLType.Q4_K, 256, 256)]
N_EXPERT, CHOSEN, WEIGHTS = 4, [1, 3], [0.625, 0.3]


def _experts(be, t, n_embd, n_ff, rng):
    """(gate, up, down) as `model._experts` binds them: one Weight per expert, and a token's input row."""
    mats = []
    for n_in, n_out in ((n_embd, n_ff), (n_embd, n_ff), (n_ff, n_embd)):
        mats.append(tuple(_weight(be, t, n_in, n_out, weight_bytes(rng, t, n_in, n_out)) for _ in range(N_EXPERT)))
    return (*mats, floats(rng, n_embd))


def moe_row(be, t, n_embd, n_ff, fused):
    """The experts CHOSEN of one row: `moe_experts`, or the per-expert sequence arch.moe runs for a batch."""
    gate, up, down, x = _experts(be, t, n_embd, n_ff, random.Random(f"moe/{t.name}"))
    xb, out, y = _vec(be, x), _vec(be, floats(random.Random(1), n_embd)), be.alloc_f32(n_embd)
    if fused:
        h = be.alloc_f32(2 * len(CHOSEN) * n_ff)
        be.moe_experts(out, gate, up, down, xb, _ivec(be, CHOSEN), _vec(be, WEIGHTS), len(CHOSEN), h, y)
        return be.read_f32(out, 0, n_embd)
    a, b, g, rows = be.alloc_f32(n_ff), be.alloc_f32(n_ff), be.alloc_f32(n_embd), _ivec(be, [0])
    be.scale(out, 0.0, n_embd)
    for e, w in zip(CHOSEN, WEIGHTS, strict=True):
        be.gather_rows(g, xb, rows, 1, n_embd)
        be.matmul(a, gate[e], g, 1)
        be.matmul(b, up[e], g, 1)
        be.swiglu(a, a, b, n_ff)
        be.matmul(y, down[e], a, 1)
        be.add_rows_scaled(out, y, rows, _vec(be, [w]), 1, n_embd)
    return be.read_f32(out, 0, n_embd)


@pytest.mark.parametrize(("t", "n_embd", "n_ff"), EXPERT_TYPES, ids=lambda v: getattr(v, "name", str(v)))
@pytest.mark.parametrize("name", ["portable", "numba", "wasm"])
def test_moe_experts_is_the_per_expert_sequence(name, t, n_embd, n_ff):
    """On every backend the fused op gives bit for bit what the unfused sequence gives (decode then matches the
    batched path, and the goldens), for the types numba runs fused (Q4_0, Q8_0 strips) and those it composes."""
    be = require_backend(name)
    assert moe_row(be, t, n_embd, n_ff, fused=True) == moe_row(be, t, n_embd, n_ff, fused=False)


@pytest.mark.parametrize(("t", "n_embd", "n_ff"), EXPERT_TYPES[:2], ids=lambda v: getattr(v, "name", str(v)))
def test_moe_experts_fast_backends_near_portable(backend, ref, t, n_embd, n_ff):
    close(moe_row(backend, t, n_embd, n_ff, True), moe_row(ref, t, n_embd, n_ff, True), 5e-5, "moe_experts")
