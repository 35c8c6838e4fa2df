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

/* bit i of each byte of h, as 0x10 or 0 */
INLINE v128_t high_bit(v128_t h, int i) {
    v128_t m = wasm_i8x16_splat((int8_t)(1 << i));
    return wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(h, m), m), wasm_i8x16_splat(0x10));
}

/* ---- Q4_K / Q5_K: chunk c (64 elements) is the low then the high nibbles of qs[32c .. 32c + 32] ------------ */

/* one weight row w by NA activation rows (kernels.h, MATMUL_DRIVER) */
INLINE void q45_k_row(int FIVE, int NA, const uint8_t *w, const uint8_t *arow, size_t astride, int k, float *res) {
    const size_t bs = FIVE ? sizeof(block_q5_k) : sizeof(block_q4_k);
    const size_t qs_at = FIVE ? offsetof(block_q5_k, qs) : offsetof(block_q4_k, qs);
    act_q8k a[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) a[j] = act_q8k_row(arow + j * astride, k);
    v128_t acc[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) acc[j] = wasm_f32x4_splat(0.0f);
    float mins[MAX_NA] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = w + b * bs;
        const uint8_t *qs = blk + qs_at;
        int sc[8], mn[8];
        scale_min_k4(((const block_q4_k *)blk)->scales, sc, mn);
        v128_t h0 = wasm_i8x16_splat(0), h1 = wasm_i8x16_splat(0);
        if (FIVE) {
            h0 = wasm_v128_load(((const block_q5_k *)blk)->qh);
            h1 = wasm_v128_load(((const block_q5_k *)blk)->qh + 16);
        }
        v128_t isum[MAX_NA];
        UNROLL for (int j = 0; j < NA; j++) isum[j] = wasm_i32x4_splat(0);
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
                isum[j] = wasm_i32x4_add(isum[j], widen_scaled(lo, slo));
                isum[j] = wasm_i32x4_add(isum[j], widen_scaled(hi, shi));
            }
        }
        const block_q4_k *head = (const block_q4_k *)blk; /* Q4_K and Q5_K share d, dmin, scales */
        float d = h2f(head->d), dmin = h2f(head->dmin);
        UNROLL for (int j = 0; j < NA; j++) {
            float dx = a[j].d[b];
            acc[j] = wasm_f32x4_add(acc[j], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum[j]), wasm_f32x4_splat(d * dx)));
            mins[j] += dmin * dx * (float)mins_dot(mn, a[j].bsums + 16 * b);
        }
    }
    UNROLL for (int j = 0; j < NA; j++) res[j] = hsum_f32x4(acc[j]) - mins[j];
}

#define Q4_K_ROW(NA, w, arow, as, k, res) q45_k_row(0, NA, w, arow, as, k, res)
#define Q5_K_ROW(NA, w, arow, as, k, res) q45_k_row(1, NA, w, arow, as, k, res)

void mm_q4_k(MATMUL_ARGS) { MATMUL_DRIVER(Q4_K_ROW, (size_t)(k / QK_K) * sizeof(block_q4_k), ACT_Q8K); }
void mm_q5_k(MATMUL_ARGS) { MATMUL_DRIVER(Q5_K_ROW, (size_t)(k / QK_K) * sizeof(block_q5_k), ACT_Q8K); }

void dq_q4_k(const uint8_t *w, float *out, int k) {
    for (int b = 0; b < k / QK_K; b++) {
        const block_q4_k *blk = (const block_q4_k *)w + b;
        int sc[8], mn[8];
        scale_min_k4(blk->scales, sc, mn);
        float d = h2f(blk->d), dmin = h2f(blk->dmin);
        for (int c = 0; c < 4; c++, out += 64) {
            float d0 = d * (float)sc[2 * c], m0 = dmin * (float)mn[2 * c];
            float d1 = d * (float)sc[2 * c + 1], m1 = dmin * (float)mn[2 * c + 1];
            for (int l = 0; l < 32; l++) {
                out[l] = d0 * (float)(blk->qs[32 * c + l] & 15) - m0;
                out[l + 32] = d1 * (float)(blk->qs[32 * c + l] >> 4) - m1;
            }
        }
    }
}

