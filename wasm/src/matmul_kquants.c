/* The k-quants against Q8_K activations: Q2_K Q3_K Q4_K Q5_K Q6_K, and IQ4_XS (256-element super-blocks).
 *
 * Within a super-block every sub-block (32 or 16 elements) has a small integer scale: the integer dots of the
 * sub-blocks are summed with their scales in i32 (i32x4.dot_i16x8 applies the scale while widening), and
 * only then does one float step per super-block apply d_w * d_x. Mins (Q4_K, Q5_K) and Q6_K's offset of 32
 * come off through Q8_K's bsums (sums of the activation quants by 16); so do Q2_K's mins and Q3_K's offset of 4.
 * Each kernel runs one weight row against up to 4 activation rows (kernels.h); per super-block the integer sums
 * (an i32x4 of partial sums) take one float step: acc += (float)isum * d_w * d_x. */
#include "kernels.h"

#define LOW4 wasm_i8x16_splat(0x0f)

/* the 8 6-bit scales and 8 6-bit mins of Q4_K / Q5_K, packed in 12 bytes */
INLINE void scale_min_k4(const uint8_t *s, int *sc, int *mn) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (s[j + 8] & 15) | ((s[j] >> 6) << 4);
        mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
}

INLINE int mins_dot(const int *mn, const int16_t *bsums) {
    int t = 0;
    for (int j = 0; j < 8; j++) t += mn[j] * (bsums[2 * j] + bsums[2 * j + 1]);
    return t;
}

/* what a super-block gives the row kernel (k_row) for each of its NA activation rows: the integer sums by the
 * sub-block scales (scaled by d * dx), and for the types with mins their integer dot with the bsums, lane-wise
 * (msum, Q2_K) or as one scalar (mins, Q4_K / Q5_K), scaled by dmin * dx */
typedef struct {
    v128_t isum[MAX_NA];
    v128_t msum[MAX_NA];
    int32_t mins[MAX_NA];
    float d, dmin;
} ksum;

/* bit i of each byte of h, as 0x10 or 0 */
INLINE v128_t high_bit(v128_t h, int i) {
    v128_t m = wasm_i8x16_splat((int8_t)(1 << i));
    return wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(h, m), m), wasm_i8x16_splat(0x10));
}

/* ---- Q4_K / Q5_K: chunk c (64 elements) is the low then the high nibbles of qs[32c .. 32c + 32] ------------ */

/* super-block blk (the b-th) of Q4_K / Q5_K against NA activation rows: the integer sums by their sub-block
 * scales, and the mins' integer dot with the bsums (a scalar per row) */
