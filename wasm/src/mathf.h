/* The transcendental functions the kernels need, written here (freestanding: no libm).
 *
 * exp_x4: float32 exp of 4 lanes, 2^k * poly(r) with r = x - k ln2, |r| <= ln2/2, a degree-7 Taylor
 * polynomial (relative error below 2^-23 before rounding); inputs are clamped to [-87, 88], so the result
 * is never inf or subnormal (softmax and SiLU only need the limits 0 and large).
 * sincos_d: double sin and cos, Cody-Waite reduction by pi/2 in three parts (exact for |t| < 2^20 * pi/2)
 * and Taylor polynomials on [-pi/4, pi/4] (error ~1e-17); the rotary embedding rounds them to float32. */
#ifndef LLAMAY_MATHF_H
#define LLAMAY_MATHF_H

#include "common.h"

INLINE v128_t exp_x4(v128_t x) {
    x = wasm_f32x4_min(wasm_f32x4_max(x, wasm_f32x4_splat(-87.0f)), wasm_f32x4_splat(88.0f));
    v128_t k = wasm_f32x4_nearest(wasm_f32x4_mul(x, wasm_f32x4_splat(1.44269504088896341f)));
    v128_t r = wasm_f32x4_sub(x, wasm_f32x4_mul(k, wasm_f32x4_splat(0.693359375f)));
    r = wasm_f32x4_sub(r, wasm_f32x4_mul(k, wasm_f32x4_splat(-2.12194440e-4f)));
    v128_t p = wasm_f32x4_splat(1.0f / 5040.0f);
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f / 720.0f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f / 120.0f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f / 24.0f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f / 6.0f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(0.5f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f));
    v128_t scale = wasm_i32x4_shl(wasm_i32x4_add(wasm_i32x4_trunc_sat_f32x4(k), wasm_i32x4_splat(127)), 23);
    return wasm_f32x4_mul(p, scale);
}

INLINE float exp_f(float x) { return wasm_f32x4_extract_lane(exp_x4(wasm_f32x4_splat(x)), 0); }

/* tanh(y) = sign(y) (1 - 2 / (exp(2|y|) + 1)) */
INLINE v128_t tanh_x4(v128_t y) {
    v128_t e = exp_x4(wasm_f32x4_mul(wasm_f32x4_abs(y), wasm_f32x4_splat(2.0f)));
    v128_t t = wasm_f32x4_sub(wasm_f32x4_splat(1.0f),
                              wasm_f32x4_div(wasm_f32x4_splat(2.0f), wasm_f32x4_add(e, wasm_f32x4_splat(1.0f))));
    return wasm_v128_or(t, wasm_v128_and(y, wasm_i32x4_splat((int32_t)0x80000000)));
}

/* Taylor terms in r^2, highest first: sin r = r + r^3 (-1/3! + r^2 (1/5! - ...)), cos r = 1 - r^2 (1/2! - ...) */
static const double SIN_TERMS[] = {1.0 / 355687428096000.0, -1.0 / 1307674368000.0, 1.0 / 6227020800.0,
                                   -1.0 / 39916800.0,       1.0 / 362880.0,          -1.0 / 5040.0,
                                   1.0 / 120.0,             -1.0 / 6.0}; /* 1/17! .. -1/3! */
static const double COS_TERMS[] = {1.0 / 6402373705728000.0, -1.0 / 20922789888000.0, 1.0 / 87178291200.0,
                                   -1.0 / 479001600.0,       1.0 / 3628800.0,         -1.0 / 40320.0,
                                   1.0 / 720.0,              -1.0 / 24.0,             0.5}; /* 1/18! .. 1/2! */

/* Horner's rule over n terms at x */
INLINE double horner(const double *terms, int n, double x) {
    double p = terms[0];
    for (int i = 1; i < n; i++) p = p * x + terms[i];
    return p;
}

static inline double sin_poly(double r) {
    double r2 = r * r;
    return r + r * r2 * horner(SIN_TERMS, 8, r2);
}

static inline double cos_poly(double r) { return 1.0 - r * r * horner(COS_TERMS, 9, r * r); }

static inline void sincos_d(double t, double *s, double *c) {
    const double PIO2_1 = 1.57079632673412561417e+00;  /* first 33 bits of pi/2 */
    const double PIO2_2 = 6.07710050650619224932e-11;  /* next 33 bits */
    const double PIO2_3 = 2.02226624879595063154e-21;  /* the rest */
    double k = __builtin_nearbyint(t * 6.36619772367581382433e-01);
    double r = ((t - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
    double sr = sin_poly(r), cr = cos_poly(r);
    switch ((int)((int64_t)k & 3)) {
    case 0:
        *s = sr, *c = cr;
        break;
    case 1:
        *s = cr, *c = -sr;
        break;
    case 2:
        *s = -sr, *c = -cr;
        break;
    default:
        *s = -cr, *c = sr;
    }
}

#endif
