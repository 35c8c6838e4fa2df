"""Short SIMD vectors as numba values, and the few operations the quantised dot products need.

numba vectorises simple loops, but not the block dots of quantised matmuls: their inner loops have a constant
trip count of 16 or 32, LLVM unrolls them fully, and numba keeps the SLP vectoriser off. So the block dots are
written with explicit vectors: each type below is an LLVM vector carried in a numba variable, and each operation
is an `@intrinsic` that emits a few LLVM instructions. Kernels compose them in ordinary numba code:

    acc = fzero()
    for b in range(nb):
        q = nibbles(load_u8x16(w, o + QS))                    # 32 weights, 0..15
        acc = fma_i32(acc, dot4(q, load_i8x32(xq, xo)), s)    # acc += float(Σ₄ q·x) · s

`dot4` is the W4A8 step: lane l of its i32x8 result is the sum of the products of bytes 4l..4l+3. It compiles to
one VNNI `vpdpbusd` where the CPU has it, to `vpmaddubsw` + `vpmaddwd` on AVX2, and to portable vector IR (which
LLVM lowers for any target) elsewhere. Everything else is target-independent IR.

Loads take an array and an offset in its own elements (bytes for the uint8 weight arrays) and need no alignment.
"""

from __future__ import annotations

import llvmlite.binding as llvm
import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F16, F32 = ir.HalfType(), ir.FloatType()


def _target_features() -> frozenset[str]:
    """CPU features numba compiles for: the host's, unless NUMBA_CPU_NAME / NUMBA_CPU_FEATURES say otherwise."""
    if numba.config.CPU_NAME is None:
        return frozenset(k for k, on in llvm.get_host_cpu_features().items() if on)
    spec = numba.config.CPU_FEATURES or ""
    return frozenset(f[1:] for f in spec.split(",") if f.startswith("+"))


_FEATURES = _target_features()
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
        h = _load(builder, _address(context, builder, sig.args[0], args[0], args[1]), _vt(F16, 8))
        return builder.fpext(h, _vt(F32, 8))

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
        h = _load(builder, _address(context, builder, sig.args[0], args[0], args[1]), F16)
        return builder.fpext(h, F32)

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
def round_f16(typingctx, x):
    """x (float32) rounded to the nearest fp16 (ties to even, as ggml's FP32_TO_FP16), back as float32."""

    def codegen(context, builder, sig, args):
        return builder.fpext(builder.fptrunc(args[0], F16), F32)

    return types.float32(types.float32), codegen


# -- unpacking weight quants (u8x32 / u8x16) ---------------------------------------------------------------


@intrinsic
def nibbles(typingctx, v):
    """32 quants from 16 bytes: the low nibbles (elements 0..15), then the high nibbles (16..31)."""

    def codegen(context, builder, sig, args):
        lo = builder.and_(args[0], _const(I8, 16, 0xF))
        hi = builder.lshr(args[0], _const(I8, 16, 4))
        return builder.shuffle_vector(lo, hi, _lanes(list(range(32))))

    return u8x32(u8x16), codegen


@intrinsic
def bits_of(typingctx, v, shift, mask):
    """(v >> shift) & mask, bytewise."""

    def codegen(context, builder, sig, args):
        s = _splat(builder, builder.trunc(args[1], I8), 32)
        m = _splat(builder, builder.trunc(args[2], I8), 32)
        return builder.and_(builder.lshr(args[0], s), m)

    return u8x32(u8x32, types.int64, types.int64), codegen


@intrinsic
def or_shifted(typingctx, a, b, shift):
    """a | (b << shift), bytewise."""

    def codegen(context, builder, sig, args):
        s = _splat(builder, builder.trunc(args[2], I8), 32)
        return builder.or_(args[0], builder.shl(args[1], s))

    return u8x32(u8x32, u8x32, types.int64), codegen


@intrinsic
def word_bits(typingctx, word):
    """The 32 bits of a uint32 (little-endian bit j → byte j), each 0 or 1."""

    def codegen(context, builder, sig, args):
        w = _splat(builder, builder.trunc(args[0], I32), 32)
        bits = builder.and_(builder.lshr(w, _lanes(list(range(32)))), _const(I32, 32, 1))
        return builder.trunc(bits, _vt(I8, 32))

    return u8x32(types.int64), codegen


# IQ4_NL / IQ4_XS levels (ggml's kvalues_iq4nl; llamay.quants.iq_tables.KVALUES_IQ4NL)
IQ4_LEVELS = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)


@intrinsic
def iq4_levels(typingctx, idx):
    """The IQ4 level (int8) of each 4-bit index: one byte shuffle on x86, a table lookup per lane elsewhere."""

    def codegen(context, builder, sig, args):
        if HAS_AVX2:  # pshufb shuffles within each 128-bit half: the table is repeated in both
            table = ir.Constant(_vt(I8, 32), [v & 0xFF for v in IQ4_LEVELS] * 2)
            return _call(builder, "llvm.x86.avx2.pshuf.b", _vt(I8, 32), [table, args[0]])
        table = ir.Constant(_vt(I8, 16), [v & 0xFF for v in IQ4_LEVELS])
        out = ir.Constant(_vt(I8, 32), ir.Undefined)
        for lane in range(32):
            i = builder.extract_element(args[0], ir.Constant(I32, lane))
            out = builder.insert_element(out, builder.extract_element(table, i), ir.Constant(I32, lane))
        return out

    return i8x32(u8x32), codegen