void dq_q5_k(const uint8_t *w, float *out, int k) {
    for (int b = 0; b < k / QK_K; b++) {
        const block_q5_k *blk = (const block_q5_k *)w + b;
        int sc[8], mn[8];
        scale_min_k4(blk->scales, sc, mn);
        float d = h2f(blk->d), dmin = h2f(blk->dmin);
        for (int c = 0; c < 4; c++, out += 64) {
            float d0 = d * (float)sc[2 * c], m0 = dmin * (float)mn[2 * c];
            float d1 = d * (float)sc[2 * c + 1], m1 = dmin * (float)mn[2 * c + 1];
            for (int l = 0; l < 32; l++) {
                int h = blk->qh[l];
                int q0 = (blk->qs[32 * c + l] & 15) | (((h >> (2 * c)) & 1) << 4);
                int q1 = (blk->qs[32 * c + l] >> 4) | (((h >> (2 * c + 1)) & 1) << 4);
                out[l] = d0 * (float)q0 - m0;
                out[l + 32] = d1 * (float)q1 - m1;
            }
        }
    }
}

/* ---- Q6_K: 6-bit quants (low nibble in ql, 2 high bits in qh) offset by 32, int8 scales per 16 ----------- */

/* one weight row w by NA activation rows (kernels.h, MATMUL_DRIVER) */
INLINE void q6_k_row(int NA, const uint8_t *w, const uint8_t *arow, size_t astride, int k, float *res) {
    act_q8k a[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) a[j] = act_q8k_row(arow + j * astride, k);
    v128_t acc[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) acc[j] = wasm_f32x4_splat(0.0f);
    const v128_t three = wasm_i8x16_splat(3);
    for (int b = 0; b < k / QK_K; b++) {
        const block_q6_k *blk = (const block_q6_k *)w + b;
        v128_t scales = wasm_v128_load(blk->scales);
        v128_t sc0 = wasm_i16x8_extend_low_i8x16(scales), sc1 = wasm_i16x8_extend_high_i8x16(scales);
        v128_t isum[MAX_NA];
        UNROLL for (int j = 0; j < NA; j++) { /* the offset: -32 * sum(scale * bsum) */
            v128_t bs0 = wasm_v128_load(a[j].bsums + 16 * b), bs1 = wasm_v128_load(a[j].bsums + 16 * b + 8);
            v128_t off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(bs0, sc0), wasm_i32x4_dot_i16x8(bs1, sc1));
            isum[j] = wasm_i32x4_sub(wasm_i32x4_splat(0), wasm_i32x4_shl(off, 5));
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
                        isum[j] = wasm_i32x4_add(isum[j], widen_scaled(s16, wasm_i16x8_splat(sc[g + 2 * e])));
                    }
                }
            }
        }
        float d = h2f(blk->d);
        UNROLL for (int j = 0; j < NA; j++)
            acc[j] = wasm_f32x4_add(acc[j], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum[j]),
                                                           wasm_f32x4_splat(d * a[j].d[b])));
    }
    UNROLL for (int j = 0; j < NA; j++) res[j] = hsum_f32x4(acc[j]);
}

void mm_q6_k(MATMUL_ARGS) { MATMUL_DRIVER(q6_k_row, (size_t)(k / QK_K) * sizeof(block_q6_k), ACT_Q8K); }