INLINE void q45_k_block(int FIVE, int NA, const uint8_t *blk, const act_q8k *a, int b, ksum *s) {
    const uint8_t *qs = blk + (FIVE ? offsetof(block_q5_k, qs) : offsetof(block_q4_k, qs));
    int sc[8], mn[8];
    scale_min_k4(((const block_q4_k *)blk)->scales, sc, mn);
    v128_t h0 = wasm_i8x16_splat(0), h1 = wasm_i8x16_splat(0);
    if (FIVE) {
        h0 = wasm_v128_load(((const block_q5_k *)blk)->qh);
        h1 = wasm_v128_load(((const block_q5_k *)blk)->qh + 16);
    }
    UNROLL for (int j = 0; j < NA; j++) s->isum[j] = wasm_i32x4_splat(0);
    for (int c = 0; c < 4; c++) {
        v128_t q0 = wasm_v128_load(qs + 32 * c), q1 = wasm_v128_load(qs + 32 * c + 16);
        v128_t l0 = wasm_v128_and(q0, LOW4), l1 = wasm_v128_and(q1, LOW4);
        v128_t u0 = wasm_u8x16_shr(q0, 4), u1 = wasm_u8x16_shr(q1, 4);
        if (FIVE) {
            l0 = wasm_v128_or(l0, high_bit(h0, 2 * c));
            l1 = wasm_v128_or(l1, high_bit(h1, 2 * c));
            u0 = wasm_v128_or(u0, high_bit(h0, 2 * c + 1));
            u1 = wasm_v128_or(u1, high_bit(h1, 2 * c + 1));
        }
        v128_t slo = wasm_i16x8_splat((int16_t)sc[2 * c]), shi = wasm_i16x8_splat((int16_t)sc[2 * c + 1]);
        UNROLL for (int j = 0; j < NA; j++) {
            const int8_t *xc = a[j].qs + QK_K * b + 64 * c;
            v128_t lo = wasm_i16x8_add(dot_u6(l0, wasm_v128_load(xc)), dot_u6(l1, wasm_v128_load(xc + 16)));
            v128_t hi = wasm_i16x8_add(dot_u6(u0, wasm_v128_load(xc + 32)), dot_u6(u1, wasm_v128_load(xc + 48)));
            s->isum[j] = wasm_i32x4_add(s->isum[j], widen_scaled(lo, slo));
            s->isum[j] = wasm_i32x4_add(s->isum[j], widen_scaled(hi, shi));
        }
    }
    const block_q4_k *head = (const block_q4_k *)blk; /* Q4_K and Q5_K share d, dmin, scales */
    s->d = h2f(head->d);
    s->dmin = h2f(head->dmin);
    UNROLL for (int j = 0; j < NA; j++) s->mins[j] = mins_dot(mn, a[j].bsums + 16 * b);
}

/* a row of Q4_K (FIVE = 0) or Q5_K (FIVE = 1: bit 4 of each quant from qh) dequantised */
INLINE void q45_k_dequant(int FIVE, const uint8_t *w, float *out, int k) {
    const size_t bs = FIVE ? sizeof(block_q5_k) : sizeof(block_q4_k);
    const size_t qs_at = FIVE ? offsetof(block_q5_k, qs) : offsetof(block_q4_k, qs);
    for (int b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = w + b * bs, *qs = blk + qs_at;
        const block_q4_k *head = (const block_q4_k *)blk; /* d, dmin, scales as in Q5_K */
        int sc[8], mn[8];
        scale_min_k4(head->scales, sc, mn);
        float d = h2f(head->d), dmin = h2f(head->dmin);
        for (int c = 0; c < 4; c++, out += 64) {
            float d0 = d * (float)sc[2 * c], m0 = dmin * (float)mn[2 * c];
            float d1 = d * (float)sc[2 * c + 1], m1 = dmin * (float)mn[2 * c + 1];
            for (int l = 0; l < 32; l++) {
                int h = FIVE ? ((const block_q5_k *)blk)->qh[l] : 0;
                int q0 = (qs[32 * c + l] & 15) | (((h >> (2 * c)) & 1) << 4);
                int q1 = (qs[32 * c + l] >> 4) | (((h >> (2 * c + 1)) & 1) << 4);
                out[l] = d0 * (float)q0 - m0;
                out[l + 32] = d1 * (float)q1 - m1;
            }
        }
    }
}

/* ---- Q6_K: 6-bit quants (low nibble in ql, 2 high bits in qh) offset by 32, int8 scales per 16 ----------- */

