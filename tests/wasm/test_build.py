"""The shipped kernel modules (wasm/llamay_kernels*.wasm), checked natively through wasmtime: C struct sizes equal
the Python block layouts, the only imports are the dynamic-linking ones (so Pyodide can load them as side
modules), they were built from the current sources (and a fresh build reproduces them where the pinned compiler
is installed), both variants run the kernels, and activation rows round bit for bit as `activations.py` says."""

from __future__ import annotations

import importlib.util
import json
import random
import struct
from array import array
from pathlib import Path

import pytest

from llamay.errors import LlamayError, UnsupportedTypeError
from llamay.ggml_types import GGMLType, block_size, type_size
from llamay.kernels import get_backend
from llamay.kernels.activations import VEC_DOT_TYPE, round_row
from tests.kernels.data import floats, weight_bytes

pytestmark = pytest.mark.native_only
wasmtime = pytest.importorskip("wasmtime")

from llamay.wasm import build, runtime  # noqa: E402
from llamay.wasm.backend import RUNNABLE, WasmBackend  # noqa: E402
from llamay.wasm.runtime_wasmtime import WasmtimeRuntime, dylink_mem_info  # noqa: E402

WASM_DIR = Path(build.__file__).resolve().parent
# what Emscripten's dynamic linker (Pyodide's) gives a side module; nothing from libc or emscripten
LINKER_IMPORTS = {"memory", "__memory_base", "__table_base", "__stack_pointer", "__indirect_function_table"}


def _custom_sections(module: bytes) -> dict[str, bytes]:
    out, at = {}, 8
    while at < len(module):
        sid = module[at]
        at, size = _leb(module, at + 1)
        if sid == 0:
            p, name_len = _leb(module, at)
            out[module[p : p + name_len].decode()] = module[p + name_len : at + size]
        at += size
    return out


def _leb(b: bytes, at: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = b[at]
        at += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return at, result


@pytest.fixture(scope="module", params=[runtime.PLAIN, runtime.RELAXED])
def rt(request):
    return WasmtimeRuntime(request.param)


@pytest.fixture(scope="module")
def be(rt):
    return WasmBackend(rt)


@pytest.mark.parametrize("variant", [runtime.PLAIN, runtime.RELAXED])
def test_side_module_imports_only_what_a_dynamic_linker_provides(variant):
    data = (WASM_DIR / runtime.MODULES[variant]).read_bytes()
    config = wasmtime.Config()
    config.wasm_relaxed_simd = True
    module = wasmtime.Module(wasmtime.Engine(config), data)
    imports = {(i.module, i.name) for i in module.imports}
    assert imports <= {("env", name) for name in LINKER_IMPORTS}, imports
    assert ("env", "memory") in imports
    assert data[8] == 0 and data[10:19] == b"\x08dylink.0"  # the dylink.0 custom section comes first
    mem_size, _, table_size, _ = dylink_mem_info(data)
    assert 0 < mem_size < 4096 and table_size == 0  # static data only: tables of constants, no function pointers
    assert set(runtime.SIGNATURES) <= {e.name for e in module.exports}


@pytest.mark.parametrize("variant", [runtime.PLAIN, runtime.RELAXED])
def test_module_was_built_from_these_sources(variant):
    data = (WASM_DIR / runtime.MODULES[variant]).read_bytes()
    info = json.loads(_custom_sections(data)[build.BUILD_SECTION])
    assert info["sources_sha256"] == build.sources_hash(), "wasm/src changed: run python wasm/build.py"
    assert info["compiler"].startswith(f"ziglang {build.ZIG_VERSION} ")
    assert ("-mrelaxed-simd" in info["flags"]) == (variant == runtime.RELAXED)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("ziglang") is None, reason="the pinned compiler (ziglang) is absent")
def test_build_is_reproducible():
    assert build.check() == 0


def test_struct_sizes_equal_the_python_layouts(rt):
    sized = set()
    for t in GGMLType:
        size = rt.fn["llamay_block_sizeof"](int(t))
        if size >= 0:
            assert size == type_size(t), t.name
            sized.add(t)
    assert sized >= RUNNABLE
    assert {GGMLType.Q8_1, GGMLType.Q8_K} <= sized


def test_variant_and_detection(rt):
    assert rt.fn["llamay_variant"]() == (rt.variant == runtime.RELAXED)
    assert WasmtimeRuntime().variant == runtime.RELAXED  # wasmtime validates relaxed SIMD
    assert rt.fn["llamay_abi_version"]() == runtime.ABI_VERSION


@pytest.mark.parametrize("t", sorted(RUNNABLE, key=int), ids=lambda t: t.name)
def test_quick_matmul_each_variant(be, t):
    """Each variant against portable: 9 rows (two 4-row tiles and a partial one), 3 activation rows."""
    ref = get_backend("portable")
    rng = random.Random(t.name)
    n_in, n_out, n = 2 * max(block_size(t), 64), 9, 3
    data = weight_bytes(rng, t, n_in, n_out)
    x = floats(rng, n * n_in)
    outs = []
    for b in (be, ref):
        w = b.bind("w", t, (n_in, n_out), memoryview(data))
        xb, out = b.alloc_f32(len(x)), b.alloc_f32(n * n_out)
        b.write_f32(xb, x)
        b.matmul(out, w, xb, n)
        outs.append(b.read_f32(out, 0, n * n_out))
    scale = max(abs(v) for v in outs[1])
    assert all(abs(a - b) <= 5e-5 * scale for a, b in zip(*outs, strict=True)), (outs[0][:4], outs[1][:4])