void dq_q6_k(const uint8_t *w, float *out, int k) {
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

/* ---- Q2_K: 2-bit quants, a 4-bit scale and a 4-bit min per 16 elements ----------------------------------- *
 * element 128h + 32j + 16p + l: crumb j of qs[32h + 16p + l], sub-block 8h + 2j + p */

INLINE void q2_k_row(int NA, const uint8_t *w, const uint8_t *arow, size_t astride, int k, float *res) {
    act_q8k a[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) a[j] = act_q8k_row(arow + j * astride, k);
    v128_t acc[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) acc[j] = wasm_f32x4_splat(0.0f);
    const v128_t three = wasm_i8x16_splat(3);
    for (int b = 0; b < k / QK_K; b++) {
        const block_q2_k *blk = (const block_q2_k *)w + b;
        v128_t mins = wasm_u8x16_shr(wasm_v128_load(blk->scales), 4);
        v128_t mn0 = wasm_u16x8_extend_low_u8x16(mins), mn1 = wasm_u16x8_extend_high_u8x16(mins);
        v128_t isum[MAX_NA], msum[MAX_NA];
        UNROLL for (int j = 0; j < NA; j++) {
            const int16_t *bs = a[j].bsums + 16 * b;
            msum[j] = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_load(bs), mn0),
                                     wasm_i32x4_dot_i16x8(wasm_v128_load(bs + 8), mn1));
            isum[j] = wasm_i32x4_splat(0);
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
                    isum[j] = wasm_i32x4_add(isum[j], widen_scaled(dot_u6(c0, wasm_v128_load(x)), s0));
                    isum[j] = wasm_i32x4_add(isum[j], widen_scaled(dot_u6(c1, wasm_v128_load(x + 16)), s1));
                }
            }
        }
        float d = h2f(blk->d), dmin = h2f(blk->dmin);
        UNROLL for (int j = 0; j < NA; j++) {
            float dx = a[j].d[b];
            acc[j] = wasm_f32x4_add(acc[j], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum[j]), wasm_f32x4_splat(d * dx)));
            acc[j] = wasm_f32x4_sub(acc[j],
                                    wasm_f32x4_mul(wasm_f32x4_convert_i32x4(msum[j]), wasm_f32x4_splat(dmin * dx)));
        }
    }
    UNROLL for (int j = 0; j < NA; j++) res[j] = hsum_f32x4(acc[j]);
}

void mm_q2_k(MATMUL_ARGS) { MATMUL_DRIVER(q2_k_row, (size_t)(k / QK_K) * sizeof(block_q2_k), ACT_Q8K); }

void dq_q2_k(const uint8_t *w, float *out, int k) {
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

/* ---- Q3_K: 2-bit quants plus a high bit from hmask (clear: minus 4), 6-bit signed scales per 16 ----------- *
 * element 32g + 16p + l: crumb g % 4 of qs[32 (g / 4) + 16p + l], bit g of hmask[16p + l]; sub-block 2g + p */

INLINE void q3_scales(const uint8_t *s, int *sc) {
    for (int i = 0; i < 16; i++) {
        int low = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
        sc[i] = (low | (((s[8 + i % 4] >> (2 * (i / 4))) & 3) << 4)) - 32;
    }
}

INLINE void q3_k_row(int NA, const uint8_t *w, const uint8_t *arow, size_t astride, int k, float *res) {
    act_q8k a[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) a[j] = act_q8k_row(arow + j * astride, k);
    v128_t acc[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) acc[j] = wasm_f32x4_splat(0.0f);
    const v128_t three = wasm_i8x16_splat(3), one = wasm_i8x16_splat(1);
    for (int b = 0; b < k / QK_K; b++) {
        const block_q3_k *blk = (const block_q3_k *)w + b;
        int sc[16];
        q3_scales(blk->scales, sc);
        v128_t sc0 = wasm_i16x8_make(sc[0], sc[1], sc[2], sc[3], sc[4], sc[5], sc[6], sc[7]);
        v128_t sc1 = wasm_i16x8_make(sc[8], sc[9], sc[10], sc[11], sc[12], sc[13], sc[14], sc[15]);
        v128_t isum[MAX_NA];
        UNROLL for (int j = 0; j < NA; j++) { /* the offset: -4 * sum(scale * bsum) */
            const int16_t *bs = a[j].bsums + 16 * b;
            v128_t off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_load(bs), sc0),
                                        wasm_i32x4_dot_i16x8(wasm_v128_load(bs + 8), sc1));
            isum[j] = wasm_i32x4_sub(wasm_i32x4_splat(0), wasm_i32x4_shl(off, 2));
        }
        v128_t hm[2] = {wasm_v128_load(blk->hmask), wasm_v128_load(blk->hmask + 16)};
        for (int g = 0; g < 8; g++) {
            UNROLL for (int pp = 0; pp < 2; pp++) {
                v128_t q = wasm_v128_and(wasm_u8x16_shr(wasm_v128_load(blk->qs + 32 * (g / 4) + 16 * pp), 2 * (g % 4)),
                                         three);
                q = wasm_v128_or(q, wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(hm[pp], g), one), 2));
                v128_t s = wasm_i16x8_splat((int16_t)sc[2 * g + pp]);
                UNROLL for (int j = 0; j < NA; j++) {
                    const int8_t *x = a[j].qs + QK_K * b + 32 * g + 16 * pp;
                    isum[j] = wasm_i32x4_add(isum[j], widen_scaled(dot_u6(q, wasm_v128_load(x)), s));
                }
            }
        }
        float d = h2f(blk->d);
        UNROLL for (int j = 0; j < NA; j++)
            acc[j] = wasm_f32x4_add(acc[j], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum[j]),
                                                           wasm_f32x4_splat(d * a[j].d[b])));
    }
    UNROLL for (int j = 0; j < NA; j++) res[j] = hsum_f32x4(acc[j]);
}

