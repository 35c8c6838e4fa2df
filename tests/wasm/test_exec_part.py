"""`llamay_exec_part(cmd, part, nparts)`, the kernel threads' share of a command (wasm/src/exec.c): run over every
part, the output is `llamay_exec`'s bit for bit, for every weight type the module runs, at decode (n = 1) and
prefill widths; attention split by (token, KV head) or by query head likewise; the element-wise ops split by
elements likewise; any other command runs in part 0 only."""

from __future__ import annotations

import random
from array import array

import pytest

from llamay.ggml_types import GGMLType, block_size
from llamay.quants import QUANTIZERS, quantize
from llamay.wasm.runtime import OPS, RUNNABLE
from tests.backends import require_backend

MATMUL, RMS_NORM = OPS["llamay_matmul"], OPS["llamay_rms_norm"]
TYPES = sorted((t for t in RUNNABLE if t in QUANTIZERS or t == GGMLType.F32), key=lambda t: t.name)


@pytest.fixture(scope="module")
def wasm():
    return require_backend("wasm")


def _matrix(b, t: GGMLType, k: int, m: int, rng: random.Random):
    values = array("f", (rng.uniform(-1, 1) for _ in range(k * m)))
    data = memoryview(bytearray(quantize(t, values) if t != GGMLType.F32 else values.tobytes()))
    return b.bind(f"w.{t.name}", t, (k, m), data)


def _run(b, w, x: int, n: int, nparts: int | None) -> bytes:
    """The matmul's output through exec (nparts None) or through every part of exec_part, as raw bytes."""
    h = w.handle
    out = b.alloc_f32(n * w.n_out)
    share = (b.fn["llamay_act_bytes"](h.type, n, w.n_in) + 15) // 16 * 16
    scratch = b.rt.alloc(share * (nparts or 1))
    cmd = b._command((MATMUL, h.type, out, h.addr, x, n, w.n_in, w.n_out, scratch))
    if nparts is None:
        assert b.fn["llamay_exec"](cmd) == 0
    else:
        for part in reversed(range(nparts)):  # any order: no part reads what another writes
            assert b.fn["llamay_exec_part"](cmd, part, nparts) == 0
    return array("f", b.read_f32(out, 0, n * w.n_out)).tobytes()


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("n", [1, 5])
def test_parts_of_a_matmul_equal_the_whole(wasm, t: GGMLType, n: int) -> None:
    rng = random.Random(f"{t.name}-{n}")
    k, m = 2 * max(256, block_size(t)), 37  # 37 rows: parts of unequal size, a part of 0 rows at nparts 64
    w = _matrix(wasm, t, k, m, rng)
    x = wasm.alloc_f32(n * k)
    wasm.write_f32(x, [rng.uniform(-2, 2) for _ in range(n * k)])
    whole = _run(wasm, w, x, n, None)
    assert any(whole), "the reference output is all zeros: the comparison would prove nothing"
    for nparts in (1, 2, 3, 4, 64):
        assert _run(wasm, w, x, n, nparts) == whole, f"{nparts} parts"


def test_other_commands_run_in_part_zero_only(wasm) -> None:
    dim = 64
    x, out = wasm.alloc_f32(dim), wasm.alloc_f32(dim)
    wasm.write_f32(x, [0.5 + i for i in range(dim)])
    cmd = wasm._command((RMS_NORM, out, x, 0, 1, dim, 1e-5))
    assert wasm.fn["llamay_exec_part"](cmd, 1, 2) == 0
    assert wasm.read_f32(out, 0, dim) == [0.0] * dim  # part 1 of 2 leaves a norm alone
    assert wasm.fn["llamay_exec_part"](cmd, 0, 2) == 0
    got = wasm.read_f32(out, 0, dim)
    wasm.fn["llamay_exec"](cmd)
    assert got == wasm.read_f32(out, 0, dim) and any(got)


def test_a_part_writes_its_own_rows_only(wasm) -> None:
    """Part p of n takes rows m * p / n .. m * (p + 1) / n, each bound rounded down to a multiple of 16 (the last
    part's to m): part 1 of 3 of 100 rows is 32 .. 64."""
    rng = random.Random("rows")
    n, k, m = 2, 256, 100
    w = _matrix(wasm, GGMLType.Q4_0, k, m, rng)
    x = wasm.alloc_f32(n * k)
    wasm.write_f32(x, [rng.uniform(-2, 2) for _ in range(n * k)])
    whole = array("f", _run(wasm, w, x, n, None))
    out = wasm.alloc_f32(n * m)
    share = (wasm.fn["llamay_act_bytes"](int(GGMLType.Q4_0), n, k) + 15) // 16 * 16
    cmd = wasm._command((MATMUL, int(GGMLType.Q4_0), out, w.handle.addr, x, n, k, m, wasm.rt.alloc(3 * share)))
    assert wasm.fn["llamay_exec_part"](cmd, 1, 3) == 0
    got = wasm.read_f32(out, 0, n * m)
    for i in range(n):
        for r in range(m):
            want = whole[i * m + r] if 32 <= r < 64 else 0.0
            assert got[i * m + r] == want, (i, r)


