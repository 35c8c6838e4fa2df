/* Activation rows as the dot products read them, after rounding to the weight type's vec_dot_type
 * (llamay/kernels/activations.py). A matmul converts its n input rows once, into caller scratch, with one
 * row every `act_stride(kind, k)` bytes:
 *
 *   ACT_Q8 (Q8_0 and Q8_1): qs int8[k] | d float[k/32] | sum int32[k/32] | s float[k/32]
 *        d = the fp16-rounded scale, sum = the block's sum of qs, s = fp16(d_unrounded * sum) (Q8_1's s)
 *   ACT_Q8K (Q8_K):         qs int8[k] | d float[k/256] | bsums int16[k/16]
 *   ACT_F32 (F32, F16, BF16): the k values as float, rounded to fp16 / bf16 where the type asks
 */
#ifndef LLAMAY_ACT_H
#define LLAMAY_ACT_H

#include "common.h"

enum { ACT_F32 = 0, ACT_F16 = 1, ACT_BF16 = 2, ACT_Q8 = 3, ACT_Q8K = 4 };

INLINE size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

INLINE size_t act_stride(int kind, int k) {
    switch (kind) {
    case ACT_Q8:
        return align16((size_t)k + 12 * (size_t)(k / QK));
    case ACT_Q8K:
        return align16((size_t)k + 4 * (size_t)(k / QK_K) + 2 * (size_t)(k / 16));
    default:
        return 4 * (size_t)k;
    }
}

typedef struct {
    const int8_t *qs;
    const float *d;
    const int32_t *sum;
    const float *s;
} act_q8;

typedef struct {
    const int8_t *qs;
    const float *d;
    const int16_t *bsums;
} act_q8k;

INLINE act_q8 act_q8_row(const uint8_t *base, int k) {
    int nb = k / QK;
    act_q8 a = {(const int8_t *)base, (const float *)(base + k), (const int32_t *)(base + k + 4 * nb),
                (const float *)(base + k + 8 * nb)};
    return a;
}

INLINE act_q8k act_q8k_row(const uint8_t *base, int k) {
    int nk = k / QK_K;
    act_q8k a = {(const int8_t *)base, (const float *)(base + k), (const int16_t *)(base + k + 4 * nk)};
    return a;
}

/* convert n rows of k floats (x, row-major) into scratch, one row every act_stride(kind, k) bytes */
void act_convert(int kind, const float *x, int n, int k, uint8_t *scratch);

#endif
