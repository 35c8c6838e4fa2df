/* Norms, rotary embedding, elementwise activations and reductions over float32 buffers.
 *
 * Where llamay's portable backend computes in double (norm statistics, the rotary products, scale), these do
 * too, so results round the same way; SiLU uses float32 exp_x4, GELU ggml's fp16 table. */
#include "common.h"
#include "mathf.h"

#define GELU_CLAMP 10.0f                      /* ggml's table covers (-10, 10) */
#define F16_MIN_NORMAL_AS_F32_BITS 0x38800000u /* 2^-14: below it fp16 is subnormal */
#define F16_REBIAS ((127u - 15u) << 10)       /* float32 exponent bias minus fp16's, in fp16 position */

/* apply F to count floats of x (and y, z) 4 at a time, the tail through a padded copy */
#define FOR_X4(count, BODY)                                                                             \
    do {                                                                                                \
        int i_ = 0;                                                                                     \
        for (; i_ + 4 <= (count); i_ += 4) BODY(i_, 4);                                                 \
        if (i_ < (count)) BODY(i_, (count) - i_);                                                       \
    } while (0)

INLINE v128_t load_n(const float *p, int n) {
    if (n == 4) return wasm_v128_load(p);
    float t[4] = {0, 0, 0, 0};
    for (int i = 0; i < n; i++) t[i] = p[i];
    return wasm_v128_load(t);
}

INLINE void store_n(float *p, v128_t v, int n) {
    if (n == 4) {
        wasm_v128_store(p, v);
        return;
    }
    float t[4];
    wasm_v128_store(t, v);
    for (int i = 0; i < n; i++) p[i] = t[i];
}

/* sum of squares in double, 4 floats a step */
static double sum_squares(const float *x, int dim) {
    v128_t a = wasm_f64x2_splat(0.0), b = wasm_f64x2_splat(0.0);
    int i = 0;
    for (; i + 4 <= dim; i += 4) {
        v128_t v = wasm_v128_load(x + i);
        v128_t lo = wasm_f64x2_promote_low_f32x4(v);
        v128_t hi = wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
        a = wasm_f64x2_add(a, wasm_f64x2_mul(lo, lo));
        b = wasm_f64x2_add(b, wasm_f64x2_mul(hi, hi));
    }
    v128_t s = wasm_f64x2_add(a, b);
    double t = wasm_f64x2_extract_lane(s, 0) + wasm_f64x2_extract_lane(s, 1);
    for (; i < dim; i++) t += (double)x[i] * (double)x[i];
    return t;
}

/* out (n, dim) = x / sqrt(mean(x^2) + eps) * w (w may be 0: no scale) */
EXPORT void llamay_rms_norm(float *out, const float *x, const float *w, int32_t n, int32_t dim, double eps) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * dim;
        float *o = out + (size_t)r * dim;
        double s = 1.0 / __builtin_sqrt(sum_squares(xr, dim) / dim + eps);
        for (int i = 0; i < dim; i++) {
            float v = (float)((double)xr[i] * s);
            o[i] = w ? v * w[i] : v;
        }
    }
}

/* out (n, dim) = (x - mean) / sqrt(var + eps) * w + b (b may be 0) */
EXPORT void llamay_layer_norm(float *out, const float *x, const float *w, const float *b, int32_t n, int32_t dim,
                              double eps) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * dim;
        float *o = out + (size_t)r * dim;
        double sum = 0.0;
        for (int i = 0; i < dim; i++) sum += xr[i];
        double mean = sum / dim;
        double var = 0.0;
        for (int i = 0; i < dim; i++) {
            float c = (float)(xr[i] - mean);
            o[i] = c;
            var += (double)c * c;
        }
        double s = 1.0 / __builtin_sqrt(var / dim + eps);
        for (int i = 0; i < dim; i++) {
            float y = (float)((double)o[i] * s * (double)w[i]);
            o[i] = b ? y + b[i] : y;
        }
    }
}

/* x (n, dim) += b */
EXPORT void llamay_add_bias(float *x, const float *b, int32_t n, int32_t dim) {
    for (int r = 0; r < n; r++) {
        float *xr = x + (size_t)r * dim;
        int i = 0;
        for (; i + 4 <= dim; i += 4)
            wasm_v128_store(xr + i, wasm_f32x4_add(wasm_v128_load(xr + i), wasm_v128_load(b + i)));
        for (; i < dim; i++) xr[i] += b[i];
    }
}

