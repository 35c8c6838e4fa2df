/* Rounding activation rows to each weight type's vec_dot_type, bit for bit as llamay/kernels/activations.py
 * (and llama.cpp's CPU backend on x86): the same float32 operations in the same order. Q8_0/Q8_1 take ggml's
 * AVX2 path (inverse scale 127/amax, round half to even), Q8_K its reference (-127/max, half to even); fp16
 * and bf16 round to nearest even. */
#include "traits.h"

/* eight i32x4 of small integers -> 32 int8, stored; returns their sum */
INLINE int32_t store_q8x32(const v128_t *q, int8_t *out) {
    for (int h = 0; h < 2; h++) {
        v128_t a = wasm_i16x8_narrow_i32x4(q[4 * h], q[4 * h + 1]);
        v128_t b = wasm_i16x8_narrow_i32x4(q[4 * h + 2], q[4 * h + 3]);
        wasm_v128_store(out + 16 * h, wasm_i8x16_narrow_i16x8(a, b));
    }
    v128_t s = wasm_i32x4_add(wasm_i32x4_add(q[0], q[1]), wasm_i32x4_add(q[2], q[3]));
    s = wasm_i32x4_add(s, wasm_i32x4_add(wasm_i32x4_add(q[4], q[5]), wasm_i32x4_add(q[6], q[7])));
    return hsum_i32x4(s);
}

/* one row to ACT_Q8: per 32 values d = amax/127, q = nearest_even(x * (127/amax)); d kept fp16-rounded,
 * s = fp16(d*sum(q)) */
static void quantize_q8(const float *x, int k, uint8_t *row) {
    int nb = k / QK;
    int8_t *qs = (int8_t *)row;
    float *dd = (float *)(row + k);
    int32_t *sums = (int32_t *)(row + k + 4 * nb);
    float *ss = (float *)(row + k + 8 * nb);
    for (int b = 0; b < nb; b++) {
        const float *xb = x + b * QK;
        v128_t v[8];
        v128_t m = wasm_f32x4_splat(0.0f);
        for (int i = 0; i < 8; i++) {
            v[i] = wasm_v128_load(xb + 4 * i);
            m = wasm_f32x4_max(m, wasm_f32x4_abs(v[i]));
        }
        float amax = max_f32x4(m);
        float d = amax / 127.0f;
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        v128_t vid = wasm_f32x4_splat(id);
        v128_t q[8];
        for (int i = 0; i < 8; i++) q[i] = wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(wasm_f32x4_mul(v[i], vid)));
        int32_t sum = store_q8x32(q, qs + b * QK);
        dd[b] = round_half(d);
        sums[b] = sum;
        ss[b] = round_half((float)sum * d);
    }
}

/* one row to ACT_Q8K: per 256 values iscale = -127/max (max: the first value of largest magnitude),
 * q = min(127, nearest_even(iscale*x)), d = 1/iscale; bsums by 16 */
