/* The per-family kernels behind the exported dispatchers (matmul.c). Internal: hidden visibility.
 *
 * A matmul kernel computes out (n, m) = act (n rows, k) . w^T (m rows of k), out's rows ldo apart, where `act` holds the n
 * activation rows already converted by act_convert (one every act_stride(kind, k) bytes; for F32 the
 * input rows themselves). A dequantiser writes the k values of one weight row. */
#ifndef LLAMAY_KERNELS_H
#define LLAMAY_KERNELS_H

#include "traits.h"

/* Run a family's row kernel ROW over the matrix of weight type T (its row bytes and activation format from its
 * traits), one weight row against up to 4 activation rows at a time:
 *   ROW(T, NA, wrow, arow, astride, k, res): weight row wrow against the NA (1, 2 or 4) activation rows at arow +
 *   j * astride; res[j] gets the dot product with activation row j.
 * One weight row at a time keeps the reads of the weights one sequential stream: interleaving the blocks of
 * several rows measured ~3.5x slower once a matrix no longer fits in cache (the hardware prefetcher loses the
 * streams), which every model-sized matrix does. The row stays in L1 across the n activation rows. */
#define MATMUL_DRIVER(ROW, T)                                                                          \
    do {                                                                                              \
        size_t rb_ = (size_t)(k / TYPE_TRAITS[T].elements) * (size_t)TYPE_TRAITS[T].bytes;          \
        size_t as_ = act_stride(TYPE_TRAITS[T].act, k);                                               \
        for (int r_ = 0; r_ < m; r_++) {                                                              \
            const uint8_t *wr_ = w + (size_t)r_ * rb_;                                                \
            float res_[4];                                                                            \
            int j_ = 0;                                                                               \
            for (; j_ + 4 <= n; j_ += 4) {                                                            \
                ROW(T, 4, wr_, act + (size_t)j_ * as_, as_, k, res_);                                    \
                store_column(out, ldo, r_, j_, res_, 4);                                              \
            }                                                                                         \
            if (j_ + 2 <= n) {                                                                        \
                ROW(T, 2, wr_, act + (size_t)j_ * as_, as_, k, res_);                                    \
                store_column(out, ldo, r_, j_, res_, 2);                                              \
                j_ += 2;                                                                              \
            }                                                                                         \
            if (j_ < n) {                                                                             \
                ROW(T, 1, wr_, act + (size_t)j_ * as_, as_, k, res_);                                    \
                store_column(out, ldo, r_, j_, res_, 1);                                              \
            }                                                                                         \
        }                                                                                             \
    } while (0)

/* out[(j + i) * ldo + r] = res[i] for i < cnt: weight row r's results for activation rows j .. j + cnt */
INLINE void store_column(float *out, int ldo, int r, int j, const float *res, int cnt) {
    for (int i = 0; i < cnt; i++) out[(size_t)(j + i) * ldo + r] = res[i];
}

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

/* m weight rows from w into columns 0..m of out, whose rows are ldo floats apart (ldo > m: a slice of the rows,
 * llamay_exec_part) */
#define MATMUL_ARGS float *out, const uint8_t *w, const uint8_t *act, int n, int k, int m, int ldo
#define DEQUANT_ARGS const uint8_t *w, float *out, int k

/* each type's kernels, defined in its family's matmul_*.c: mm_<name> (MATMUL_DRIVER over its row kernel) and
 * dq_<name> (one row dequantised, the same float operations as llamay.quants) */
#define DECLARE_KERNELS(T, name, elements, act)                                                                    \
    void mm_##name(MATMUL_ARGS);                                                                                   \
    void dq_##name(DEQUANT_ARGS);
KERNEL_TYPES(DECLARE_KERNELS)

int32_t llamay_act_bytes(int32_t type, int32_t n, int32_t k);
void attention_units(float *out, const float *q, const float *k_cache, const float *v_cache, int32_t layer,
                     int32_t n_slots, int32_t n, const int32_t *pos, const int32_t *seq, const int32_t *pages,
                     const int32_t *page_off, const int32_t *seq_len, int32_t page_size, int32_t n_head,
                     int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v, float kq_scale, int32_t causal,
                     int32_t window, float softcap, float max_bias, const float *sinks, int32_t per, int32_t u_first,
                     int32_t u_end, int32_t step);
/* how llamay_exec_part splits a command over the kernel threads (exec.c) */
enum { SPLIT_NONE, SPLIT_MATMUL, SPLIT_ATTENTION, SPLIT_ELEMENTS };
/* a byte range a split command reads or writes; width: whose share of it a part touches (exec.c) */
typedef struct {
    uint32_t lo, hi, width, write;
} access;
int32_t split_kind(const int32_t *c);
int32_t command_accesses(const int32_t *c, access *acc);
int32_t matmul_rows(int32_t type, float *out, const uint8_t *w, const float *x, int32_t n, int32_t k, int32_t m,
                    uint8_t *scratch, int32_t lo, int32_t hi);

#endif