/* In place rotary embedding of x (n, n_heads * head_dim) at positions pos; theta_scale = base^(-2/n_rot)
 * as a float32 (the caller rounds it), freq (n_rot/2 factors) may be 0. Pairs (j, j + n_rot/2) when neox,
 * else (2j, 2j + 1). As portable: theta in float32, theta / freq * scale rounded to float32, sin and cos in
 * double, the rotation in double rounded once. With ext_factor, YaRN: that angle mixed in float32 with the
 * unscaled one by ggml's ramp between corr_low and corr_high; cos and sin times mscale. */
EXPORT void llamay_rope(float *x, const int32_t *pos, int32_t n, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                        float theta_scale, double scale, int32_t neox, const float *freq, float ext_factor,
                        float mscale, float corr_low, float corr_high) {
    int half = n_rot / 2;
    float ramp_width = corr_high - corr_low > 0.001f ? corr_high - corr_low : 0.001f;
    for (int i = 0; i < n; i++) {
        float theta = (float)pos[i];
        float *row = x + (size_t)i * n_heads * head_dim;
        for (int j = 0; j < half; j++) {
            double t = freq ? (double)theta / (double)freq[j] : (double)theta;
            float tf = (float)(t * scale);
            if (ext_factor != 0.0f) {
                float y = ((float)j - corr_low) / ramp_width;
                float ramp = 1.0f - (y < 0.0f ? 0.0f : y > 1.0f ? 1.0f : y);
                float mix = ramp * ext_factor;
                tf = tf * (1.0f - mix) + (float)t * mix;
            }
            double s, c;
            sincos_d((double)tf, &s, &c);
            s *= mscale;
            c *= mscale;
            theta = theta * theta_scale;
            int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
            for (int h = 0; h < n_heads; h++) {
                float *o = row + h * head_dim;
                double x0 = o[a], x1 = o[b];
                o[a] = (float)(x0 * c - x1 * s);
                o[b] = (float)(x0 * s + x1 * c);
            }
        }
    }
}

/* x[0..count) clamped to [lo, hi] (ggml_clamp: MAX(MIN(x, hi), lo), the bounds as float32) */
EXPORT void llamay_clamp(float *x, double lo, double hi, int32_t count) {
    float l = (float)lo, h = (float)hi;
    v128_t lv = wasm_f32x4_splat(l), hv = wasm_f32x4_splat(h);
    int i = 0;
    for (; i + 4 <= count; i += 4)
        wasm_v128_store(x + i, wasm_f32x4_pmax(wasm_f32x4_pmin(wasm_v128_load(x + i), hv), lv));
    for (; i < count; i++) x[i] = x[i] > h ? h : x[i] < l ? l : x[i];
}

/* x[0..count) *= s (the product in double, as portable) */
EXPORT void llamay_scale(float *x, double s, int32_t count) {
    v128_t sv = wasm_f64x2_splat(s);
    int i = 0;
    for (; i + 2 <= count; i += 2) {
        v128_t v = wasm_f64x2_promote_low_f32x4(wasm_v128_load64_zero(x + i));
        wasm_v128_store64_lane(x + i, wasm_f32x4_demote_f64x2_zero(wasm_f64x2_mul(v, sv)), 0);
    }
    for (; i < count; i++) x[i] = (float)((double)x[i] * s);
}

#define ADD_BODY(i, m) store_n(out + (i), wasm_f32x4_add(load_n(a + (i), m), load_n(b + (i), m)), m)

/* out = a + b (out may be a or b) */
EXPORT void llamay_add(float *out, const float *a, const float *b, int32_t count) { FOR_X4(count, ADD_BODY); }

INLINE v128_t silu_x4(v128_t g) {
    v128_t e = exp_x4(wasm_f32x4_neg(g));
    return wasm_f32x4_div(g, wasm_f32x4_add(wasm_f32x4_splat(1.0f), e));
}

/* fp16 bit pattern of x, rounded to nearest even (|x| < 65504): the index into ggml's GELU table */
INLINE uint32_t half_bits(float x) {
    uint32_t u;
    __builtin_memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a < F16_MIN_NORMAL_AS_F32_BITS) /* an fp16 subnormal: units of 2^-24, ties to even */
        return sign | (uint32_t)__builtin_rint((double)__builtin_fabsf(x) * 16777216.0);
    a += 0x0fffu + ((a >> 13) & 1u);
    return sign | ((a >> 13) - F16_REBIAS);
}

