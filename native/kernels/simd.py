"""Short SIMD vectors as numba values: their types, loads and stores, fp16 conversions and float arithmetic.

numba vectorises simple loops, but not the block dots of quantised matmuls: their inner loops have a constant
trip count of 16 or 32, LLVM unrolls them fully, and numba keeps the SLP vectoriser off. So the block dots are
written with explicit vectors: each type below is an LLVM vector carried in a numba variable, and each operation
is an `@intrinsic` that emits a few LLVM instructions. Kernels compose them in ordinary numba code:

    acc = fzero()
    for b in range(nb):
        q = nibbles(load_u8x16(w, o + QS))                    # 32 weights, 0..15
        acc = fma_i32(acc, dot4(q, load_i8x32(xq, xo)), s)    # acc += float(Σ₄ q·x) · s (one rounding)

The integer operations on quants (`nibbles`, `dot4`, ...) are in `quantops`. Everything is target-independent
IR but `dot4` (VNNI / AVX2 / generic) and the fp16 conversions (F16C, or integer code without it).

Loads take an array and an offset in its own elements (bytes for the uint8 weight arrays) and need no alignment.
"""

from __future__ import annotations

import math

import llvmlite.binding as llvm
import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F16, F32 = ir.HalfType(), ir.FloatType()
HALF_MAX = 65504.0


def _target_features() -> frozenset[str]:
    """CPU features numba compiles for: the host's, unless NUMBA_CPU_NAME / NUMBA_CPU_FEATURES say otherwise."""
    if numba.config.CPU_NAME is None:
        return frozenset(k for k, on in llvm.get_host_cpu_features().items() if on)
    spec = numba.config.CPU_FEATURES or ""
    return frozenset(f[1:] for f in spec.split(",") if f.startswith("+"))


_FEATURES = _target_features()
_X86 = llvm.get_process_triple().split("-")[0] in ("x86_64", "i386", "i686")
# fp16 <-> float32 in hardware (F16C on x86; every aarch64); else integer code, bit-exact too
HAS_F16 = "f16c" in _FEATURES or not _X86
HAS_VNNI = ("avx512vnni" in _FEATURES and "avx512vl" in _FEATURES) or "avxvnni" in _FEATURES
HAS_AVX2 = "avx2" in _FEATURES
DOT4_IMPL = "vnni" if HAS_VNNI else "avx2" if HAS_AVX2 else "generic"


class Vec(types.Type):
    """A short vector: `kind` is u8 / i8 / i32 / f32 (u8 and i8 differ only in how `dot4` extends them)."""

    def __init__(self, kind: str, n: int) -> None:
        self.kind, self.n = kind, n
        super().__init__(name=f"{kind}x{n}")


_ELEMENT = {"u8": I8, "i8": I8, "i32": I32, "f32": F32}


@register_model(Vec)
class _VecModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type: Vec) -> None:
        super().__init__(dmm, fe_type, ir.VectorType(_ELEMENT[fe_type.kind], fe_type.n))


u8x16 = Vec("u8", 16)
u8x32 = Vec("u8", 32)  # unsigned weight quants, one per byte
i8x32 = Vec("i8", 32)  # signed quants (activations, Q8_0 weights)
i32x8 = Vec("i32", 8)  # integer partial sums (dot4)
f32x8 = Vec("f32", 8)  # float accumulators


# -- IR helpers -----------------------------------------------------------------------------------------------


def _vt(t: ir.Type, n: int) -> ir.VectorType:
    return ir.VectorType(t, n)


def _const(t: ir.Type, n: int, v) -> ir.Constant:
    return ir.Constant(_vt(t, n), [v] * n)


def _lanes(idx: list[int]) -> ir.Constant:
    return ir.Constant(_vt(I32, len(idx)), idx)


def _splat(builder, value, n: int):
    v = builder.insert_element(ir.Constant(_vt(value.type, n), ir.Undefined), value, ir.Constant(I32, 0))
    return builder.shuffle_vector(v, v, _lanes([0] * n))


def _address(context, builder, aryty, ary, offset):
    data = context.make_array(aryty)(context, builder, ary).data
    return builder.gep(data, [offset])


def _load(builder, ptr, t: ir.Type):
    return builder.load(builder.bitcast(ptr, t.as_pointer()), align=1)


def _call(builder, name: str, ret: ir.Type, args: list):
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, [a.type for a in args]), name)
    return builder.call(fn, args)


def _pair_sums(builder, v):
    """Lane i of the result = v[2i] + v[2i + 1]."""
    n = v.type.count
    even = builder.shuffle_vector(v, v, _lanes(list(range(0, n, 2))))
    odd = builder.shuffle_vector(v, v, _lanes(list(range(1, n, 2))))
    return builder.add(even, odd)