static void quantize_q8k(const float *x, int k, uint8_t *row) {
    int nk = k / QK_K;
    int8_t *qs = (int8_t *)row;
    float *dd = (float *)(row + k);
    int16_t *bsums = (int16_t *)(row + k + 4 * nk);
    for (int b = 0; b < nk; b++) {
        const float *xb = x + b * QK_K;
        v128_t m = wasm_f32x4_splat(0.0f);
        for (int i = 0; i < QK_K; i += 4) m = wasm_f32x4_max(m, wasm_f32x4_abs(wasm_v128_load(xb + i)));
        float amax = max_f32x4(m);
        int8_t *qb = qs + b * QK_K;
        int16_t *sb = bsums + b * (QK_K / 16);
        if (amax == 0.0f) {
            dd[b] = 0.0f;
            __builtin_memset(qb, 0, QK_K);
            __builtin_memset(sb, 0, 2 * (QK_K / 16));
            continue;
        }
        float vmax = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            if (__builtin_fabsf(xb[j]) == amax) {
                vmax = xb[j];
                break;
            }
        }
        float iscale = -127.0f / vmax;
        v128_t vs = wasm_f32x4_splat(iscale);
        v128_t lim = wasm_i32x4_splat(127);
        for (int g = 0; g < QK_K / 16; g++) {
            v128_t q[4];
            for (int i = 0; i < 4; i++) {
                v128_t y = wasm_f32x4_nearest(wasm_f32x4_mul(vs, wasm_v128_load(xb + 16 * g + 4 * i)));
                q[i] = wasm_i32x4_min(wasm_i32x4_trunc_sat_f32x4(y), lim);
            }
            v128_t a = wasm_i16x8_narrow_i32x4(q[0], q[1]);
            v128_t c = wasm_i16x8_narrow_i32x4(q[2], q[3]);
            wasm_v128_store(qb + 16 * g, wasm_i8x16_narrow_i16x8(a, c));
            sb[g] = (int16_t)hsum_i32x4(wasm_i32x4_add(wasm_i32x4_add(q[0], q[1]), wasm_i32x4_add(q[2], q[3])));
        }
        dd[b] = 1.0f / iscale;
    }
}

static void round_f16(const float *x, int k, float *out) {
    for (int i = 0; i < k; i++) out[i] = round_half(x[i]);
}

static void round_bf16(const float *x, int k, float *out) {
    for (int i = 0; i < k; i++) {
        uint32_t u = f32_bits(x[i]);
        if ((u & 0x7fffffffu) > 0x7f800000u) u = (u & 0xffff0000u) | 0x00400000u;
        out[i] = bits_f32(((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) << 16);
    }
}

void act_convert(int kind, const float *x, int n, int k, uint8_t *scratch) {
    size_t stride = act_stride(kind, k);
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * k;
        uint8_t *row = scratch + (size_t)i * stride;
        switch (kind) {
        case ACT_Q8:
            quantize_q8(xi, k, row);
            break;
        case ACT_Q8K:
            quantize_q8k(xi, k, row);
            break;
        case ACT_F16:
            round_f16(xi, k, (float *)row);
            break;
        case ACT_BF16:
            round_bf16(xi, k, (float *)row);
            break;
        default:
            __builtin_memcpy(row, xi, 4 * (size_t)k);
        }
    }
}

/* Scratch bytes a matmul of n rows of k needs for weight type `type` (-1: type not supported). */
EXPORT int32_t llamay_act_bytes(int32_t type, int32_t n, int32_t k) {
    int kind = act_kind(type);
    if (kind < 0) return -1;
    return (int32_t)(act_stride(kind, k) * (size_t)n);
}

/* For tests: one row x (k) as the dot products of `type` see it: out[i] = the rounded value (d*q for the
 * 8-bit kinds, exact in float32 for Q8_0/Q8_1; float32 d*q for Q8_K) and, for Q8_0/Q8_1, s_out[b] = Q8_1's
 * s of block b. Uses act_bytes(type, 1, k) bytes of scratch. Returns the activation kind, or -1. */
EXPORT int32_t llamay_round_row(int32_t type, const float *x, int32_t k, float *out, float *s_out,
                                uint8_t *scratch) {
    int kind = act_kind(type);
    if (kind < 0) return -1;
    act_convert(kind, x, 1, k, scratch);
    if (kind == ACT_Q8) {
        act_q8 a = act_q8_row(scratch, k);
        for (int i = 0; i < k; i++) out[i] = a.d[i / QK] * (float)a.qs[i];
        for (int b = 0; b < k / QK; b++) s_out[b] = a.s[b];
    } else if (kind == ACT_Q8K) {
        act_q8k a = act_q8k_row(scratch, k);
        for (int i = 0; i < k; i++) out[i] = a.d[i / QK_K] * (float)a.qs[i];
        for (int g = 0; g < k / 16; g++) s_out[g] = (float)a.bsums[g];
    } else {
        __builtin_memcpy(out, scratch, 4 * (size_t)k);
    }
    return kind;
}
