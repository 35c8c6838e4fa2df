"""Integer vector operations on quants: unpacking weight blocks into one quant per byte, the W4A8 dot products,
and the int32 lane arithmetic of the super-block scales. Values are the vectors of `simd`.

`dot4` is the heart of every quantised matmul: lane l of its i32x8 result is the sum of the products of bytes
4l..4l+3 of an unsigned and a signed vector. It compiles to one VNNI `vpdpbusd` where the CPU has it, to
`vpmaddubsw` + `vpmaddwd` on AVX2, and to portable vector IR elsewhere; the lanes are the same on every path.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from llamay.quants.iq_tables import KVALUES_MXFP4

from .simd import (
    DOT4_IMPL,
    HAS_AVX2,
    I8,
    I16,
    I32,
    Vec,
    _address,
    _call,
    _const,
    _lanes,
    _load,
    _pair_sums,
    _splat,
    _vt,
    i8x32,
    i32x8,
    u8x16,
    u8x32,
)

# -- unpacking weight quants ---------------------------------------------------------------------------------


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
def offset_by(typingctx, q, k):
    """q - k as signed bytes (the signed quants of the offset types)."""

    def codegen(context, builder, sig, args):
        return builder.sub(args[0], _splat(builder, builder.trunc(args[1], I8), 32))

    return i8x32(u8x32, types.int64), codegen


@intrinsic
def word_bits(typingctx, ary, offset):
    """The 32 bits of the little-endian uint32 at ary[offset] (bit j → byte j), each 0 or 1: each byte of the
    word repeated 8 times, tested against the 8 bit masks."""

    def codegen(context, builder, sig, args):
        word = _load(builder, _address(context, builder, sig.args[0], args[0], args[1]), _vt(I8, 4))
        spread = builder.shuffle_vector(word, word, _lanes([j // 8 for j in range(32)]))
        masks = ir.Constant(_vt(I8, 32), [1 << (j % 8) for j in range(32)])
        hit = builder.icmp_unsigned("!=", builder.and_(spread, masks), _const(I8, 32, 0))
        return builder.select(hit, _const(I8, 32, 1), _const(I8, 32, 0))

    return u8x32(ary, offset), codegen


# IQ4_NL / IQ4_XS levels (ggml's kvalues_iq4nl; llamay.quants.iq_tables.KVALUES_IQ4NL)


IQ4_LEVELS = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)


def _lookup16(builder, levels, idx):
    """Byte j = levels[idx[j]] (idx 0..15): one byte shuffle on x86, a table lookup per lane elsewhere."""
    if HAS_AVX2:  # pshufb shuffles within each 128-bit half: the table is repeated in both
        table = ir.Constant(_vt(I8, 32), [v & 0xFF for v in levels] * 2)
        return _call(builder, "llvm.x86.avx2.pshuf.b", _vt(I8, 32), [table, idx])
    table = ir.Constant(_vt(I8, 16), [v & 0xFF for v in levels])
    out = ir.Constant(_vt(I8, 32), ir.Undefined)
    for lane in range(32):
        i = builder.extract_element(idx, ir.Constant(I32, lane))
        out = builder.insert_element(out, builder.extract_element(table, i), ir.Constant(I32, lane))
    return out


@intrinsic
def iq4_levels(typingctx, idx):
    """The IQ4 level (int8) of each 4-bit index."""

    def codegen(context, builder, sig, args):
        return _lookup16(builder, IQ4_LEVELS, args[0])

    return i8x32(u8x32), codegen


# MXFP4's E2M1 levels, doubled (ggml's kvalues_mxfp4; llamay.quants.iq_tables.KVALUES_MXFP4)
MXFP4_LEVELS = KVALUES_MXFP4


@intrinsic
def mxfp4_levels(typingctx, idx):
    """The MXFP4 level (int8) of each 4-bit index."""

    def codegen(context, builder, sig, args):
        return _lookup16(builder, MXFP4_LEVELS, args[0])

    return i8x32(u8x32), codegen


IQ4_BIAS = 128  # IQ4 levels + 128 are unsigned bytes (1..241)


@intrinsic
def iq4_levels_biased(typingctx, idx):
    """The IQ4 level + IQ4_BIAS (uint8) of each 4-bit index: unsigned quants for `dot4_add`."""

    def codegen(context, builder, sig, args):
        return _lookup16(builder, [v + IQ4_BIAS for v in IQ4_LEVELS], args[0])

    return u8x32(u8x32), codegen


@intrinsic
def load_q32(typingctx, ary, offset):
    """32 quants from a uint8 array (u8x32) or an int8 array (i8x32): the array's dtype picks the kind."""
    if not isinstance(ary, types.Array) or ary.dtype not in (types.uint8, types.int8):
        return None
    vec = u8x32 if ary.dtype == types.uint8 else i8x32

    def codegen(context, builder, sig, args):
        return _load(builder, _address(context, builder, sig.args[0], args[0], args[1]), _vt(I8, 32))

    return vec(ary, offset), codegen