def _halves_sum(builder, v, add):
    """Sum of all lanes of v by halving (a fixed order: the result does not depend on the target)."""
    n = v.type.count
    while n > 1:
        lo = builder.shuffle_vector(v, v, _lanes(list(range(n // 2))))
        hi = builder.shuffle_vector(v, v, _lanes(list(range(n // 2, n))))
        v = add(lo, hi)
        n //= 2
    return builder.extract_element(v, ir.Constant(I32, 0))


def _half_to_float(builder, ptr, n: int):
    """The fp16 value(s) at ptr as float32 (n lanes, or a scalar for n = 0), exactly."""
    if HAS_F16:
        return builder.fpext(_load(builder, ptr, _vt(F16, n) if n else F16), _vt(F32, n) if n else F32)
    i32, f32 = (_vt(I32, n), _vt(F32, n)) if n else (I32, F32)

    def c(v):
        return _const(I32, n, v) if n else ir.Constant(I32, v)

    h = builder.zext(_load(builder, ptr, _vt(I16, n) if n else I16), i32)
    sign = builder.shl(builder.and_(h, c(0x8000)), c(16))
    bits = builder.shl(builder.and_(h, c(0x7FFF)), c(13))  # exponent and mantissa in float32 position
    scaled = builder.fmul(builder.bitcast(bits, f32), _const(F32, n, 2.0**112) if n else ir.Constant(F32, 2.0**112))
    special = builder.icmp_unsigned("==", builder.and_(h, c(0x7C00)), c(0x7C00))  # inf, nan
    value = builder.select(special, builder.or_(bits, c(0x7F800000)), builder.bitcast(scaled, i32))
    return builder.bitcast(builder.or_(value, sign), f32)


# -- loads --------------------------------------------------------------------------------------------------


def _loader(vec: Vec, doc: str):
    @intrinsic
    def load(typingctx, ary, offset):
        def codegen(context, builder, sig, args):
            ptr = _address(context, builder, sig.args[0], args[0], args[1])
            return _load(builder, ptr, _vt(_ELEMENT[vec.kind], vec.n))

        return vec(ary, offset), codegen

    load.__doc__ = doc
    return load


load_u8x16 = _loader(u8x16, "16 bytes at ary[offset] (offset in the array's elements).")
load_u8x32 = _loader(u8x32, "32 unsigned bytes at ary[offset].")
load_i8x32 = _loader(i8x32, "32 signed bytes at ary[offset].")
load_f32x8 = _loader(f32x8, "8 float32 at ary[offset] (a float32 array, or bytes of a uint8 array).")


@intrinsic
def load_f16x8(typingctx, ary, offset):
    """8 fp16 at ary[offset], widened to float32 (exact)."""

    def codegen(context, builder, sig, args):
        return _half_to_float(builder, _address(context, builder, sig.args[0], args[0], args[1]), 8)

    return f32x8(ary, offset), codegen


@intrinsic
def load_bf16x8(typingctx, ary, offset):
    """8 bf16 at ary[offset], widened to float32 (exact: the bits move to the top half)."""

    def codegen(context, builder, sig, args):
        h = _load(builder, _address(context, builder, sig.args[0], args[0], args[1]), _vt(I16, 8))
        wide = builder.shl(builder.zext(h, _vt(I32, 8)), _const(I32, 8, 16))
        return builder.bitcast(wide, _vt(F32, 8))

    return f32x8(ary, offset), codegen


@intrinsic
def load_f16(typingctx, ary, offset):
    """The fp16 at ary[offset] as float32 (exact)."""

    def codegen(context, builder, sig, args):
        return _half_to_float(builder, _address(context, builder, sig.args[0], args[0], args[1]), 0)

    return types.float32(ary, offset), codegen


@intrinsic
def load_u16(typingctx, ary, offset):
    """The little-endian uint16 at ary[offset], as int32."""

    def codegen(context, builder, sig, args):
        return builder.zext(_load(builder, _address(context, builder, sig.args[0], args[0], args[1]), I16), I32)

    return types.int32(ary, offset), codegen


@intrinsic
def load_u32(typingctx, ary, offset):
    """The little-endian uint32 at ary[offset], as int64."""

    def codegen(context, builder, sig, args):
        return builder.zext(_load(builder, _address(context, builder, sig.args[0], args[0], args[1]), I32), I64)

    return types.int64(ary, offset), codegen


@intrinsic
def _round_f16_hw(typingctx, x):
    def codegen(context, builder, sig, args):
        return builder.fpext(builder.fptrunc(args[0], F16), F32)

    return types.float32(types.float32), codegen


@njit(cache=True, fastmath=False)
def _round_f16_soft(x):
    """x rounded to fp16 in float64 arithmetic: the 11 significant bits kept (fewer below 2^-14), ties to even."""
    v = np.float64(x)
    if v == 0.0 or not math.isfinite(v):
        return x
    e = math.frexp(v)[1]
    k = max(e - 11, -24)  # the fp16 ulp at this magnitude is 2^k
    r = math.ldexp(np.rint(math.ldexp(v, -k)), k)
    return np.float32(r if abs(r) <= HALF_MAX else math.copysign(math.inf, v))


# x (float32) rounded to the nearest fp16 (ties to even, as ggml's FP32_TO_FP16), back as float32
round_f16 = _round_f16_hw if HAS_F16 else _round_f16_soft


# -- float vectors ---------------------------------------------------------------------------------------------


def _zeros(vec: Vec, doc: str):
    @intrinsic
    def zeros(typingctx):
        def codegen(context, builder, sig, args):
            return ir.Constant(_vt(_ELEMENT[vec.kind], vec.n), [0.0 if vec.kind == "f32" else 0] * vec.n)

        return vec(), codegen

    zeros.__doc__ = doc
    return zeros


fzero = _zeros(f32x8, "An f32x8 of zeros (float accumulators).")
izero = _zeros(i32x8, "An i32x8 of zeros (integer partial sums).")


@intrinsic
def fma_i32(typingctx, acc, v, s):
    """fma(float(v), s, acc) lane-wise, rounded once: ggml's _mm256_fmadd_ps(d, float(sumi), acc)."""

    def codegen(context, builder, sig, args):
        f = builder.sitofp(args[1], _vt(F32, 8))
        return _call(builder, "llvm.fma.v8f32", _vt(F32, 8), [f, _splat(builder, args[2], 8), args[0]])

    return f32x8(f32x8, i32x8, types.float32), codegen


@intrinsic
def fma(typingctx, a, b, c):
    """a · b + c rounded once (float32): what a C compiler makes of `c += a * b` where it contracts."""

    def codegen(context, builder, sig, args):
        return _call(builder, "llvm.fma.f32", F32, list(args))

    return types.float32(types.float32, types.float32, types.float32), codegen


@intrinsic
def fmul_add(typingctx, acc, a, b):
    """acc + a · b, lane-wise float32."""

    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], builder.fmul(args[1], args[2]))

    return f32x8(f32x8, f32x8, f32x8), codegen


@intrinsic
def fsum(typingctx, v):
    """The sum of the 8 lanes of an f32x8 (pairwise by halves)."""

    def codegen(context, builder, sig, args):
        return _halves_sum(builder, args[0], builder.fadd)

    return types.float32(f32x8), codegen


@intrinsic
def load_f32(typingctx, ary, offset):
    """The float32 at ary[offset] (bytes of a uint8 array, no alignment needed)."""

    def codegen(context, builder, sig, args):
        return _load(builder, _address(context, builder, sig.args[0], args[0], args[1]), F32)

    return types.float32(ary, offset), codegen


@intrinsic
def load_bf16(typingctx, ary, offset):
    """The bf16 at ary[offset] as float32 (exact)."""

    def codegen(context, builder, sig, args):
        h = _load(builder, _address(context, builder, sig.args[0], args[0], args[1]), I16)
        return builder.bitcast(builder.shl(builder.zext(h, I32), ir.Constant(I32, 16)), F32)

    return types.float32(ary, offset), codegen


@intrinsic
def store_f32x8(typingctx, ary, offset, v):
    """ary[offset .. offset+8) = v (a float32 array)."""

    def codegen(context, builder, sig, args):
        ptr = _address(context, builder, sig.args[0], args[0], args[1])
        builder.store(args[2], builder.bitcast(ptr, _vt(F32, 8).as_pointer()), align=1)
        return context.get_dummy_value()

    return types.none(ary, offset, f32x8), codegen


@intrinsic
def fsplat(typingctx, s):
    """s (float32) in all 8 lanes."""

    def codegen(context, builder, sig, args):
        return _splat(builder, args[0], 8)

    return f32x8(types.float32), codegen


@intrinsic
def fmul(typingctx, a, b):
    """a · b, lane-wise float32."""

    def codegen(context, builder, sig, args):
        return builder.fmul(args[0], args[1])

    return f32x8(f32x8, f32x8), codegen


load_i32x8 = _loader(i32x8, "8 int32 at ary[offset] (an int32 array).")


# -- lanes across rows: eight weight rows side by side, lane r of a vector belonging to row r ----------------------


@intrinsic
def fma_i32_rows(typingctx, acc, v, s):
    """fma(float(v), s, acc) lane-wise with a scale per lane (per row): `fma_i32` for eight rows at once."""

    def codegen(context, builder, sig, args):
        f = builder.sitofp(args[1], _vt(F32, 8))
        return _call(builder, "llvm.fma.v8f32", _vt(F32, 8), [f, args[2], args[0]])

    return f32x8(f32x8, i32x8, f32x8), codegen


@intrinsic
def fma_rows(typingctx, a, b, c):
    """a · b + c lane-wise, rounded once: the scalar `fma` of eight rows at once."""

    def codegen(context, builder, sig, args):
        return _call(builder, "llvm.fma.v8f32", _vt(F32, 8), list(args))

    return f32x8(f32x8, f32x8, f32x8), codegen


@intrinsic
def fsum_rows(typingctx, a0, a1, a2, a3, a4, a5, a6, a7):
    """Lane r = fsum of (a0[r], .., a7[r]): eight rows' accumulators, lane l of row r in a_l[r], summed in the
    order `fsum` sums one row's lanes ((l, l+4), then (l, l+2), then (0, 1)), so each row gets the same float."""

    def codegen(context, builder, sig, args):
        a = list(args)
        u = [builder.fadd(a[j], a[j + 4]) for j in range(4)]
        w = [builder.fadd(u[j], u[j + 2]) for j in range(2)]
        return builder.fadd(w[0], w[1])

    return f32x8(*([f32x8] * 8)), codegen


@intrinsic
def fadd_rows(typingctx, a, b):
    """a + b, lane-wise float32."""

    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], args[1])

    return f32x8(f32x8, f32x8), codegen


# -- largest values, and the steps of quantising activations ------------------------------------------------------


def _larger(builder, a, b):
    """a where a > b, else b (lane-wise; a NaN in a never wins)."""
    return builder.select(builder.fcmp_ordered(">", a, b), a, b)


@intrinsic
def fmax_lanes(typingctx, a, b):
    """Lane-wise a if a > b else b."""

    def codegen(context, builder, sig, args):
        return _larger(builder, args[0], args[1])

    return f32x8(f32x8, f32x8), codegen


@intrinsic
def fmax_of(typingctx, v):
    """The largest lane of v (by `>`, halving)."""

    def codegen(context, builder, sig, args):
        return _halves_sum(builder, args[0], lambda a, b: _larger(builder, a, b))

    return types.float32(f32x8), codegen


@intrinsic
def fabs_lanes(typingctx, v):
    """|v| lane-wise (the sign bit cleared)."""

    def codegen(context, builder, sig, args):
        bits = builder.bitcast(args[0], _vt(I32, 8))
        return builder.bitcast(builder.and_(bits, _const(I32, 8, 0x7FFFFFFF)), _vt(F32, 8))

    return f32x8(f32x8), codegen


@intrinsic
def quants_of(typingctx, v, s):
    """i32x8: each lane of v times s (float32, rounded), then to the nearest integer, ties to even (`np.rint`)."""

    def codegen(context, builder, sig, args):
        scaled = builder.fmul(args[0], _splat(builder, args[1], 8))
        return builder.fptosi(_call(builder, "llvm.rint.v8f32", _vt(F32, 8), [scaled]), _vt(I32, 8))

    return i32x8(f32x8, types.float32), codegen


@intrinsic
def store_i8x8(typingctx, ary, offset, v):
    """ary[offset .. offset+8) = the 8 int32 lanes of v, truncated to bytes (an int8 array)."""

    def codegen(context, builder, sig, args):
        ptr = _address(context, builder, sig.args[0], args[0], args[1])
        builder.store(builder.trunc(args[2], _vt(I8, 8)), builder.bitcast(ptr, _vt(I8, 8).as_pointer()), align=1)
        return context.get_dummy_value()

    return types.none(ary, offset, i32x8), codegen


@intrinsic
def isum(typingctx, v):
    """The sum of the 8 int32 lanes of v (exact), as an int64."""

    def codegen(context, builder, sig, args):
        return builder.sext(_halves_sum(builder, args[0], builder.add), I64)

    return types.int64(i32x8), codegen


@intrinsic
def prefetch(typingctx, ary, offset):
    """A hint to bring the cache line of ary[offset] into the caches for reading (no fault if out of bounds)."""

    def codegen(context, builder, sig, args):
        ptr = builder.bitcast(_address(context, builder, sig.args[0], args[0], args[1]), I8.as_pointer())
        hint = [ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)]  # read, keep in all levels, data
        _call(builder, "llvm.prefetch.p0i8", ir.VoidType(), [ptr, *hint])
        return context.get_dummy_value()

    return types.none(ary, offset), codegen
