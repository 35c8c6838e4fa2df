/* Float weights: F32, F16, BF16. The activation row is rounded to the weight's precision first (ACT_F16,
 * ACT_BF16; F32 reads the input rows as they are), then the dot runs in float32, 8 elements a step. */
#include "kernels.h"

/* the 8 weights at p as two float32x4 */
INLINE void load8_f32(const uint8_t *p, v128_t *lo, v128_t *hi) {
    *lo = wasm_v128_load(p);
    *hi = wasm_v128_load(p + 16);
}

INLINE void load8_f16(const uint8_t *p, v128_t *lo, v128_t *hi) {
    v128_t h = wasm_v128_load(p);
    *lo = h2f_x4_at13(wasm_i32x4_shl(wasm_i32x4_extend_low_i16x8(h), 13));
    *hi = h2f_x4_at13(wasm_i32x4_shl(wasm_i32x4_extend_high_i16x8(h), 13));
}

INLINE void load8_bf16(const uint8_t *p, v128_t *lo, v128_t *hi) {
    v128_t h = wasm_v128_load(p);
    *lo = wasm_i32x4_shl(wasm_u32x4_extend_low_u16x8(h), 16);
    *hi = wasm_i32x4_shl(wasm_u32x4_extend_high_u16x8(h), 16);
}

INLINE float load1(int T, const uint8_t *p) {
    if (T == T_F32) return *(const float *)p;
    if (T == T_F16) return h2f(load_u16(p));
    return bf2f(load_u16(p));
}

/* 4 weight rows p[0..3] by NA activation rows (kernels.h, MATMUL_DRIVER) */
INLINE void float_rows(int T, int NA, const uint8_t *const *p, const uint8_t *arow, size_t astride, int k,
                       v128_t *res) {
    const float *x[2] = {(const float *)arow, (const float *)(arow + astride)};
    const size_t es = T == T_F32 ? 4 : 2; /* bytes per weight */
    v128_t acc[2][4];
    UNROLL for (int j = 0; j < 2; j++) UNROLL for (int r = 0; r < 4; r++) acc[j][r] = wasm_f32x4_splat(0.0f);
    int i = 0;
    for (; i + 8 <= k; i += 8) {
        UNROLL for (int r = 0; r < 4; r++) {
            const uint8_t *wp = p[r] + i * es;
            v128_t lo, hi;
            if (T == T_F32)
                load8_f32(wp, &lo, &hi);
            else if (T == T_F16)
                load8_f16(wp, &lo, &hi);
            else
                load8_bf16(wp, &lo, &hi);
            UNROLL for (int j = 0; j < NA; j++) {
                v128_t prod = wasm_f32x4_add(wasm_f32x4_mul(lo, wasm_v128_load(x[j] + i)),
                                             wasm_f32x4_mul(hi, wasm_v128_load(x[j] + i + 4)));
                acc[j][r] = wasm_f32x4_add(acc[j][r], prod);
            }
        }
    }
    float tail[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    for (; i < k; i++)
        UNROLL for (int r = 0; r < 4; r++) {
            float wv = load1(T, p[r] + i * es);
            UNROLL for (int j = 0; j < NA; j++) tail[j][r] += wv * x[j][i];
        }
    UNROLL for (int j = 0; j < NA; j++)
        res[j] = wasm_f32x4_add(hsum4_f32x4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]), wasm_v128_load(tail[j]));
}

#define F32_ROWS(NA, p, arow, as, k, res) float_rows(T_F32, NA, p, arow, as, k, res)
#define F16_ROWS(NA, p, arow, as, k, res) float_rows(T_F16, NA, p, arow, as, k, res)
#define BF16_ROWS(NA, p, arow, as, k, res) float_rows(T_BF16, NA, p, arow, as, k, res)

void mm_f32(MATMUL_ARGS) { MATMUL_DRIVER(F32_ROWS, 4 * (size_t)k, ACT_F32); }
void mm_f16(MATMUL_ARGS) { MATMUL_DRIVER(F16_ROWS, 2 * (size_t)k, ACT_F16); }
void mm_bf16(MATMUL_ARGS) { MATMUL_DRIVER(BF16_ROWS, 2 * (size_t)k, ACT_BF16); }

void dq_f32(const uint8_t *w, float *out, int k) { __builtin_memcpy(out, w, 4 * (size_t)k); }

void dq_f16(const uint8_t *w, float *out, int k) {
    for (int i = 0; i < k; i++) out[i] = h2f(load_u16(w + 2 * i));
}

void dq_bf16(const uint8_t *w, float *out, int k) {
    for (int i = 0; i < k; i++) out[i] = bf2f(load_u16(w + 2 * i));
}
