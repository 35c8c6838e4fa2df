/* The k-quants against Q8_K activations: Q4_K Q5_K Q6_K (256-element super-blocks).
 *
 * Within a super-block every sub-block (32 or 16 elements) has a small integer scale: the integer dots of the
 * sub-blocks are summed with their scales in i32 (i32x4.dot_i16x8 applies the scale while widening), and
 * only then does one float step per super-block apply d_w * d_x. Mins (Q4_K, Q5_K) and Q6_K's offset of 32
 * come off through Q8_K's bsums (sums of the activation quants by 16). */
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

/* 4 weight rows p[0..3] by NA activation rows (kernels.h, MATMUL_DRIVER) */
INLINE void q45_k_rows(int FIVE, int NA, const uint8_t *const *p, const uint8_t *arow, size_t astride, int k,
                       v128_t *res) {
    const size_t bs = FIVE ? sizeof(block_q5_k) : sizeof(block_q4_k);
    const size_t qs_at = FIVE ? offsetof(block_q5_k, qs) : offsetof(block_q4_k, qs);
    act_q8k a[2] = {act_q8k_row(arow, k), act_q8k_row(arow + astride, k)};
    v128_t acc[2] = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    for (int b = 0; b < k / QK_K; b++) {
        v128_t isum[2][4];
        int msum[2][4];
        UNROLL for (int r = 0; r < 4; r++) {
            const uint8_t *blk = p[r] + b * bs;
            const uint8_t *qs = blk + qs_at;
            int sc[8], mn[8];
            scale_min_k4(((const block_q4_k *)blk)->scales, sc, mn);
            v128_t h0 = wasm_i8x16_splat(0), h1 = wasm_i8x16_splat(0);
            if (FIVE) {
                h0 = wasm_v128_load(((const block_q5_k *)blk)->qh);
                h1 = wasm_v128_load(((const block_q5_k *)blk)->qh + 16);
            }
            UNROLL for (int j = 0; j < NA; j++) isum[j][r] = wasm_i32x4_splat(0);
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
                    v128_t hi =
                        wasm_i16x8_add(dot_u6(u0, wasm_v128_load(xc + 32)), dot_u6(u1, wasm_v128_load(xc + 48)));
                    isum[j][r] = wasm_i32x4_add(isum[j][r], widen_scaled(lo, slo));
                    isum[j][r] = wasm_i32x4_add(isum[j][r], widen_scaled(hi, shi));
                }
            }
            UNROLL for (int j = 0; j < NA; j++) msum[j][r] = mins_dot(mn, a[j].bsums + 16 * b);
        }
        v128_t dd = gather4_u32(p, b * bs); /* d and dmin */
        v128_t d = h2f_x4_lo(dd), dmin = h2f_x4_hi(dd);
        UNROLL for (int j = 0; j < NA; j++) {
            v128_t dx = wasm_f32x4_splat(a[j].d[b]);
            v128_t s = wasm_f32x4_convert_i32x4(hsum4_i32x4(isum[j][0], isum[j][1], isum[j][2], isum[j][3]));
            v128_t m = wasm_f32x4_convert_i32x4(wasm_i32x4_make(msum[j][0], msum[j][1], msum[j][2], msum[j][3]));
            acc[j] = wasm_f32x4_add(acc[j], wasm_f32x4_mul(s, wasm_f32x4_mul(d, dx)));
            acc[j] = wasm_f32x4_sub(acc[j], wasm_f32x4_mul(m, wasm_f32x4_mul(dmin, dx)));
        }
    }
    UNROLL for (int j = 0; j < NA; j++) res[j] = acc[j];
}

#define Q4_K_ROWS(NA, p, arow, as, k, res) q45_k_rows(0, NA, p, arow, as, k, res)
#define Q5_K_ROWS(NA, p, arow, as, k, res) q45_k_rows(1, NA, p, arow, as, k, res)

void mm_q4_k(MATMUL_ARGS) { MATMUL_DRIVER(Q4_K_ROWS, (size_t)(k / QK_K) * sizeof(block_q4_k), ACT_Q8K); }
void mm_q5_k(MATMUL_ARGS) { MATMUL_DRIVER(Q5_K_ROWS, (size_t)(k / QK_K) * sizeof(block_q5_k), ACT_Q8K); }

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

/* 4 weight rows p[0..3] by NA activation rows (kernels.h, MATMUL_DRIVER) */
INLINE void q6_k_rows(int NA, const uint8_t *const *p, const uint8_t *arow, size_t astride, int k, v128_t *res) {
    act_q8k a[2] = {act_q8k_row(arow, k), act_q8k_row(arow + astride, k)};
    v128_t acc[2] = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    const v128_t three = wasm_i8x16_splat(3);
    for (int b = 0; b < k / QK_K; b++) {
        v128_t isum[2][4];
        UNROLL for (int r = 0; r < 4; r++) {
            const block_q6_k *blk = (const block_q6_k *)p[r] + b;
            v128_t scales = wasm_v128_load(blk->scales);
            v128_t sc0 = wasm_i16x8_extend_low_i8x16(scales), sc1 = wasm_i16x8_extend_high_i8x16(scales);
            UNROLL for (int j = 0; j < NA; j++) { /* the offset: -32 * sum(scale * bsum) */
                v128_t bs0 = wasm_v128_load(a[j].bsums + 16 * b), bs1 = wasm_v128_load(a[j].bsums + 16 * b + 8);
                v128_t off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(bs0, sc0), wasm_i32x4_dot_i16x8(bs1, sc1));
                isum[j][r] = wasm_i32x4_sub(wasm_i32x4_splat(0), wasm_i32x4_shl(off, 5));
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
                            isum[j][r] = wasm_i32x4_add(isum[j][r], widen_scaled(s16, wasm_i16x8_splat(sc[g + 2 * e])));
                        }
                    }
                }
            }
        }
        v128_t d = h2f_x4_lo(gather4_u16(p, b * sizeof(block_q6_k) + offsetof(block_q6_k, d)));
        UNROLL for (int j = 0; j < NA; j++) {
            v128_t s = wasm_f32x4_convert_i32x4(hsum4_i32x4(isum[j][0], isum[j][1], isum[j][2], isum[j][3]));
            acc[j] = wasm_f32x4_add(acc[j], wasm_f32x4_mul(s, wasm_f32x4_mul(d, wasm_f32x4_splat(a[j].d[b]))));
        }
    }
    UNROLL for (int j = 0; j < NA; j++) res[j] = acc[j];
}

void mm_q6_k(MATMUL_ARGS) { MATMUL_DRIVER(q6_k_rows, (size_t)(k / QK_K) * sizeof(block_q6_k), ACT_Q8K); }

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