/* super-block blk (the b-th) of Q6_K against NA activation rows: the offset of 32 off through the bsums */
INLINE void q6_k_block(int NA, const uint8_t *w, const act_q8k *a, int b, ksum *s) {
    const block_q6_k *blk = (const block_q6_k *)w;
    const v128_t three = wasm_i8x16_splat(3);
    v128_t scales = wasm_v128_load(blk->scales);
    v128_t sc0 = wasm_i16x8_extend_low_i8x16(scales), sc1 = wasm_i16x8_extend_high_i8x16(scales);
    UNROLL for (int j = 0; j < NA; j++) { /* the offset: -32 * sum(scale * bsum) */
        v128_t bs0 = wasm_v128_load(a[j].bsums + 16 * b), bs1 = wasm_v128_load(a[j].bsums + 16 * b + 8);
        v128_t off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(bs0, sc0), wasm_i32x4_dot_i16x8(bs1, sc1));
        s->isum[j] = wasm_i32x4_sub(wasm_i32x4_splat(0), wasm_i32x4_shl(off, 5));
    }
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = blk->ql + 64 * h, *qh = blk->qh + 32 * h;
        const int8_t *sc = blk->scales + 8 * h;
        for (int g = 0; g < 2; g++) {
            v128_t a0 = wasm_v128_load(ql + 16 * g), a1 = wasm_v128_load(ql + 32 + 16 * g);
            v128_t hb = wasm_v128_load(qh + 16 * g);
            v128_t q[4];
            q[0] = wasm_v128_or(wasm_v128_and(a0, LOW4), wasm_i8x16_shl(wasm_v128_and(hb, three), 4));
            q[1] = wasm_v128_or(wasm_v128_and(a1, LOW4),
                                wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(hb, 2), three), 4));
            q[2] = wasm_v128_or(wasm_u8x16_shr(a0, 4),
                                wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(hb, 4), three), 4));
            q[3] = wasm_v128_or(wasm_u8x16_shr(a1, 4), wasm_i8x16_shl(wasm_u8x16_shr(hb, 6), 4));
            UNROLL for (int j = 0; j < NA; j++) {
                const int8_t *xg = a[j].qs + QK_K * b + 128 * h + 16 * g;
                UNROLL for (int e = 0; e < 4; e++) {
                    v128_t s16 = dot_u6(q[e], wasm_v128_load(xg + 32 * e));
                    s->isum[j] = wasm_i32x4_add(s->isum[j], widen_scaled(s16, wasm_i16x8_splat(sc[g + 2 * e])));
                }
            }
        }
    }
    s->d = h2f(blk->d);
}

/* ---- Q2_K: 2-bit quants, a 4-bit scale and a 4-bit min per 16 elements ----------------------------------- *
 * element 128h + 32j + 16p + l: crumb j of qs[32h + 16p + l], sub-block 8h + 2j + p */

INLINE void q2_k_block(int NA, const uint8_t *w, const act_q8k *a, int b, ksum *s) {
    const block_q2_k *blk = (const block_q2_k *)w;
    const v128_t three = wasm_i8x16_splat(3);
    v128_t mins = wasm_u8x16_shr(wasm_v128_load(blk->scales), 4);
    v128_t mn0 = wasm_u16x8_extend_low_u8x16(mins), mn1 = wasm_u16x8_extend_high_u8x16(mins);
    UNROLL for (int j = 0; j < NA; j++) {
        const int16_t *bs = a[j].bsums + 16 * b;
        s->msum[j] = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_load(bs), mn0),
                                    wasm_i32x4_dot_i16x8(wasm_v128_load(bs + 8), mn1));
        s->isum[j] = wasm_i32x4_splat(0);
    }
    for (int h = 0; h < 2; h++) {
        v128_t q0 = wasm_v128_load(blk->qs + 32 * h), q1 = wasm_v128_load(blk->qs + 32 * h + 16);
        UNROLL for (int sh = 0; sh < 4; sh++) {
            v128_t c0 = wasm_v128_and(wasm_u8x16_shr(q0, 2 * sh), three);
            v128_t c1 = wasm_v128_and(wasm_u8x16_shr(q1, 2 * sh), three);
            int i = 8 * h + 2 * sh;
            v128_t s0 = wasm_i16x8_splat(blk->scales[i] & 15), s1 = wasm_i16x8_splat(blk->scales[i + 1] & 15);
            UNROLL for (int j = 0; j < NA; j++) {
                const int8_t *x = a[j].qs + QK_K * b + 128 * h + 32 * sh;
                s->isum[j] = wasm_i32x4_add(s->isum[j], widen_scaled(dot_u6(c0, wasm_v128_load(x)), s0));
                s->isum[j] = wasm_i32x4_add(s->isum[j], widen_scaled(dot_u6(c1, wasm_v128_load(x + 16)), s1));
            }
        }
    }
    s->d = h2f(blk->d);
    s->dmin = h2f(blk->dmin);
}

