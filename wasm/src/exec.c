/* One entry point for every kernel: `llamay_exec(cmd)` runs the command at `cmd`, an array of 32-bit words in
 * linear memory: the op code (LLAMAY_OP_*, numbered as `runtime.OPS` on the Python side), then the
 * kernel's arguments as its export takes them, each i32 and f32 in one word (the f32 as its bits), each f64 in
 * two (little-endian, 4-aligned). It returns what the kernel returns (0 for the void ones), or -100 for an
 * unknown op.
 *
 * Why: under Pyodide a call from Python into wasm costs about 0.2 µs per argument on top of ~0.5 µs (each
 * argument is converted to a JS value); a kernel call takes 4 to 20 of them. The backend packs a command once,
 * keeps it (a decode step calls the same kernels with the same arguments at every token: the positions and
 * token ids live in buffers), and calls this with one argument. */
#include "common.h"

/* the kernels (their definitions are exported: so are these declarations, or the linker would hide them) */
EXPORT int32_t llamay_matmul(int32_t type, float *out, const uint8_t *w, const float *x, int32_t n, int32_t k,
                             int32_t m, uint8_t *scratch);
EXPORT int32_t llamay_get_rows(int32_t type, float *out, const uint8_t *w, const int32_t *ids, int32_t n, int32_t k,
                               int32_t m);
EXPORT void llamay_rms_norm(float *out, const float *x, const float *w, int32_t n, int32_t dim, double eps);
EXPORT void llamay_layer_norm(float *out, const float *x, const float *w, const float *b, int32_t n, int32_t dim,
                              double eps);
EXPORT void llamay_add_bias(float *x, const float *b, int32_t n, int32_t dim);
EXPORT void llamay_rope(float *x, const int32_t *pos, int32_t n, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                        float theta_scale, double scale, int32_t neox, const float *freq);
EXPORT void llamay_scale(float *x, double s, int32_t count);
EXPORT void llamay_add(float *out, const float *a, const float *b, int32_t count);
EXPORT void llamay_swiglu(float *out, const float *gate, const float *up, int32_t count);
EXPORT void llamay_geglu(float *out, const float *gate, const float *up, int32_t count, const float *table);
EXPORT void llamay_gelu(float *x, int32_t count, const float *table);
EXPORT int32_t llamay_argmax(const float *x, int32_t n);
EXPORT int32_t llamay_top_k(const float *x, int32_t n, int32_t k, int32_t *idx, float *val);
EXPORT void llamay_mean_pool(float *out, const float *x, int32_t n, int32_t dim);
EXPORT void llamay_l2_normalize(float *x, int32_t dim);
EXPORT void llamay_kv_store(float *cache, int32_t layer, int32_t n_slots, const int32_t *slots, const float *src,
                            int32_t n, int32_t dim);
EXPORT void llamay_attention(float *out, const float *q, const float *k_cache, const float *v_cache, int32_t layer,
                             int32_t n_slots, int32_t n, const int32_t *pos, const int32_t *seq, const int32_t *pages,
                             const int32_t *page_off, const int32_t *seq_len, int32_t page_size, int32_t n_head,
                             int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v, float kq_scale, int32_t causal,
                             int32_t window);

enum {
    LLAMAY_OP_MATMUL = 1,
    LLAMAY_OP_GET_ROWS,
    LLAMAY_OP_RMS_NORM,
    LLAMAY_OP_LAYER_NORM,
    LLAMAY_OP_ADD_BIAS,
    LLAMAY_OP_ROPE,
    LLAMAY_OP_SCALE,
    LLAMAY_OP_ADD,
    LLAMAY_OP_SWIGLU,
    LLAMAY_OP_GEGLU,
    LLAMAY_OP_GELU,
    LLAMAY_OP_ARGMAX,
    LLAMAY_OP_TOP_K,
    LLAMAY_OP_MEAN_POOL,
    LLAMAY_OP_L2_NORMALIZE,
    LLAMAY_OP_KV_STORE,
    LLAMAY_OP_ATTENTION,
};

INLINE float arg_f32(const int32_t *a) { return bits_f32((uint32_t)*a); }
INLINE double arg_f64(const int32_t *a) {
    double d;
    __builtin_memcpy(&d, a, 8);
    return d;
}

#define I(i) (c[i])
#define P(i) ((void *)(uintptr_t)(uint32_t)c[i])
#define F(i) arg_f32(c + (i))
#define D(i) arg_f64(c + (i))

EXPORT int32_t llamay_exec(const int32_t *c) {
                           switch (c[0]) {
    case LLAMAY_OP_MATMUL:
        return llamay_matmul(I(1), P(2), P(3), P(4), I(5), I(6), I(7), P(8));
    case LLAMAY_OP_GET_ROWS:
        return llamay_get_rows(I(1), P(2), P(3), P(4), I(5), I(6), I(7));
    case LLAMAY_OP_RMS_NORM:
        llamay_rms_norm(P(1), P(2), P(3), I(4), I(5), D(6));
        return 0;
    case LLAMAY_OP_LAYER_NORM:
        llamay_layer_norm(P(1), P(2), P(3), P(4), I(5), I(6), D(7));
        return 0;
    case LLAMAY_OP_ADD_BIAS:
        llamay_add_bias(P(1), P(2), I(3), I(4));
        return 0;
    case LLAMAY_OP_ROPE:
        llamay_rope(P(1), P(2), I(3), I(4), I(5), I(6), F(7), D(8), I(10), P(11));
        return 0;
    case LLAMAY_OP_SCALE:
        llamay_scale(P(1), D(2), I(4));
        return 0;
    case LLAMAY_OP_ADD:
        llamay_add(P(1), P(2), P(3), I(4));
        return 0;
    case LLAMAY_OP_SWIGLU:
        llamay_swiglu(P(1), P(2), P(3), I(4));
        return 0;
    case LLAMAY_OP_GEGLU:
        llamay_geglu(P(1), P(2), P(3), I(4), P(5));
        return 0;
    case LLAMAY_OP_GELU:
        llamay_gelu(P(1), I(2), P(3));
        return 0;
    case LLAMAY_OP_ARGMAX:
        return llamay_argmax(P(1), I(2));
    case LLAMAY_OP_TOP_K:
        return llamay_top_k(P(1), I(2), I(3), P(4), P(5));
    case LLAMAY_OP_MEAN_POOL:
        llamay_mean_pool(P(1), P(2), I(3), I(4));
        return 0;
    case LLAMAY_OP_L2_NORMALIZE:
        llamay_l2_normalize(P(1), I(2));
        return 0;
    case LLAMAY_OP_KV_STORE:
        llamay_kv_store(P(1), I(2), I(3), P(4), P(5), I(6), I(7));
        return 0;
    case LLAMAY_OP_ATTENTION:
        llamay_attention(P(1), P(2), P(3), P(4), I(5), I(6), I(7), P(8), P(9), P(10), P(11), P(12), I(13), I(14),
                         I(15), I(16), I(17), F(18), I(19), I(20));
        return 0;
    default:
        return -100;
    }
}