ATTENTION = OPS["llamay_attention"]


def _attention_command(b, rng: random.Random, n: int, n_head: int, n_head_kv: int) -> tuple[int, int, int]:
    """An attention command over a random KV cache (2 layers, one sequence of 40 positions in pages of 16, the
    batch its last n): (command, out, out floats)."""
    hd, n_slots, page = 16, 64, 16
    kdim = n_head_kv * hd

    def floats(count: int) -> int:
        buf = b.alloc_f32(count)
        b.write_f32(buf, [rng.uniform(-1, 1) for _ in range(count)])
        return buf

    def ints(values: list[int]) -> int:
        buf = b.alloc_i32(len(values))
        b.write_i32(buf, values)
        return buf

    kc, vc, q = floats(2 * n_slots * kdim), floats(2 * n_slots * kdim), floats(n * n_head * hd)
    out = b.alloc_f32(n * n_head * hd)
    pos, seq = ints(list(range(40 - n, 40))), ints([0] * n)
    pages, page_off, seq_len = ints([3, 0, 2, 1]), ints([0]), ints([40])
    args = (out, q, kc, vc, 1, n_slots, n, pos, seq, pages, page_off, seq_len, page, n_head, n_head_kv, hd, hd,
            0.25, 1, 0, 0.0, 0.0, 0)  # fmt: skip
    return b._command((ATTENTION, *args)), out, n * n_head * hd


@pytest.mark.parametrize(("n", "n_head", "n_head_kv"), [(1, 9, 3), (3, 6, 2), (4, 4, 4), (8, 8, 2), (1, 18, 1)])
def test_parts_of_attention_equal_the_whole(wasm, n: int, n_head: int, n_head_kv: int) -> None:
    """Attention is split by (token, KV head) units when there are 8 a part or more (8 tokens of 2 KV heads on 2
    parts), else by query head (a decode step; 18 heads of one KV head: more than the kernel's group of 8): 1 to
    13 parts (more parts than units: some get none)."""
    cmd, out, count = _attention_command(wasm, random.Random(f"attn-{n}-{n_head}"), n, n_head, n_head_kv)
    assert wasm.fn["llamay_exec"](cmd) == 0
    whole = wasm.read_f32(out, 0, count)
    assert any(whole)
    for nparts in (1, 2, 3, 5, 13):
        wasm.write_f32(out, [0.0] * count)
        for part in reversed(range(nparts)):
            assert wasm.fn["llamay_exec_part"](cmd, part, nparts) == 0
        assert wasm.read_f32(out, 0, count) == whole, f"{nparts} parts"


ELEMENTWISE = {  # op: its arguments after the buffers (out, then inputs) and the count
    "add": (3, ()),
    "swiglu": (3, ()),
    "swiglu_oai": (3, (1.702, 7.0)),
    "geglu": (3, ("table",)),
    "gelu": (1, ("table",)),
    "scale": (1, (0.37,)),
    "softcap": (1, (3.0,)),
    "clamp": (1, (-1.5, 2.5)),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_parts_of_an_element_wise_command_equal_the_whole(wasm, name: str) -> None:
    """Split by elements (bounds at multiples of 16, 1003 elements: a tail past the last 4), in place or not."""
    nbuf, extra = ELEMENTWISE[name]
    rng = random.Random(name)
    count = 1003
    inputs = [[rng.uniform(-4, 4) for _ in range(count)] for _ in range(nbuf)]
    bufs = [wasm.alloc_f32(count) for _ in range(nbuf)]
    table = wasm._gelu_table()
    args = [table if a == "table" else a for a in extra]
    op = OPS[f"llamay_{name}"]
    cmd = wasm._command((op, *bufs, count, *args) if name in ("add", "swiglu", "swiglu_oai", "geglu")
                        else (op, bufs[0], *args, count) if name in ("scale", "softcap", "clamp")
                        else (op, bufs[0], count, *args))  # fmt: skip

    def run(nparts: int | None) -> list[float]:
        for b, values in zip(bufs, inputs, strict=True):
            wasm.write_f32(b, values)
        if nparts is None:
            assert wasm.fn["llamay_exec"](cmd) == 0
        else:
            for part in reversed(range(nparts)):
                assert wasm.fn["llamay_exec_part"](cmd, part, nparts) == 0
        return wasm.read_f32(bufs[0], 0, count)

    whole = run(None)
    assert whole != inputs[0], "the command changed nothing: the comparison would prove nothing"
    for nparts in (1, 2, 3, 5, 64):
        assert run(nparts) == whole, f"{nparts} parts"