void mm_q3_k(MATMUL_ARGS) { MATMUL_DRIVER(q3_k_row, (size_t)(k / QK_K) * sizeof(block_q3_k), ACT_Q8K); }

void dq_q3_k(const uint8_t *w, float *out, int k) {
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

/* ---- IQ4_XS: IQ4_NL's 16 levels, a 6-bit scale (offset 32) per 32 elements ---------------------------------- */

INLINE int iq4_xs_scale(const block_iq4_xs *blk, int ib) {
    return (((blk->scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((blk->scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

INLINE void iq4_xs_row(int NA, const uint8_t *w, const uint8_t *arow, size_t astride, int k, float *res) {
    act_q8k a[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) a[j] = act_q8k_row(arow + j * astride, k);
    v128_t acc[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) acc[j] = wasm_f32x4_splat(0.0f);
    const v128_t levels = wasm_i8x16_make(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    for (int b = 0; b < k / QK_K; b++) {
        const block_iq4_xs *blk = (const block_iq4_xs *)w + b;
        v128_t isum[MAX_NA];
        UNROLL for (int j = 0; j < NA; j++) isum[j] = wasm_i32x4_splat(0);
        for (int ib = 0; ib < 8; ib++) {
            v128_t q = wasm_v128_load(blk->qs + 16 * ib);
            v128_t lo = lookup16(levels, wasm_v128_and(q, LOW4)), hi = lookup16(levels, wasm_u8x16_shr(q, 4));
            v128_t s = wasm_i32x4_splat(iq4_xs_scale(blk, ib));
            UNROLL for (int j = 0; j < NA; j++) {
                const int8_t *x = a[j].qs + QK_K * b + 32 * ib;
                v128_t d32 = dot_i8(hi, wasm_v128_load(x + 16), dot_i8(lo, wasm_v128_load(x), wasm_i32x4_splat(0)));
                isum[j] = wasm_i32x4_add(isum[j], wasm_i32x4_mul(d32, s));
            }
        }
        float d = h2f(blk->d);
        UNROLL for (int j = 0; j < NA; j++)
            acc[j] = wasm_f32x4_add(acc[j], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum[j]),
                                                           wasm_f32x4_splat(d * a[j].d[b])));
    }
    UNROLL for (int j = 0; j < NA; j++) res[j] = hsum_f32x4(acc[j]);
}

void mm_iq4_xs(MATMUL_ARGS) { MATMUL_DRIVER(iq4_xs_row, (size_t)(k / QK_K) * sizeof(block_iq4_xs), ACT_Q8K); }

void dq_iq4_xs(const uint8_t *w, float *out, int k) {
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
