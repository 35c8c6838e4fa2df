/* The row kernels of a mixture-of-experts FFN (core/arch/moe.py): gather the batch rows routed to one expert,
 * and add its weighted output back (the product rounded to float32 before the sum, as ggml's mul then add). */
#include "common.h"

/* out (n, dim) = x[rows[j]] */
EXPORT void llamay_gather_rows(float *out, const float *x, const int32_t *rows, int32_t n, int32_t dim) {
    for (int j = 0; j < n; j++) __builtin_memcpy(out + (size_t)j * dim, x + (size_t)rows[j] * dim, 4u * dim);
}

/* out[rows[j]] += scales[j] * x[j], x (n, dim) */
EXPORT void llamay_add_rows_scaled(float *out, const float *x, const int32_t *rows, const float *scales, int32_t n,
                                   int32_t dim) {
    for (int j = 0; j < n; j++) {
        float *o = out + (size_t)rows[j] * dim;
        const float *v = x + (size_t)j * dim;
        v128_t s = wasm_f32x4_splat(scales[j]);
        int c = 0;
        for (; c + 4 <= dim; c += 4)
            wasm_v128_store(o + c, wasm_f32x4_add(wasm_v128_load(o + c), wasm_f32x4_mul(s, wasm_v128_load(v + c))));
        for (; c < dim; c++) o[c] = o[c] + scales[j] * v[c];
    }
}
