/* Shared helpers of the kernels: exports, bit casts, fp16/bf16 conversions, SIMD reductions and the int8
 * dot products whose implementation differs between the plain SIMD128 build and the relaxed-SIMD build.
 *
 * Freestanding: no libc, no allocation. All memory (buffers, weights, scratch) comes from the caller;
 * pointers are offsets into the one linear memory. */
#ifndef LLAMAY_COMMON_H
#define LLAMAY_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <wasm_simd128.h>

#include "blocks.h"

#define EXPORT __attribute__((visibility("default")))
#define INLINE static inline __attribute__((always_inline))

#ifdef __wasm_relaxed_simd__
#define LLAMAY_RELAXED 1
#else
#define LLAMAY_RELAXED 0
#endif

INLINE uint32_t f32_bits(float f) { return __builtin_bit_cast(uint32_t, f); }
INLINE float bits_f32(uint32_t u) { return __builtin_bit_cast(float, u); }
INLINE uint16_t load_u16(const void *p) { return *(const uint16_t *)p; }
INLINE uint32_t load_u32(const void *p) {
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

/* ---- half precision ------------------------------------------------------------------------------------ */

/* binary16 -> float32, exact for every input (subnormals, inf, NaN payloads as numpy keeps them) */
INLINE float h2f(uint16_t h) {
    uint32_t em = h & 0x7fffu;
    uint32_t bits = f32_bits(bits_f32(em << 13) * 0x1p112f); /* normals and subnormals: a rebias by 2^112 */
    bits |= em >= 0x7c00u ? 0x7f800000u : 0u;             /* inf / NaN keep an all-ones exponent */
    return bits_f32(bits | ((uint32_t)(h & 0x8000u) << 16));
}

/* float32 -> binary16, round to nearest even; overflow gives inf (as ggml's conversion) */
INLINE uint16_t f2h(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((ax >> 13) & 0x3ffu); /* NaN stays NaN */
    if (ax >= 0x477ff000u) return sign | 0x7c00u;                                  /* >= 65520: inf */
    if (ax >= 0x38800000u) {                                                        /* normal binary16 */
        uint32_t r = ax - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return sign | (uint16_t)(r >> 13);
    }
    /* subnormal or zero: units of 2^-24, the scaling is exact and f32.nearest rounds half to even */
    return sign | (uint16_t)__builtin_nearbyintf(bits_f32(ax) * 0x1p24f);
}

/* the fp16 rounding of f, as a float */
INLINE float round_half(float f) { return h2f(f2h(f)); }

/* four binary16 values (the low 16 bits of each i32 lane) -> float32x4, exact as h2f */
INLINE v128_t h2f_x4(v128_t h32) {
    v128_t em = wasm_v128_and(h32, wasm_i32x4_splat(0x7fff));
    v128_t f = wasm_f32x4_mul(wasm_i32x4_shl(em, 13), wasm_f32x4_splat(0x1p112f));
    v128_t special = wasm_i32x4_gt(em, wasm_i32x4_splat(0x7bff));
    f = wasm_v128_or(f, wasm_v128_and(special, wasm_i32x4_splat(0x7f800000)));
    return wasm_v128_or(f, wasm_i32x4_shl(wasm_v128_and(h32, wasm_i32x4_splat(0x8000)), 16));
}

/* binary16 -> float32 for finite values, 4 lanes, 3 operations once the half sits sign-extended at bits 28..13:
 * keep the sign and the 15 other bits, then rebias by 2^112 (exact for normals and subnormals). Inf and NaN
 * come out as large finite values: the matmul paths use this for scales and F16 weights, get_rows uses h2f. */
INLINE v128_t h2f_x4_at13(v128_t v) {
    v = wasm_v128_and(v, wasm_i32x4_splat((int32_t)0x8fffe000));
    return wasm_f32x4_mul(v, wasm_f32x4_splat(0x1p112f));
}

/* the half in the low 16 bits of each lane */
INLINE v128_t h2f_x4_lo(v128_t v) { return h2f_x4_at13(wasm_i32x4_shr(wasm_i32x4_shl(v, 16), 3)); }

/* the half in the high 16 bits of each lane */
INLINE v128_t h2f_x4_hi(v128_t v) { return h2f_x4_at13(wasm_i32x4_shr(v, 3)); }

/* bf16 -> float32 */
INLINE float bf2f(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* ---- reductions ---------------------------------------------------------------------------------------- */

INLINE float hsum_f32x4(v128_t v) {
    v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
    return wasm_f32x4_extract_lane(v, 0);
}

INLINE int32_t hsum_i32x4(v128_t v) {
    v = wasm_i32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    v = wasm_i32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
    return wasm_i32x4_extract_lane(v, 0);
}

/* [sum(a), sum(b), sum(c), sum(d)] of i32x4 vectors */
INLINE v128_t hsum4_i32x4(v128_t a, v128_t b, v128_t c, v128_t d) {
    v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

/* the 16-bit words at p[0..3] + off (as u32 lanes), and the 32-bit words */
INLINE v128_t gather4_u16(const uint8_t *const *p, size_t off) {
    v128_t v = wasm_i32x4_splat(0);
    v = wasm_v128_load16_lane(p[0] + off, v, 0);
    v = wasm_v128_load16_lane(p[1] + off, v, 2);
    v = wasm_v128_load16_lane(p[2] + off, v, 4);
    return wasm_v128_load16_lane(p[3] + off, v, 6);
}

INLINE v128_t gather4_u32(const uint8_t *const *p, size_t off) {
    v128_t v = wasm_v128_load32_zero(p[0] + off);
    v = wasm_v128_load32_lane(p[1] + off, v, 1);
    v = wasm_v128_load32_lane(p[2] + off, v, 2);
    return wasm_v128_load32_lane(p[3] + off, v, 3);
}

INLINE float max_f32x4(v128_t v) {
    v = wasm_f32x4_max(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    v = wasm_f32x4_max(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
    return wasm_f32x4_extract_lane(v, 0);
}

/* ---- int8 dot products --------------------------------------------------------------------------------- *
 * x: 16 activation quants (int8, -127..127).
 *   dot_u6: weights 0..63 (unsigned, high bits clear) -> i16x8 whose lanes sum to sum(w*x), each lane the sum
 *           of two products (|lane| <= 2*63*127), so two results may be added in i16 before widening. The
 *           relaxed build uses i16x8.relaxed_dot_i8x16_i7x16 with the weights as the 7-bit operand:
 *           deterministic here since their top bit is clear, and no pair sum can saturate.
 *   dot_i8: any int8 weights -> acc + sum(w*x) in i32x4 lanes (|lane pair| <= 2*128*127: no i16 overflow).
 *           Plain SIMD128 in both builds: moving the weights' signs onto x for the relaxed dot measured slower
 *           under V8 and wasmtime. */

INLINE v128_t dot_u6(v128_t w, v128_t x) {
#if LLAMAY_RELAXED
    return wasm_i16x8_relaxed_dot_i8x16_i7x16(x, w);
#else
    return wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(w, x), wasm_i16x8_extmul_high_i8x16(w, x));
#endif
}

/* i16x8 partial sums -> i32x4, each lane times `scale` (an i16 splat) */
INLINE v128_t widen_scaled(v128_t s16, v128_t scale16) { return wasm_i32x4_dot_i16x8(s16, scale16); }

INLINE v128_t widen(v128_t s16) { return wasm_i32x4_extadd_pairwise_i16x8(s16); }

INLINE v128_t dot_i8(v128_t w, v128_t x, v128_t acc) {
    v128_t p = wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(w, x), wasm_i16x8_extmul_high_i8x16(w, x));
    return wasm_i32x4_add(acc, wasm_i32x4_extadd_pairwise_i16x8(p));
}

/* a 16-entry table lookup with indices 0..15 (plain i8x16.swizzle: the only relaxed op the kernels use is the
 * i16x8 dot above) */
INLINE v128_t lookup16(v128_t table, v128_t idx) { return wasm_i8x16_swizzle(table, idx); }

/* bit b of the 32-bit word `bits` for element j (0..31), as a byte 0 or `value`: elements lo16 .. lo16+15 */
INLINE v128_t bits_to_bytes(uint32_t bits, int lo16, uint8_t value) {
    v128_t w = wasm_i32x4_splat((int32_t)bits);
    v128_t spread = lo16 ? wasm_i8x16_shuffle(w, w, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3)
                         : wasm_i8x16_shuffle(w, w, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    v128_t mask = wasm_i8x16_make(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    v128_t set = wasm_i8x16_eq(wasm_v128_and(spread, mask), mask);
    return wasm_v128_and(set, wasm_i8x16_splat((int8_t)value));
}

#endif