def test_q8_0_weights_holding_minus_128(be):
    rng = random.Random(5)
    n_in, n_out = 64, 5
    data = bytearray(weight_bytes(rng, GGMLType.Q8_0, n_in, n_out))
    for b in range(0, len(data), 34):
        data[b + 2 + rng.randrange(32)] = 0x80
    ref = get_backend("portable")
    x = floats(rng, n_in)
    outs = []
    for b in (be, ref):
        w = b.bind("w", GGMLType.Q8_0, (n_in, n_out), memoryview(bytes(data)))
        xb, out = b.alloc_f32(n_in), b.alloc_f32(n_out)
        b.write_f32(xb, x)
        b.matmul(out, w, xb, 1)
        outs.append(b.read_f32(out, 0, n_out))
    assert max(abs(a - b) for a, b in zip(*outs, strict=True)) <= 5e-5 * max(map(abs, outs[1]))


def test_bind_refuses_a_type_it_cannot_run(be):
    with pytest.raises(UnsupportedTypeError, match="IQ2_XXS"):
        be.bind("blk.0.ffn_down.weight", GGMLType.IQ2_XXS, (256, 1), memoryview(bytes(66)))


@pytest.mark.parametrize("t", sorted(RUNNABLE, key=int), ids=lambda t: t.name)
def test_get_rows_is_exact_for_every_type(be, t):
    rng = random.Random(f"rows/{t.name}")
    n_in, n_out, ids = 256, 6, [5, 0, 3, 5]
    data = weight_bytes(rng, t, n_in, n_out)
    ref = get_backend("portable")
    outs = []
    for b in (be, ref):
        idb, out = b.alloc_i32(len(ids)), b.alloc_f32(len(ids) * n_in)
        b.write_i32(idb, ids)
        b.get_rows(out, b.bind("w", t, (n_in, n_out), memoryview(data)), idb, len(ids))
        outs.append(array("f", b.read_f32(out, 0, len(ids) * n_in)).tobytes())
    assert outs[0] == outs[1]


def test_get_rows_refuses_ids_out_of_range(be):
    w = be.bind("token_embd.weight", GGMLType.F32, (4, 3), memoryview(bytes(4 * 12)))
    out, ids = be.alloc_f32(8), be.alloc_i32(2)
    be.write_i32(ids, [1, 3])
    with pytest.raises(LlamayError, match=r"outside 0\.\.2"):
        be.get_rows(out, w, ids, 2)


# ---- activation rounding: bit for bit ---------------------------------------------------------------------


def _activation_row(rng: random.Random, k: int) -> array:
    x = floats(rng, k)
    x[0:32] = array("f", [0.0] * 32)  # a zero block: d = 0 must not divide by zero
    # a block with amax 127 (inverse scale 1): halves are exact ties, rounded to even
    x[32:64] = array("f", [127.0] + [(j - 16) + 0.5 for j in range(31)])
    if k >= 512:  # a Q8_K block whose value of largest magnitude is -127 (iscale = 1): ties go to even
        x[256:512] = array("f", [-127.0] + [(j % 40 - 20) + 0.5 for j in range(255)])
    x[70] = 1.0 + 2.0**-11  # an fp16 tie (to even: 1.0); bf16 ties below
    x[71] = 1.0 + 2.0**-8
    x[72] = 3e-7  # fp16 subnormal
    x[73] = -0.0
    return x


def _round_in_wasm(be, t: GGMLType, x: array) -> tuple[bytes, list[float]]:
    k = len(x)
    xb, out, s = be.alloc_f32(k), be.alloc_f32(k), be.alloc_f32(k // 16)
    scratch = be.rt.alloc(be.fn["llamay_act_bytes"](int(t), 1, k))
    be.write_f32(xb, x)
    assert be.fn["llamay_round_row"](int(t), xb, k, out, s, scratch) >= 0
    return array("f", be.read_f32(out, 0, k)).tobytes(), be.read_f32(s, 0, k // 16)


@pytest.mark.parametrize(
    "t", [GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q4_K, GGMLType.F16, GGMLType.BF16], ids=lambda t: t.name
)
def test_activation_rows_round_bit_for_bit(be, t):
    rng = random.Random(f"act/{t.name}")
    x = _activation_row(rng, 1024)
    got, s = _round_in_wasm(be, t, x)
    want = array("f", bytes(4 * len(x)))
    corr = array("f", bytes(4 * (len(x) // 32)))
    round_row(VEC_DOT_TYPE[t], x, want, corr)
    assert got == want.tobytes(), VEC_DOT_TYPE[t].name
    if VEC_DOT_TYPE[t] == GGMLType.Q8_1:  # s = fp16(d * sum(q)): the portable matmul adds m * corr
        for b in range(len(x) // 32):
            total = sum(want[32 * b : 32 * b + 32])  # d_fp16 * sum(q), exact
            assert abs((s[b] - total) - corr[b]) <= 1e-6 * max(1.0, abs(s[b])), b


def test_q8_1_sum_is_fp16_of_unrounded_d_times_sum(be):
    """s = fp16(d * sum(q)) with d = amax/127 before its own fp16 rounding, as ggml's Q8_1 quantisation."""
    x = array("f", [0.013 * ((j * 37) % 23 - 11) for j in range(32)])
    _, s = _round_in_wasm(be, GGMLType.Q4_1, x)
    want = array("f", bytes(4 * 32))
    round_row(GGMLType.Q8_1, x, want)
    amax = max(map(abs, x))
    d = struct.unpack("<f", struct.pack("<f", amax / 127))[0]
    dh = struct.unpack("<e", struct.pack("<e", d))[0]
    total_q = round(sum(want) / dh)
    s_want = struct.unpack("<e", struct.pack("<e", struct.unpack("<f", struct.pack("<f", total_q * d))[0]))[0]
    assert s[0] == s_want
