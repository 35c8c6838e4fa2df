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

/* one weight row w by NA activation rows (kernels.h, MATMUL_DRIVER) */
INLINE void float_row(int T, int NA, const uint8_t *w, const uint8_t *arow, size_t astride, int k, float *res) {
    const float *x[MAX_NA];
    UNROLL for (int j = 0; j < NA; j++) x[j] = (const float *)(arow + j * astride);
    const size_t es = T == T_F32 ? 4 : 2; /* bytes per weight */
    v128_t acc[MAX_NA][2];
    UNROLL for (int j = 0; j < NA; j++) acc[j][0] = acc[j][1] = wasm_f32x4_splat(0.0f);
    int i = 0;
    for (; i + 8 <= k; i += 8) {
        const uint8_t *wp = w + i * es;
        v128_t lo, hi;
        if (T == T_F32)
            load8_f32(wp, &lo, &hi);
        else if (T == T_F16)
            load8_f16(wp, &lo, &hi);
        else
            load8_bf16(wp, &lo, &hi);
        UNROLL for (int j = 0; j < NA; j++) {
            acc[j][0] = wasm_f32x4_add(acc[j][0], wasm_f32x4_mul(lo, wasm_v128_load(x[j] + i)));
            acc[j][1] = wasm_f32x4_add(acc[j][1], wasm_f32x4_mul(hi, wasm_v128_load(x[j] + i + 4)));
        }
    }
    UNROLL for (int j = 0; j < NA; j++) {
        float t = hsum_f32x4(wasm_f32x4_add(acc[j][0], acc[j][1]));
        for (int e = i; e < k; e++) t += load1(T, w + e * es) * x[j][e];
        res[j] = t;
    }
}

void mm_f32(MATMUL_ARGS) { MATMUL_DRIVER(float_row, T_F32); }

void dq_f32(DEQUANT_ARGS) { __builtin_memcpy(out, w, 4 * (size_t)k); }

void mm_f16(MATMUL_ARGS) { MATMUL_DRIVER(float_row, T_F16); }

void dq_f16(DEQUANT_ARGS) {
    for (int i = 0; i < k; i++) out[i] = h2f(load_u16(w + 2 * i));
}

void mm_bf16(MATMUL_ARGS) { MATMUL_DRIVER(float_row, T_BF16); }

void dq_bf16(DEQUANT_ARGS) {
    for (int i = 0; i < k; i++) out[i] = bf2f(load_u16(w + 2 * i));
}
