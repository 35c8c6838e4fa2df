/* The per-family kernels behind the exported dispatchers (matmul.c). Internal: hidden visibility.
 *
 * A matmul kernel computes out (n, m) = act (n rows, k) . w^T (m rows of k), where `act` holds the n
 * activation rows already converted by act_convert (one every act_stride(kind, k) bytes; for F32 the
 * input rows themselves). A dequantiser writes the k values of one weight row. */
#ifndef LLAMAY_KERNELS_H
#define LLAMAY_KERNELS_H

#include "act.h"

/* Run ROW over the matrix, one weight row against up to 4 activation rows at a time:
 *   ROW(NA, wrow, arow, astride, k, res): weight row wrow against the NA (1, 2 or 4) activation rows at arow +
 *   j * astride; res[j] gets the dot product with activation row j.
 * One weight row at a time keeps the reads of the weights one sequential stream: interleaving the blocks of
 * several rows measured ~3.5x slower once a matrix no longer fits in cache (the hardware prefetcher loses the
 * streams), which every model-sized matrix does. The row stays in L1 across the n activation rows. */
#define MATMUL_DRIVER(ROW, ROW_BYTES, KIND)                                                            \
    do {                                                                                              \
        size_t rb_ = (ROW_BYTES), as_ = act_stride((KIND), k);                                        \
        for (int r_ = 0; r_ < m; r_++) {                                                              \
            const uint8_t *wr_ = w + (size_t)r_ * rb_;                                                \
            float res_[4];                                                                            \
            int j_ = 0;                                                                               \
            for (; j_ + 4 <= n; j_ += 4) {                                                            \
                ROW(4, wr_, act + (size_t)j_ * as_, as_, k, res_);                                    \
                for (int i_ = 0; i_ < 4; i_++) out[(size_t)(j_ + i_) * m + r_] = res_[i_];            \
            }                                                                                         \
            for (; j_ + 2 <= n; j_ += 2) {                                                            \
                ROW(2, wr_, act + (size_t)j_ * as_, as_, k, res_);                                    \
                out[(size_t)j_ * m + r_] = res_[0];                                                   \
                out[(size_t)(j_ + 1) * m + r_] = res_[1];                                             \
            }                                                                                         \
            if (j_ < n) {                                                                             \
                ROW(1, wr_, act + (size_t)j_ * as_, as_, k, res_);                                    \
                out[(size_t)j_ * m + r_] = res_[0];                                                   \
            }                                                                                         \
        }                                                                                             \
    } while (0)

#define MAX_NA 4 /* activation rows a kernel call takes at most */

/* the first `cnt` (1..4) floats / ints at p, zeros after */
INLINE v128_t load4_f32(const float *p, int cnt) {
    if (cnt >= 4) return wasm_v128_load(p);
    return wasm_f32x4_make(p[0], cnt > 1 ? p[1] : 0.0f, cnt > 2 ? p[2] : 0.0f, 0.0f);
}

INLINE v128_t load4_i32(const int32_t *p, int cnt) {
    if (cnt >= 4) return wasm_v128_load(p);
    return wasm_i32x4_make(p[0], cnt > 1 ? p[1] : 0, cnt > 2 ? p[2] : 0, 0);
}

/* the loops over a kernel's activation rows and blocks: fully unrolled, so the accumulators stay in registers */
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
void mm_q2_k(MATMUL_ARGS);
void mm_q3_k(MATMUL_ARGS);
void mm_iq4_xs(MATMUL_ARGS);
void dq_q2_k(const uint8_t *w, float *out, int k);
void dq_q3_k(const uint8_t *w, float *out, int k);
void dq_iq4_xs(const uint8_t *w, float *out, int k);
void mm_q4_k(MATMUL_ARGS);
void mm_q5_k(MATMUL_ARGS);
void mm_q6_k(MATMUL_ARGS);
void dq_q4_k(const uint8_t *w, float *out, int k);
void dq_q5_k(const uint8_t *w, float *out, int k);
void dq_q6_k(const uint8_t *w, float *out, int k);

#endif