/* ---- Q3_K: 2-bit quants plus a high bit from hmask (clear: minus 4), 6-bit signed scales per 16 ----------- *
 * element 32g + 16p + l: crumb g % 4 of qs[32 (g / 4) + 16p + l], bit g of hmask[16p + l]; sub-block 2g + p */

INLINE void q3_scales(const uint8_t *s, int *sc) {
    for (int i = 0; i < 16; i++) {
        int low = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
        sc[i] = (low | (((s[8 + i % 4] >> (2 * (i / 4))) & 3) << 4)) - 32;
    }
}

INLINE void q3_k_block(int NA, const uint8_t *w, const act_q8k *a, int b, ksum *s) {
    const block_q3_k *blk = (const block_q3_k *)w;
    const v128_t three = wasm_i8x16_splat(3), one = wasm_i8x16_splat(1);
    int sc[16];
    q3_scales(blk->scales, sc);
    v128_t sc0 = wasm_i16x8_make(sc[0], sc[1], sc[2], sc[3], sc[4], sc[5], sc[6], sc[7]);
    v128_t sc1 = wasm_i16x8_make(sc[8], sc[9], sc[10], sc[11], sc[12], sc[13], sc[14], sc[15]);
    UNROLL for (int j = 0; j < NA; j++) { /* the offset: -4 * sum(scale * bsum) */
        const int16_t *bs = a[j].bsums + 16 * b;
        v128_t off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_load(bs), sc0),
                                    wasm_i32x4_dot_i16x8(wasm_v128_load(bs + 8), sc1));
        s->isum[j] = wasm_i32x4_sub(wasm_i32x4_splat(0), wasm_i32x4_shl(off, 2));
    }
    v128_t hm[2] = {wasm_v128_load(blk->hmask), wasm_v128_load(blk->hmask + 16)};
    for (int g = 0; g < 8; g++) {
        UNROLL for (int pp = 0; pp < 2; pp++) {
            v128_t q = wasm_v128_and(wasm_u8x16_shr(wasm_v128_load(blk->qs + 32 * (g / 4) + 16 * pp), 2 * (g % 4)),
                                     three);
            q = wasm_v128_or(q, wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(hm[pp], g), one), 2));
            v128_t sv = wasm_i16x8_splat((int16_t)sc[2 * g + pp]);
            UNROLL for (int j = 0; j < NA; j++) {
                const int8_t *x = a[j].qs + QK_K * b + 32 * g + 16 * pp;
                s->isum[j] = wasm_i32x4_add(s->isum[j], widen_scaled(dot_u6(q, wasm_v128_load(x)), sv));
            }
        }
    }
    s->d = h2f(blk->d);
}

/* ---- IQ4_XS: IQ4_NL's 16 levels, a 6-bit scale (offset 32) per 32 elements ---------------------------------- */