/* ggml's GELU (core/kernels/gelu.py): 0 below -10, x above 10, else the fp16 table at fp16(x) */
INLINE float gelu_1(float x, const float *table) {
    if (x <= -GELU_CLAMP) return 0.0f;
    if (x >= GELU_CLAMP) return x;
    return table[half_bits(x)];
}

#define SWIGLU_BODY(i, m) store_n(out + (i), wasm_f32x4_mul(silu_x4(load_n(gate + (i), m)), load_n(up + (i), m)), m)

/* out = silu(gate) * up */
EXPORT void llamay_swiglu(float *out, const float *gate, const float *up, int32_t count) {
    FOR_X4(count, SWIGLU_BODY);
}

/* out = gelu(gate) * up with ggml's fp16 GELU table (65,536 floats, passed in by the loader) */
EXPORT void llamay_geglu(float *out, const float *gate, const float *up, int32_t count, const float *table) {
    for (int32_t i = 0; i < count; i++) out[i] = gelu_1(gate[i], table) * up[i];
}

EXPORT void llamay_gelu(float *x, int32_t count, const float *table) {
    for (int32_t i = 0; i < count; i++) x[i] = gelu_1(x[i], table);
}

/* out = g / (1 + exp(-alpha g)) (u + 1), g = min(gate, limit), u = clamp(up, -limit, limit): ggml's swiglu_oai */
EXPORT void llamay_swiglu_oai(float *out, const float *gate, const float *up, int32_t count, double alpha,
                              double limit) {
    float a = (float)alpha, lim = (float)limit;
    for (int32_t i = 0; i < count; i++) {
        float g = gate[i] < lim ? gate[i] : lim, u = up[i] < lim ? up[i] : lim;
        u = u > -lim ? u : -lim;
        out[i] = g / (1.0f + exp_f(a * -g)) * (u + 1.0f);
    }
}

/* x = cap tanh(x / cap), 4 lanes at a time (gemma2's final logits) */
EXPORT void llamay_softcap(float *x, double cap, int32_t count) {
    float c = (float)cap;
    v128_t cv = wasm_f32x4_splat(c);
    int32_t i = 0;
    for (; i + 4 <= count; i += 4)
        wasm_v128_store(x + i, wasm_f32x4_mul(cv, tanh_x4(wasm_f32x4_div(wasm_v128_load(x + i), cv))));
    for (; i < count; i++) x[i] = c * wasm_f32x4_extract_lane(tanh_x4(wasm_f32x4_splat(x[i] / c)), 0);
}

/* the index of the largest of x[0..n), the lowest index on ties */
EXPORT int32_t llamay_argmax(const float *x, int32_t n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* the k largest of x[0..n), largest first, ties by lower index: indices to idx, values to val; returns how
 * many (min(k, n)). Insertion into the sorted k-list; most values fail the first comparison. */
EXPORT int32_t llamay_top_k(const float *x, int32_t n, int32_t k, int32_t *idx, float *val) {
    int have = 0;
    if (k > n) k = n;
    if (k <= 0) return 0;
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (have == k && !(v > val[k - 1])) continue;
        int at = have < k ? have : k - 1;
        while (at > 0 && v > val[at - 1]) {
            val[at] = val[at - 1];
            idx[at] = idx[at - 1];
            at--;
        }
        val[at] = v;
        idx[at] = i;
        if (have < k) have++;
    }
    return have;
}

/* out (dim) = mean of the n rows of x (n, dim), summed in double */
EXPORT void llamay_mean_pool(float *out, const float *x, int32_t n, int32_t dim) {
    for (int j = 0; j < dim; j++) {
        double s = 0.0;
        for (int i = 0; i < n; i++) s += x[(size_t)i * dim + j];
        out[j] = (float)(s / n);
    }
}

EXPORT void llamay_l2_normalize(float *x, int32_t dim) {
    double norm = __builtin_sqrt(sum_squares(x, dim));
    if (norm > 0)
        for (int i = 0; i < dim; i++) x[i] = (float)(x[i] / norm);
}
