/* The exported entry points of the weight kernels: matmul and get_rows, dispatched on the ggml type id through
 * the traits array (traits.h), and what the Python side asks about the module (ABI version, build variant,
 * struct sizes). */
#include "kernels.h"

EXPORT int32_t llamay_abi_version(void) { return LLAMAY_ABI_VERSION; }

/* 1: built with relaxed SIMD, 0: plain SIMD128 */
EXPORT int32_t llamay_variant(void) { return LLAMAY_RELAXED; }

/* sizeof the C block struct of a type (1-element types: the element), or -1 */
EXPORT int32_t llamay_block_sizeof(int32_t type) {
    type_traits t = traits_of(type);
    return t.elements ? t.bytes : -1;
}

/* 1 if matmul and get_rows run this type */
EXPORT int32_t llamay_supports(int32_t type) { return traits_of(type).runs; }

/* each type's case calls its own kernel */
#define CALL_MATMUL(T, name, elements, act)                                                                        \
    case T:                                                                                                        \
        mm_##name(out + lo, w + (size_t)lo * rb, a, n, k, hi - lo, m);                                                                             \
        break;
#define CALL_DEQUANT(T, name, elements, act)                                                                       \
    case T:                                                                                                        \
        dq_##name(w, out, k);                                                                                      \
        break;

/* columns lo..hi of out (n, m) = x (n, k) . w^T, w: m rows of k elements of `type`; scratch:
 * llamay_act_bytes(type, n, k) bytes, written with x's converted rows. Returns 0, or -1 for a type it does not
 * run, -2 for k not a whole number of blocks. */
int32_t matmul_rows(int32_t type, float *out, const uint8_t *w, const float *x, int32_t n, int32_t k, int32_t m,
                    uint8_t *scratch, int32_t lo, int32_t hi) {
    type_traits t = traits_of(type);
    if (!t.runs) return -1;
    if (k % t.elements) return -2;
    if (lo >= hi) return 0;
    const uint8_t *a = (const uint8_t *)x;
    if (t.act != ACT_F32) {
        act_convert(t.act, x, n, k, scratch);
        a = scratch;
    }
    size_t rb = (size_t)(k / t.elements) * (size_t)t.bytes;
    switch (type) { KERNEL_TYPES(CALL_MATMUL) }
    return 0;
}

/* out (n, m) = x (n, k) . w^T, w: m rows of k elements of `type`; scratch: llamay_act_bytes(type, n, k)
 * bytes. Returns 0, or -1 for a type it does not run, -2 for k not a whole number of blocks. */
EXPORT int32_t llamay_matmul(int32_t type, float *out, const uint8_t *w, const float *x, int32_t n, int32_t k,
                             int32_t m, uint8_t *scratch) {
    return matmul_rows(type, out, w, x, n, k, m, scratch, 0, m);
}

static void dequantize_row(int type, const uint8_t *w, float *out, int k) {
    switch (type) { KERNEL_TYPES(CALL_DEQUANT) }
}

/* out (n, k) = rows ids[0..n) of w (m rows of k elements of `type`), dequantised exactly. Returns 0, -1 for a type
 * it does not run, -2 for k not a whole number of blocks, -3 for an id outside 0..m-1 (nothing written). */
EXPORT int32_t llamay_get_rows(int32_t type, float *out, const uint8_t *w, const int32_t *ids, int32_t n, int32_t k,
                               int32_t m) {
    type_traits t = traits_of(type);
    if (!t.runs) return -1;
    if (k % t.elements) return -2;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m) return -3;
    size_t rb = (size_t)(k / t.elements) * (size_t)t.bytes;
    for (int i = 0; i < n; i++) dequantize_row(type, w + (size_t)ids[i] * rb, out + (size_t)i * k, k);
    return 0;
}