@intrinsic
def store_vec(typingctx, ary, offset, v):
    """ary[offset ...] = the lanes of v (any vector; the array's element type must match its lanes)."""
    if not isinstance(v, Vec):
        return None

    def codegen(context, builder, sig, args):
        ptr = _address(context, builder, sig.args[0], args[0], args[1])
        builder.store(args[2], builder.bitcast(ptr, args[2].type.as_pointer()), align=1)
        return context.get_dummy_value()

    return types.none(ary, offset, v), codegen


# -- eight rows side by side: quads of quants interleaved -----------------------------------------------------


@intrinsic
def interleave_rows8(typingctx, src, so, stride, dst, do):
    """8 rows of 32 quants (src[so + r·stride ..], r < 8) → dst[do + 32·l + 4·r + k] = quant 4l + k of row r:
    vector l of the result holds lane l of `dot4` for all eight rows (an 8 × 8 transpose of 32-bit quads)."""

    def codegen(context, builder, sig, args):
        src_ty, dst_ty = sig.args[0], sig.args[3]
        so, stride, do = (context.cast(builder, args[i], sig.args[i], types.intp) for i in (1, 2, 4))
        rows = []
        for r in range(8):
            off = builder.add(so, builder.mul(stride, ir.Constant(stride.type, r)))
            rows.append(_load(builder, _address(context, builder, src_ty, args[0], off), _vt(I32, 8)))
        zip_lo, zip_hi = _lanes([0, 8, 1, 9, 2, 10, 3, 11]), _lanes([4, 12, 5, 13, 6, 14, 7, 15])
        for _ in range(3):  # three perfect shuffles of rows (i, i + 4) transpose an 8 × 8 matrix
            rows = [builder.shuffle_vector(rows[i], rows[i + 4], z) for i in range(4) for z in (zip_lo, zip_hi)]
        for lane, v in enumerate(rows):
            off = builder.add(do, ir.Constant(do.type, 32 * lane))
            ptr = _address(context, builder, dst_ty, args[3], off)
            builder.store(v, builder.bitcast(ptr, _vt(I32, 8).as_pointer()), align=1)
        return context.get_dummy_value()

    return types.none(src, so, stride, dst, do), codegen


@intrinsic
def splat_quad(typingctx, ary, offset):
    """i8x32: the 4 signed bytes at ary[offset] in each of the eight quads (one token's lane for eight rows)."""

    def codegen(context, builder, sig, args):
        quad = _load(builder, _address(context, builder, sig.args[0], args[0], args[1]), I32)
        return builder.bitcast(_splat(builder, quad, 8), _vt(I8, 32))

    return i8x32(ary, offset), codegen


# -- integer dot products -------------------------------------------------------------------------------------


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


