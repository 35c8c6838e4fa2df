/* The per-family kernels behind the exported dispatchers (matmul.c). Internal: hidden visibility.
 *
 * A matmul kernel computes out (n, m) = act (n rows, k) . w^T (m rows of k), where `act` holds the n
 * activation rows already converted by act_convert (one every act_stride(kind, k) bytes; for F32 the
 * input rows themselves). A dequantiser writes the k values of one weight row. */
#ifndef LLAMAY_KERNELS_H
#define LLAMAY_KERNELS_H

#include "act.h"

/* Run ROWS over the matrix, 4 weight rows by up to 2 activation rows at a time:
 *   ROWS(NA, p, arow, astride, k, res): weight rows p[0..3] against the NA (1 or 2) activation rows at arow and
 *   arow + astride; res[j] gets the 4 dot products of activation row j.
 * A tile shares each decoded weight block between its activation rows and each activation block between its
 * weight rows; the 4 rows stay in cache across the n activation rows. Past the last row the tile repeats the
 * last one (its results are not stored), so every kernel has one shape. */
#define MATMUL_DRIVER(ROWS, ROW_BYTES, KIND)                                                           \
    do {                                                                                              \
        size_t rb_ = (ROW_BYTES), as_ = act_stride((KIND), k);                                        \
        for (int r_ = 0; r_ < m; r_ += 4) {                                                           \
            const uint8_t *p_[4];                                                                     \
            for (int i_ = 0; i_ < 4; i_++) p_[i_] = w + (size_t)(r_ + i_ < m ? r_ + i_ : m - 1) * rb_; \
            v128_t res_[2];                                                                           \
            int j_ = 0;                                                                               \
            for (; j_ + 2 <= n; j_ += 2) {                                                            \
                ROWS(2, p_, act + (size_t)j_ * as_, as_, k, res_);                                    \
                store_out(out + (size_t)j_ * m + r_, res_[0], m - r_);                                \
                store_out(out + (size_t)(j_ + 1) * m + r_, res_[1], m - r_);                          \
            }                                                                                         \
            if (j_ < n) {                                                                             \
                ROWS(1, p_, act + (size_t)j_ * as_, as_, k, res_);                                    \
                store_out(out + (size_t)j_ * m + r_, res_[0], m - r_);                                \
            }                                                                                         \
        }                                                                                             \
    } while (0)

/* the first min(avail, 4) lanes of v to o */
INLINE void store_out(float *o, v128_t v, int avail) {
    if (avail >= 4) {
        wasm_v128_store(o, v);
        return;
    }
    float t[4];
    wasm_v128_store(t, v);
    for (int i = 0; i < avail; i++) o[i] = t[i];
}

/* the loops over a tile's rows: fully unrolled, so the accumulators stay in registers */
#define UNROLL _Pragma("clang loop unroll(full)")

#define MATMUL_ARGS float *out, const uint8_t *w, const uint8_t *act, int n, int k, int m

/* matmul_float.c */
void mm_f32(MATMUL_ARGS);
void mm_f16(MATMUL_ARGS);
void mm_bf16(MATMUL_ARGS);
void dq_f32(const uint8_t *w, float *out, int k);
void dq_f16(const uint8_t *w, float *out, int k);
void dq_bf16(const uint8_t *w, float *out, int k);

/* matmul_legacy.c */
void mm_q4_0(MATMUL_ARGS);
void mm_q4_1(MATMUL_ARGS);
void mm_q5_0(MATMUL_ARGS);
void mm_q5_1(MATMUL_ARGS);
void mm_q8_0(MATMUL_ARGS);
void mm_iq4_nl(MATMUL_ARGS);
void dq_q4_0(const uint8_t *w, float *out, int k);
void dq_q4_1(const uint8_t *w, float *out, int k);
void dq_q5_0(const uint8_t *w, float *out, int k);
void dq_q5_1(const uint8_t *w, float *out, int k);
void dq_q8_0(const uint8_t *w, float *out, int k);
void dq_iq4_nl(const uint8_t *w, float *out, int k);

/* matmul_kquants.c */
void mm_q4_k(MATMUL_ARGS);
void mm_q5_k(MATMUL_ARGS);
void mm_q6_k(MATMUL_ARGS);
void dq_q4_k(const uint8_t *w, float *out, int k);
void dq_q5_k(const uint8_t *w, float *out, int k);
void dq_q6_k(const uint8_t *w, float *out, int k);

#endif