INLINE int iq4_xs_scale(const block_iq4_xs *blk, int ib) {
    return (((blk->scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((blk->scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

INLINE void iq4_xs_block(int NA, const uint8_t *w, const act_q8k *a, int b, ksum *s) {
    const block_iq4_xs *blk = (const block_iq4_xs *)w;
    const v128_t levels = wasm_i8x16_make(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    UNROLL for (int j = 0; j < NA; j++) s->isum[j] = wasm_i32x4_splat(0);
    for (int ib = 0; ib < 8; ib++) {
        v128_t q = wasm_v128_load(blk->qs + 16 * ib);
        v128_t lo = lookup16(levels, wasm_v128_and(q, LOW4)), hi = lookup16(levels, wasm_u8x16_shr(q, 4));
        v128_t sv = wasm_i32x4_splat(iq4_xs_scale(blk, ib));
        UNROLL for (int j = 0; j < NA; j++) {
            const int8_t *x = a[j].qs + QK_K * b + 32 * ib;
            v128_t d32 = dot_i8(hi, wasm_v128_load(x + 16), dot_i8(lo, wasm_v128_load(x), wasm_i32x4_splat(0)));
            s->isum[j] = wasm_i32x4_add(s->isum[j], wasm_i32x4_mul(d32, sv));
        }
    }
    s->d = h2f(blk->d);
}

/* ---- the row kernel of the family: per super-block the type's integer sums, then its float steps ---------- */

INLINE void q4_k_block(int NA, const uint8_t *blk, const act_q8k *a, int b, ksum *s) {
    q45_k_block(0, NA, blk, a, b, s);
}

INLINE void q5_k_block(int NA, const uint8_t *blk, const act_q8k *a, int b, ksum *s) {
    q45_k_block(1, NA, blk, a, b, s);
}

/* how a type's mins come off: not at all, lane-wise from each super-block's lanes, or as one scalar per row */
enum { NO_MINS, LANE_MINS, ROW_MINS };

/* the family's types, X(id, name, mins): each one's super-block code is <name>_block above, and its kernels, at
 * the end of this file, are made from this list */
#define K_TYPES(X)                                                                                                 \
    X(T_Q2_K, q2_k, LANE_MINS)                                                                                     \
    X(T_Q3_K, q3_k, NO_MINS)                                                                                       \
    X(T_Q4_K, q4_k, ROW_MINS)                                                                                      \
    X(T_Q5_K, q5_k, ROW_MINS)                                                                                      \
    X(T_Q6_K, q6_k, NO_MINS)                                                                                       \
    X(T_IQ4_XS, iq4_xs, NO_MINS)

#define MINS_OF(T, name, mins) [T] = mins,
static const int8_t MINS[T_COUNT] = {K_TYPES(MINS_OF)};

#define BLOCK_CASE(T, name, mins)                                                                                  \
    case T:                                                                                                        \
        name##_block(NA, blk, a, b, s);                                                                            \
        break;

/* super-block b of weight row w, of type T (a constant in each kernel: the switch picks the type's code) */
INLINE void k_block(int T, int NA, const uint8_t *w, const act_q8k *a, int b, ksum *s) {
    const uint8_t *blk = w + (size_t)b * (size_t)TYPE_TRAITS[T].bytes;
    switch (T) { K_TYPES(BLOCK_CASE) }
}

/* one weight row w by NA activation rows (kernels.h, MATMUL_DRIVER): acc += (float)isum * (d * dx) per
 * super-block, then the mins: Q2_K's lanes subtracted the same way (by dmin * dx), Q4_K's and Q5_K's one scalar
 * per row (dmin * dx * mins, summed, subtracted from the lanes' sum at the end) */
INLINE void k_row(int T, int NA, const uint8_t *w, const uint8_t *arow, size_t astride, int k, float *res) {
    act_q8k a[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) a[j] = act_q8k_row(arow + j * astride, k);
    v128_t acc[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) acc[j] = wasm_f32x4_splat(0.0f);
    float mins[MAX_NA] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int lane_mins = MINS[T] == LANE_MINS, row_mins = MINS[T] == ROW_MINS;
    for (int b = 0; b < k / QK_K; b++) {
        ksum s;
        k_block(T, NA, w, a, b, &s);
        UNROLL for (int j = 0; j < NA; j++) {
            float dx = a[j].d[b];
            v128_t isum = wasm_f32x4_convert_i32x4(s.isum[j]);
            acc[j] = wasm_f32x4_add(acc[j], wasm_f32x4_mul(isum, wasm_f32x4_splat(s.d * dx)));
            if (lane_mins)
                acc[j] = wasm_f32x4_sub(acc[j], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s.msum[j]),
                                                               wasm_f32x4_splat(s.dmin * dx)));
            if (row_mins) mins[j] += s.dmin * dx * (float)s.mins[j];
        }
    }
    UNROLL for (int j = 0; j < NA; j++) res[j] = row_mins ? hsum_f32x4(acc[j]) - mins[j] : hsum_f32x4(acc[j]);
}

/* ---- each type's kernels: its matmul (k_row) and its dequantiser (get_rows) ---------------------------------- */

#define K_MATMUL(T, name, mins) void mm_##name(MATMUL_ARGS) { MATMUL_DRIVER(k_row, T); }
K_TYPES(K_MATMUL)

void dq_q4_k(DEQUANT_ARGS) { q45_k_dequant(0, w, out, k); }

void dq_q5_k(DEQUANT_ARGS) { q45_k_dequant(1, w, out, k); }

void dq_q6_k(DEQUANT_ARGS) {
    for (int b = 0; b < k / QK_K; b++) {
        const block_q6_k *blk = (const block_q6_k *)w + b;
        float d = h2f(blk->d);
        for (int h = 0; h < 2; h++, out += 128) {
            const uint8_t *ql = blk->ql + 64 * h, *qh = blk->qh + 32 * h;
            const int8_t *sc = blk->scales + 8 * h;
            for (int l = 0; l < 32; l++) {
                int p = l / 16;
                int q1 = (ql[l] & 15) | ((qh[l] & 3) << 4);
                int q2 = (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4);
                int q3 = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                int q4 = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                out[l] = d * (float)sc[p] * (float)(q1 - 32);
                out[l + 32] = d * (float)sc[p + 2] * (float)(q2 - 32);
                out[l + 64] = d * (float)sc[p + 4] * (float)(q3 - 32);
                out[l + 96] = d * (float)sc[p + 6] * (float)(q4 - 32);
            }
        }
    }
}

void dq_q2_k(DEQUANT_ARGS) {
    for (int b = 0; b < k / QK_K; b++) {
        const block_q2_k *blk = (const block_q2_k *)w + b;
        float d = h2f(blk->d), dmin = h2f(blk->dmin);
        for (int i = 0; i < 16; i++, out += 16) {
            float dl = d * (float)(blk->scales[i] & 15), ml = dmin * (float)(blk->scales[i] >> 4);
            const uint8_t *q = blk->qs + 32 * (i / 8) + 16 * (i % 2);
            int shift = 2 * ((i % 8) / 2);
            for (int l = 0; l < 16; l++) out[l] = dl * (float)((q[l] >> shift) & 3) - ml;
        }
    }
}

void dq_q3_k(DEQUANT_ARGS) {
    for (int b = 0; b < k / QK_K; b++) {
        const block_q3_k *blk = (const block_q3_k *)w + b;
        int sc[16];
        q3_scales(blk->scales, sc);
        float d = h2f(blk->d);
        for (int g = 0; g < 8; g++)
            for (int pp = 0; pp < 2; pp++, out += 16) {
                float dl = d * (float)sc[2 * g + pp];
                for (int l = 0; l < 16; l++) {
                    int q = (blk->qs[32 * (g / 4) + 16 * pp + l] >> (2 * (g % 4))) & 3;
                    q |= ((blk->hmask[16 * pp + l] >> g) & 1) << 2;
                    out[l] = dl * (float)(q - 4);
                }
            }
    }
}

void dq_iq4_xs(DEQUANT_ARGS) {
    static const int8_t LEVELS[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    for (int b = 0; b < k / QK_K; b++) {
        const block_iq4_xs *blk = (const block_iq4_xs *)w + b;
        float d = h2f(blk->d);
        for (int ib = 0; ib < 8; ib++, out += 32) {
            float dl = d * (float)iq4_xs_scale(blk, ib);
            for (int l = 0; l < 16; l++) {
                out[l] = dl * (float)LEVELS[blk->qs[16 * ib + l] & 15];
                out[l + 16] = dl * (float)LEVELS[blk->qs[16 * ib + l] >> 4];
            }
        }
    }
}