def _sign_onto(builder, a, b):
    """(|a|, b with a's sign): a signed · b signed as unsigned · signed (b must not be -128)."""
    neg = builder.icmp_signed("<", a, _const(I8, 32, 0))
    magnitude = builder.select(neg, builder.sub(_const(I8, 32, 0), a), a)
    return magnitude, builder.select(neg, builder.sub(_const(I8, 32, 0), b), b)


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
        return _dot4_ir(builder, *_sign_onto(builder, args[0], args[1]))

    return i32x8(a, b), codegen


@intrinsic
def dot(typingctx, a, b):
    """dot4 (a unsigned) or dot4_signed (a signed), chosen by a's kind when the kernel is compiled."""
    if not (isinstance(a, Vec) and a.kind in ("u8", "i8") and isinstance(b, Vec) and b.kind == "i8"):
        return None
    signed = a.kind == "i8"

    def codegen(context, builder, sig, args):
        a_, b_ = args
        if signed:
            a_, b_ = _sign_onto(builder, a_, b_)
        return _dot4_ir(builder, a_, b_)

    return i32x8(a, b), codegen


@intrinsic
def dot4_add(typingctx, acc, a, b):
    """acc + (lane l: Σ_{k<4} a[4l+k]·b[4l+k]) exactly, for any unsigned bytes a (0..255) and signed b: VNNI's
    vpdpbusd accumulates; AVX2's vpmaddubsw would saturate above a = 128, so a is split into its low 7 bits and
    its top bit, two products that cannot."""
    if not (isinstance(a, Vec) and a.kind == "u8" and isinstance(b, Vec) and b.kind == "i8"):
        return None

    def codegen(context, builder, sig, args):
        acc_, a_, b_ = args
        if DOT4_IMPL == "vnni":
            ints = [acc_, builder.bitcast(a_, _vt(I32, 8)), builder.bitcast(b_, _vt(I32, 8))]
            return _call(builder, "llvm.x86.avx512.vpdpbusd.256", _vt(I32, 8), ints)
        if DOT4_IMPL == "avx2":
            low = _dot4_ir(builder, builder.and_(a_, _const(I8, 32, 0x7F)), b_)
            top = _dot4_ir(builder, builder.and_(a_, _const(I8, 32, 0x80)), b_)
            return builder.add(acc_, builder.add(low, top))
        return builder.add(acc_, _dot4_ir(builder, a_, b_))  # the generic IR widens: exact for any a

    return i32x8(i32x8, a, b), codegen


@intrinsic
def isplat(typingctx, s):
    """s (an int) in all 8 int32 lanes."""

    def codegen(context, builder, sig, args):
        return _splat(builder, context.cast(builder, args[0], sig.args[0], types.int32), 8)

    return i32x8(s), codegen


@intrinsic
def dot4_offset(typingctx, a, b, k):
    """i32x8: lane l = Σ_{j<4} (a[4l+j] - k)·b[4l+j], exactly (the dot of the offset quants of Q4_0 / Q5_0 /
    Q6_K, as ggml computes it in integers): dot4(a, b) - dot4(k, b)."""

    def codegen(context, builder, sig, args):
        kk = _splat(builder, builder.trunc(args[2], I8), 32)
        return builder.sub(_dot4_ir(builder, args[0], args[1]), _dot4_ir(builder, kk, args[1]))

    return i32x8(u8x32, i8x32, types.int64), codegen


# -- int32 lanes: scales of super-blocks --------------------------------------------------------------------


@intrinsic
def iadd(typingctx, a, b):
    """a + b, lane-wise int32."""

    def codegen(context, builder, sig, args):
        return builder.add(args[0], args[1])

    return i32x8(i32x8, i32x8), codegen


@intrinsic
def imul(typingctx, a, b):
    """a · b, lane-wise int32."""

    def codegen(context, builder, sig, args):
        return builder.mul(args[0], args[1])

    return i32x8(i32x8, i32x8), codegen


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
def ihalves(typingctx, s0, s1):
    """i32x8 with s0 on lanes 0..3 and s1 on lanes 4..7 (the scales of two 16-element groups)."""

    def codegen(context, builder, sig, args):
        a = _splat(builder, builder.trunc(args[0], I32), 8)
        b = _splat(builder, builder.trunc(args[1], I32), 8)
        return builder.shuffle_vector(a, b, _lanes([0, 1, 2, 3, 8, 9, 10, 11]))

    return i32x8(types.int64, types.int64), codegen


