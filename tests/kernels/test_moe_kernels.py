"""The mixture-of-experts row kernels (gather the rows routed to an expert, add its weighted output back):
portable against their definition, each fast backend bit for bit against portable."""

from __future__ import annotations

import random
import struct

from tests.kernels.data import floats
from tests.kernels.test_kernels import _ivec, _vec

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
