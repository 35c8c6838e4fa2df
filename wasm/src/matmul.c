/* The exported entry points of the weight kernels: matmul and get_rows dispatched on the ggml type id, and
 * what the Python side asks about the module (ABI version, build variant, struct sizes). */
#include "kernels.h"

#define ABI_VERSION 4

EXPORT int32_t llamay_abi_version(void) { return ABI_VERSION; }

/* 1: built with relaxed SIMD, 0: plain SIMD128 */
EXPORT int32_t llamay_variant(void) { return LLAMAY_RELAXED; }

/* sizeof the C block struct of a type (1-element types: the element), or -1 */
EXPORT int32_t llamay_block_sizeof(int32_t type) {
    switch (type) {
    case T_F32:
        return 4;
    case T_F16:
    case T_BF16:
        return 2;
    case T_Q4_0:
        return sizeof(block_q4_0);
    case T_Q4_1:
        return sizeof(block_q4_1);
    case T_Q5_0:
        return sizeof(block_q5_0);
    case T_Q5_1:
        return sizeof(block_q5_1);
    case T_Q8_0:
        return sizeof(block_q8_0);
    case T_Q8_1:
        return sizeof(block_q8_1);
    case T_Q2_K:
        return sizeof(block_q2_k);
    case T_Q3_K:
        return sizeof(block_q3_k);
    case T_Q4_K:
        return sizeof(block_q4_k);
    case T_Q5_K:
        return sizeof(block_q5_k);
    case T_Q6_K:
        return sizeof(block_q6_k);
    case T_Q8_K:
        return sizeof(block_q8_k);
    case T_IQ4_NL:
        return sizeof(block_iq4_nl);
    case T_IQ4_XS:
        return sizeof(block_iq4_xs);
    default:
        return -1;
    }
}

static int block_elements(int type) {
    switch (act_kind(type)) {
    case ACT_Q8:
        return QK;
    case ACT_Q8K:
        return QK_K;
    default:
        return 1;
    }
}

/* 1 if matmul and get_rows run this type */
EXPORT int32_t llamay_supports(int32_t type) {
    switch (type) {
    case T_F32:
    case T_F16:
    case T_BF16:
    case T_Q4_0:
    case T_Q4_1:
    case T_Q5_0:
    case T_Q5_1:
    case T_Q8_0:
    case T_IQ4_NL:
    case T_Q2_K:
    case T_Q3_K:
    case T_Q4_K:
    case T_Q5_K:
    case T_Q6_K:
    case T_IQ4_XS:
        return 1;
    default:
        return 0;
    }
}

/* out (n, m) = x (n, k) . w^T, w: m rows of k elements of `type`; scratch: llamay_act_bytes(type, n, k)
 * bytes. Returns 0, or -1 for a type it does not run, -2 for k not a whole number of blocks. */
EXPORT int32_t llamay_matmul(int32_t type, float *out, const uint8_t *w, const float *x, int32_t n,
                             int32_t k, int32_t m, uint8_t *scratch) {
    if (!llamay_supports(type)) return -1;
    if (k % block_elements(type)) return -2;
    int kind = act_kind(type);
    const uint8_t *act = (const uint8_t *)x;
    if (kind != ACT_F32) {
        act_convert(kind, x, n, k, scratch);
        act = scratch;
    }
    switch (type) {
    case T_F32:
        mm_f32(out, w, act, n, k, m);
        break;
    case T_F16:
        mm_f16(out, w, act, n, k, m);
        break;
    case T_BF16:
        mm_bf16(out, w, act, n, k, m);
        break;
    case T_Q4_0:
        mm_q4_0(out, w, act, n, k, m);
        break;
    case T_Q4_1:
        mm_q4_1(out, w, act, n, k, m);
        break;
    case T_Q5_0:
        mm_q5_0(out, w, act, n, k, m);
        break;
    case T_Q5_1:
        mm_q5_1(out, w, act, n, k, m);
        break;
    case T_Q8_0:
        mm_q8_0(out, w, act, n, k, m);
        break;
    case T_IQ4_NL:
        mm_iq4_nl(out, w, act, n, k, m);
        break;
    case T_Q2_K:
        mm_q2_k(out, w, act, n, k, m);
        break;
    case T_Q3_K:
        mm_q3_k(out, w, act, n, k, m);
        break;
    case T_Q4_K:
        mm_q4_k(out, w, act, n, k, m);
        break;
    case T_Q5_K:
        mm_q5_k(out, w, act, n, k, m);
        break;
    case T_Q6_K:
        mm_q6_k(out, w, act, n, k, m);
        break;
    case T_IQ4_XS:
        mm_iq4_xs(out, w, act, n, k, m);
        break;
    default:
        return -1;
    }
    return 0;
}

static void dequantize_row(int type, const uint8_t *w, float *out, int k) {
    switch (type) {
    case T_F32:
        dq_f32(w, out, k);
        break;
    case T_F16:
        dq_f16(w, out, k);
        break;
    case T_BF16:
        dq_bf16(w, out, k);
        break;
    case T_Q4_0:
        dq_q4_0(w, out, k);
        break;
    case T_Q4_1:
        dq_q4_1(w, out, k);
        break;
    case T_Q5_0:
        dq_q5_0(w, out, k);
        break;
    case T_Q5_1:
        dq_q5_1(w, out, k);
        break;
    case T_Q8_0:
        dq_q8_0(w, out, k);
        break;
    case T_IQ4_NL:
        dq_iq4_nl(w, out, k);
        break;
    case T_Q2_K:
        dq_q2_k(w, out, k);
        break;
    case T_Q3_K:
        dq_q3_k(w, out, k);
        break;
    case T_Q4_K:
        dq_q4_k(w, out, k);
        break;
    case T_Q5_K:
        dq_q5_k(w, out, k);
        break;
    case T_Q6_K:
        dq_q6_k(w, out, k);
        break;
    case T_IQ4_XS:
        dq_iq4_xs(w, out, k);
        break;
    }
}

/* out (n, k) = rows ids[0..n) of w (m rows of k elements of `type`), dequantised exactly. Returns 0, -1 for a type
 * it does not run, -2 for k not a whole number of blocks, -3 for an id outside 0..m-1 (nothing written). */
EXPORT int32_t llamay_get_rows(int32_t type, float *out, const uint8_t *w, const int32_t *ids, int32_t n, int32_t k,
                               int32_t m) {
    if (!llamay_supports(type)) return -1;
    if (k % block_elements(type)) return -2;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m) return -3;
    size_t rb = (size_t)(k / block_elements(type)) * (size_t)llamay_block_sizeof(type);
    for (int i = 0; i < n; i++) dequantize_row(type, w + (size_t)ids[i] * rb, out + (size_t)i * k, k);
    return 0;
}
