/* The 32-element block types against Q8_0/Q8_1 activations: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL MXFP4.
 *
 * Per block, the integer dot of the weight quants with the activation quants, then one float step:
 * acc += (float)dot * (d_w * d_x). The 4- and 5-bit quants are unsigned; their offset (8 or 16) comes off
 * as offset * sum(x_q), an integer kept per activation block. Q4_1/Q5_1 add m_w * s_x (Q8_1's s).
 *
 * A kernel runs one weight row against up to 4 activation rows (kernels.h), 4 consecutive blocks at a time: the
 * 4 blocks' integer dots are reduced into one i32x4 (lane i: block i), their fp16 scales converted together
 * and the activation scales (and sums) loaded as one vector, so the float step is a handful of vector
 * operations per 4 blocks. */
#include "kernels.h"

#define LOW4 wasm_i8x16_splat(0x0f)

static const int8_t IQ4_LEVELS[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
static const int8_t MXFP4_LEVELS[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}; /* E2M1, doubled */

/* How each type keeps its 32 quants and what their value adds: the per-type facts of the kernels below, as data
 * (the type is a constant in each kernel, so these fold into its code). */
/* nibbles; nibbles and a fifth bit from qh; int8; IQ4 level indices; MXFP4 level indices */
enum { NIBBLES, FIFTH_BIT, INT8, LEVELS, MX_LEVELS };

typedef struct {
    int8_t quants;  /* one of the above */
    int8_t qs;      /* byte offset of the quants (of qh for FIFTH_BIT, the nibbles follow) */
    int8_t has_min; /* d and m lead the block: value d * q + m */
    int8_t offset;  /* value d * (q - offset) */
    int8_t e8m0;    /* the scale is an E8M0 byte first (MXFP4: 2^(e - 128)), not an fp16 d */
} legacy_layout;

/* the family's types, X(id, name, quants, where they start, has_min, offset): their layouts below and, at the end
 * of this file, their kernels are made from this list */
#define LEGACY_TYPES(X)                                                                                            \
    X(T_Q4_0, q4_0, NIBBLES, offsetof(block_q4_0, qs), 0, 8, 0)                                                    \
    X(T_Q4_1, q4_1, NIBBLES, offsetof(block_q4_1, qs), 1, 0, 0)                                                    \
    X(T_Q5_0, q5_0, FIFTH_BIT, offsetof(block_q5_0, qh), 0, 16, 0)                                                 \
    X(T_Q5_1, q5_1, FIFTH_BIT, offsetof(block_q5_1, qh), 1, 0, 0)                                                  \
    X(T_Q8_0, q8_0, INT8, offsetof(block_q8_0, qs), 0, 0, 0)                                                       \
    X(T_IQ4_NL, iq4_nl, LEVELS, offsetof(block_iq4_nl, qs), 0, 0, 0)                                               \
    X(T_MXFP4, mxfp4, MX_LEVELS, offsetof(block_mxfp4, qs), 0, 0, 1)

#define LAYOUT_OF(T, name, quants, at, has_min, offset, e8m0) [T] = {quants, at, has_min, offset, e8m0},
static const legacy_layout LAYOUT[T_COUNT] = {LEGACY_TYPES(LAYOUT_OF)};

INLINE size_t block_bytes(int T) { return (size_t)TYPE_TRAITS[T].bytes; }

/* the 32 quants of a block as two vectors: elements 0..15 and 16..31 (for IQ4_NL: the level indices) */
INLINE void decode(int T, const uint8_t *blk, v128_t *q0, v128_t *q1) {
    const uint8_t *at = blk + LAYOUT[T].qs;
    switch (LAYOUT[T].quants) {
    case NIBBLES:
    case LEVELS:
    case MX_LEVELS: {
        v128_t q = wasm_v128_load(at);
        *q0 = wasm_v128_and(q, LOW4);
        *q1 = wasm_u8x16_shr(q, 4);
        break;
    }
    case FIFTH_BIT: {
        uint32_t bits = load_u32(at);
        v128_t q = wasm_v128_load(at + 4);
        *q0 = wasm_v128_or(wasm_v128_and(q, LOW4), bits_to_bytes(bits, 0, 0x10));
        *q1 = wasm_v128_or(wasm_u8x16_shr(q, 4), bits_to_bytes(bits, 1, 0x10));
        break;
    }
    default: /* INT8 */
        *q0 = wasm_v128_load(at);
        *q1 = wasm_v128_load(at + 16);
    }
}

/* acc + sum(level[idx] * x), the plain dot in both builds: the relaxed dot with the levels' signs moved onto x
 * (their magnitudes fit 7 bits) gained ~13% under V8 but computed wrong results under Node 20's experimental
 * relaxed SIMD (right under Chromium 156 and wasmtime); not worth the risk for a rare type. */
INLINE v128_t dot_iq4(v128_t idx, v128_t x, v128_t acc) {
    const v128_t levels = wasm_i8x16_make(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    return dot_i8(lookup16(levels, idx), x, acc);
}

/* acc + sum(level[idx] * x) for MXFP4's levels (the plain dot, as dot_iq4) */
INLINE v128_t dot_mxfp4(v128_t idx, v128_t x, v128_t acc) {
    const v128_t levels = wasm_i8x16_make(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    return dot_i8(lookup16(levels, idx), x, acc);
}

/* E8M0 byte e -> 2^(e - 128) as float32 bits: (e - 1) << 23, or the subnormals 0x00200000 << e for e < 2 */
INLINE float e8m0_half(uint32_t e) { return bits_f32(e >= 2 ? (e - 1) << 23 : 0x00200000u << e); }

INLINE v128_t e8m0_half_x4(v128_t e) {
    v128_t normal = wasm_i32x4_shl(wasm_i32x4_sub(e, wasm_i32x4_splat(1)), 23);
    v128_t sub = wasm_i32x4_mul(wasm_i32x4_splat(0x00200000), wasm_i32x4_add(e, wasm_i32x4_splat(1))); /* e 0, 1 */
    return wasm_v128_bitselect(normal, sub, wasm_i32x4_gt(e, wasm_i32x4_splat(1)));
}

/* the integer dot of one block's quants with 32 activation quants, as i32x4 partial sums */
INLINE v128_t block_dot(int T, v128_t q0, v128_t q1, v128_t x0, v128_t x1) {
    const v128_t zero = wasm_i32x4_splat(0);
    switch (LAYOUT[T].quants) {
    case INT8: /* the plain dot in both builds: the relaxed one needs the weights' signs moved first, slower */
        return dot_i8(q1, x1, dot_i8(q0, x0, zero));
    case LEVELS:
        return dot_iq4(q1, x1, dot_iq4(q0, x0, zero));
    case MX_LEVELS:
        return dot_mxfp4(q1, x1, dot_mxfp4(q0, x0, zero));
    default: /* unsigned 4- or 5-bit quants: i16 partial sums stay below 4 * 31 * 127 */
        return widen(wasm_i16x8_add(dot_u6(q0, x0), dot_u6(q1, x1)));
    }
}

INLINE int has_min(int T) { return LAYOUT[T].has_min; }

INLINE int offset_of(int T) { return LAYOUT[T].offset; }

/* blocks b .. b+cnt-1 (cnt 1..4) of weight row w against NA activation rows, added to acc[j]; past cnt the last
 * block repeats, with activation scale 0 */
INLINE void legacy_quad(int T, int NA, const uint8_t *w, const act_q8 *a, int b, int cnt, v128_t *acc) {
    const size_t bs = block_bytes(T);
    const uint8_t *blk[4];
    int xb[4];
    UNROLL for (int i = 0; i < 4; i++) {
        xb[i] = b + (i < cnt ? i : cnt - 1);
        blk[i] = w + (size_t)xb[i] * bs;
    }
    v128_t q[4][2];
    UNROLL for (int i = 0; i < 4; i++) decode(T, blk[i], &q[i][0], &q[i][1]);
    v128_t dm = has_min(T) ? gather4_u32(blk, 0) : gather4_u16(blk, 0); /* d (and m) lead each block */
    v128_t d = LAYOUT[T].e8m0 ? e8m0_half_x4(wasm_v128_and(dm, wasm_i32x4_splat(0xff))) : h2f_x4_lo(dm);
    v128_t mn = has_min(T) ? h2f_x4_hi(dm) : d;
    UNROLL for (int j = 0; j < NA; j++) {
        v128_t s[4];
        UNROLL for (int i = 0; i < 4; i++) {
            const int8_t *x = a[j].qs + QK * xb[i];
            s[i] = block_dot(T, q[i][0], q[i][1], wasm_v128_load(x), wasm_v128_load(x + 16));
        }
        v128_t sum = hsum4_i32x4(s[0], s[1], s[2], s[3]);
        if (offset_of(T))
            sum = wasm_i32x4_sub(sum, wasm_i32x4_mul(load4_i32(a[j].sum + b, cnt), wasm_i32x4_splat(offset_of(T))));
        v128_t scale = wasm_f32x4_mul(d, load4_f32(a[j].d + b, cnt));
        acc[j] = wasm_f32x4_add(acc[j], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sum), scale));
        if (has_min(T)) acc[j] = wasm_f32x4_add(acc[j], wasm_f32x4_mul(mn, load4_f32(a[j].s + b, cnt)));
    }
}

/* one weight row w by NA activation rows (kernels.h, MATMUL_DRIVER), 4 blocks at a time */
INLINE void legacy_row(int T, int NA, const uint8_t *w, const uint8_t *arow, size_t astride, int k, float *res) {
    const int nb = k / QK;
    act_q8 a[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) a[j] = act_q8_row(arow + j * astride, k);
    v128_t acc[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) acc[j] = wasm_f32x4_splat(0.0f);
    int b = 0;
    for (; b + 4 <= nb; b += 4) legacy_quad(T, NA, w, a, b, 4, acc);
    if (b < nb) legacy_quad(T, NA, w, a, b, nb - b, acc);
    UNROLL for (int j = 0; j < NA; j++) res[j] = hsum_f32x4(acc[j]);
}

/* ---- dequantisation (get_rows): the same float operations as llamay.quants -------------------------------- */

/* a row of type T: per block d * (q - offset), d * q + m with a min, d * level for IQ4_NL */
INLINE void legacy_dequant(int T, const uint8_t *w, float *out, int k) {
    const legacy_layout L = LAYOUT[T];
    for (int b = 0; b < k / QK; b++, out += QK) {
        const uint8_t *blk = w + (size_t)b * block_bytes(T);
        float d = L.e8m0 ? e8m0_half(blk[0]) : h2f(load_u16(blk)); /* d (and m) lead a block */
        float m = L.has_min ? h2f(load_u16(blk + 2)) : 0.0f;
        v128_t q[2];
        uint8_t qs[QK];
        decode(T, blk, &q[0], &q[1]);
        wasm_v128_store(qs, q[0]);
        wasm_v128_store(qs + 16, q[1]);
        for (int j = 0; j < QK; j++) {
            float v = L.quants == LEVELS      ? (float)IQ4_LEVELS[qs[j]]
                      : L.quants == MX_LEVELS ? (float)MXFP4_LEVELS[qs[j]]
                      : L.quants == INT8 ? (float)(int8_t)qs[j]
                                         : (float)(qs[j] - L.offset);
            out[j] = L.has_min ? d * v + m : d * v;
        }
    }
}

/* ---- each type's kernels: its matmul (the row kernel) and its dequantiser --------------------------------- */

#define LEGACY_KERNELS(T, name, ...)                                                                               \
    void mm_##name(MATMUL_ARGS) { MATMUL_DRIVER(legacy_row, T); }                                                  \
    void dq_##name(DEQUANT_ARGS) { legacy_dequant(T, w, out, k); }
LEGACY_TYPES(LEGACY_KERNELS)