# -- integer dot products ------------------------------------------------------------------------------------


def _dot4_ir(builder, a, b):
    """<8 x i32>: lane l = Σ_{k<4} zext(a[4l+k]) · sext(b[4l+k]), a unsigned bytes ≤ 128, b signed bytes."""
    if DOT4_IMPL == "vnni":
        zero = ir.Constant(_vt(I32, 8), [0] * 8)
        args = [zero, builder.bitcast(a, _vt(I32, 8)), builder.bitcast(b, _vt(I32, 8))]
        return _call(builder, "llvm.x86.avx512.vpdpbusd.256", _vt(I32, 8), args)
    if DOT4_IMPL == "avx2":  # no saturation: |a·b + a'·b'| ≤ 2 · 128 · 127 < 32768
        pairs = _call(builder, "llvm.x86.avx2.pmadd.ub.sw", _vt(I16, 16), [a, b])
        return _call(builder, "llvm.x86.avx2.pmadd.wd", _vt(I32, 8), [pairs, _const(I16, 16, 1)])
    prod = builder.mul(builder.zext(a, _vt(I32, 32)), builder.sext(b, _vt(I32, 32)))
    return _pair_sums(builder, _pair_sums(builder, prod))


@intrinsic
def dot4(typingctx, a, b):
    """i32x8: lane l = Σ_{k<4} a[4l+k]·b[4l+k], a unsigned (u8x32, values ≤ 128), b signed (i8x32)."""
    if not (isinstance(a, Vec) and a.kind == "u8" and isinstance(b, Vec) and b.kind == "i8"):
        return None

    def codegen(context, builder, sig, args):
        return _dot4_ir(builder, args[0], args[1])

    return i32x8(a, b), codegen


@intrinsic
def dot4_signed(typingctx, a, b):
    """As dot4 with both signed (a may be -128; b must not be, as no quantised activation is): |a| · ±b."""
    if not (isinstance(a, Vec) and a.kind == "i8" and isinstance(b, Vec) and b.kind == "i8"):
        return None

    def codegen(context, builder, sig, args):
        a_, b_ = args
        neg = builder.icmp_signed("<", a_, _const(I8, 32, 0))
        magnitude = builder.select(neg, builder.sub(_const(I8, 32, 0), a_), a_)
        signed_b = builder.select(neg, builder.sub(_const(I8, 32, 0), b_), b_)
        return _dot4_ir(builder, magnitude, signed_b)

    return i32x8(a, b), codegen


@intrinsic
def izero(typingctx):
    def codegen(context, builder, sig, args):
        return ir.Constant(_vt(I32, 8), [0] * 8)

    return i32x8(), codegen


@intrinsic
def imul_add(typingctx, acc, v, s):
    """acc + v · s (s a scalar int), lane-wise int32."""

    def codegen(context, builder, sig, args):
        return builder.add(args[0], builder.mul(args[1], _splat(builder, builder.trunc(args[2], I32), 8)))

    return i32x8(i32x8, i32x8, types.int64), codegen


@intrinsic
def imul_add_halves(typingctx, acc, v, s0, s1):
    """acc + v · (s0 on lanes 0..3, s1 on lanes 4..7): per-16-element scales over a dot4 of 32 bytes."""

    def codegen(context, builder, sig, args):
        a = _splat(builder, builder.trunc(args[2], I32), 8)
        b = _splat(builder, builder.trunc(args[3], I32), 8)
        scale = builder.shuffle_vector(a, b, _lanes([0, 1, 2, 3, 8, 9, 10, 11]))
        return builder.add(args[0], builder.mul(args[1], scale))

    return i32x8(i32x8, i32x8, types.int64, types.int64), codegen


@intrinsic
def isum(typingctx, v):
    """The sum of the 8 lanes of an i32x8, as int64."""

    def codegen(context, builder, sig, args):
        return builder.sext(_halves_sum(builder, args[0], builder.add), I64)

    return types.int64(i32x8), codegen


# -- float vectors ---------------------------------------------------------------------------------------------


@intrinsic
def fzero(typingctx):
    def codegen(context, builder, sig, args):
        return ir.Constant(_vt(F32, 8), [0.0] * 8)

    return f32x8(), codegen


@intrinsic
def fma_i32(typingctx, acc, v, s):
    """acc + float(v) · s, lane-wise (a multiply then an add, each rounded: no contraction)."""

    def codegen(context, builder, sig, args):
        f = builder.sitofp(args[1], _vt(F32, 8))
        return builder.fadd(args[0], builder.fmul(f, _splat(builder, args[2], 8)))

    return f32x8(f32x8, i32x8, types.float32), codegen


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