@intrinsic
def bytes8(typingctx, lo, hi):
    """i32x8 of the 8 bytes of two little-endian 32-bit words (lo's bytes in lanes 0..3), zero-extended."""

    def codegen(context, builder, sig, args):
        words = ir.Constant(_vt(I32, 2), ir.Undefined)
        words = builder.insert_element(words, builder.trunc(args[0], I32), ir.Constant(I32, 0))
        words = builder.insert_element(words, builder.trunc(args[1], I32), ir.Constant(I32, 1))
        return builder.zext(builder.bitcast(words, _vt(I8, 8)), _vt(I32, 8))

    return i32x8(types.int64, types.int64), codegen


@intrinsic
def load_i8_as_i32x8(typingctx, ary, offset):
    """8 signed bytes at ary[offset], sign-extended to i32x8."""

    def codegen(context, builder, sig, args):
        v = _load(builder, _address(context, builder, sig.args[0], args[0], args[1]), _vt(I8, 8))
        return builder.sext(v, _vt(I32, 8))

    return i32x8(ary, offset), codegen


@intrinsic
def lane_splat(typingctx, v, j):
    """Lane j of v in all 8 lanes (a constant j folds to one shuffle)."""

    def codegen(context, builder, sig, args):
        return _splat(builder, builder.extract_element(args[0], builder.trunc(args[1], I32)), 8)

    return i32x8(i32x8, types.int64), codegen


@intrinsic
def lane_halves(typingctx, v, j0, j1):
    """Lane j0 of v in lanes 0..3 and lane j1 in lanes 4..7."""

    def codegen(context, builder, sig, args):
        a = _splat(builder, builder.extract_element(args[0], builder.trunc(args[1], I32)), 8)
        b = _splat(builder, builder.extract_element(args[0], builder.trunc(args[2], I32)), 8)
        return builder.shuffle_vector(a, b, _lanes([0, 1, 2, 3, 8, 9, 10, 11]))

    return i32x8(i32x8, types.int64, types.int64), codegen


@intrinsic
def pair_sums16(typingctx, ary, offset):
    """The 16 int32 at ary[offset] summed in pairs: lane l = a[2l] + a[2l + 1]."""

    def codegen(context, builder, sig, args):
        v = _load(builder, _address(context, builder, sig.args[0], args[0], args[1]), _vt(I32, 16))
        return _pair_sums(builder, v)

    return i32x8(ary, offset), codegen


@intrinsic
def quad_sums(typingctx, a, b):
    """i32x8 with lane k = Σ_{j<4} c[4k + j] for k < 4, c = a ++ b (16 lanes), lanes 4..7 zero: the layout of
    `pair_lanes(imul(mins, pair_sums16(bsum)))`, so a panel's per-group products add up as the row dots do."""

    def codegen(context, builder, sig, args):
        c = builder.shuffle_vector(args[0], args[1], _lanes(list(range(16))))
        quads = _pair_sums(builder, _pair_sums(builder, c))  # <4 x i32>
        zero = ir.Constant(_vt(I32, 4), [0] * 4)
        return builder.shuffle_vector(quads, zero, _lanes(list(range(8))))

    return i32x8(i32x8, i32x8), codegen


@intrinsic
def pair_lanes(typingctx, v):
    """i32x8 with lane k = v[2k] + v[2k + 1] for k < 4, lanes 4..7 zero (ggml's _mm_madd_epi16 of 8 pairs)."""

    def codegen(context, builder, sig, args):
        pairs = _pair_sums(builder, args[0])  # <4 x i32>
        zero = ir.Constant(_vt(I32, 4), [0] * 4)
        return builder.shuffle_vector(pairs, zero, _lanes(list(range(8))))

    return i32x8(i32x8), codegen
