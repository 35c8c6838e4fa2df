/* The paged KV cache: storing new keys/values, and attention over each token's own sequence.
 *
 * A cache holds (n_layer, n_slots, dim) float32; position p of sequence s lives in slot
 * pages[page_off[s] + p / page_size] * page_size + p % page_size. Attention runs one query head at a time
 * with a streaming softmax over chunks of keys: the scores of a chunk sit in a small stack array, the running
 * output accumulates in `out` itself and is rescaled when a chunk raises the maximum. No scratch needed. */
#include "common.h"
#include "mathf.h"

#define CHUNK 64

/* cache[layer, slots[i], :] = src[i, :] for i < n */
EXPORT void llamay_kv_store(float *cache, int32_t layer, int32_t n_slots, const int32_t *slots, const float *src,
                            int32_t n, int32_t dim) {
    float *base = cache + (size_t)layer * n_slots * dim;
    for (int i = 0; i < n; i++)
        __builtin_memcpy(base + (size_t)slots[i] * dim, src + (size_t)i * dim, 4 * (size_t)dim);
}

static float dot_f32(const float *a, const float *b, int n) {
    v128_t acc = wasm_f32x4_splat(0.0f);
    int i = 0;
    for (; i + 4 <= n; i += 4) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_v128_load(a + i), wasm_v128_load(b + i)));
    float s = hsum_f32x4(acc);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y = y * f + w * v */
static void scale_axpy(float *y, float f, float w, const float *v, int n) {
    v128_t fv = wasm_f32x4_splat(f), wv = wasm_f32x4_splat(w);
    int i = 0;
    for (; i + 4 <= n; i += 4)
        wasm_v128_store(y + i, wasm_f32x4_add(wasm_f32x4_mul(wasm_v128_load(y + i), fv),
                                              wasm_f32x4_mul(wasm_v128_load(v + i), wv)));
    for (; i < n; i++) y[i] = y[i] * f + w * v[i];
}

typedef struct {
    const int32_t *pages;
    int32_t page_size;
} page_table;

INLINE int slot_of(page_table t, int off, int p) { return t.pages[off + p / t.page_size] * t.page_size + p % t.page_size; }

/* one query head over keys lo..hi-1 of a sequence whose page list starts at `off` */
static void attend_head(float *o, const float *qh, const float *kc, const float *vc, int kstride, int vstride,
                        page_table t, int off, int lo, int hi, int head_dim, int head_dim_v, float kq_scale) {
    float scores[CHUNK];
    float m = -__builtin_inff(), l = 0.0f;
    for (int i = 0; i < head_dim_v; i++) o[i] = 0.0f;
    for (int j0 = lo; j0 < hi; j0 += CHUNK) {
        int cnt = hi - j0 < CHUNK ? hi - j0 : CHUNK;
        float cmax = -__builtin_inff();
        for (int c = 0; c < cnt; c++) {
            float s = dot_f32(qh, kc + (size_t)slot_of(t, off, j0 + c) * kstride, head_dim) * kq_scale;
            scores[c] = s;
            cmax = s > cmax ? s : cmax;
        }
        float f = 1.0f;
        if (cmax > m) {
            f = m == -__builtin_inff() ? 0.0f : exp_f(m - cmax);
            l *= f;
            m = cmax;
        }
        int c = 0;
        for (; c + 4 <= cnt; c += 4)
            wasm_v128_store(scores + c, exp_x4(wasm_f32x4_sub(wasm_v128_load(scores + c), wasm_f32x4_splat(m))));
        for (; c < cnt; c++) scores[c] = exp_f(scores[c] - m);
        for (c = 0; c < cnt; c++) {
            l += scores[c];
            scale_axpy(o, c == 0 ? f : 1.0f, scores[c], vc + (size_t)slot_of(t, off, j0 + c) * vstride, head_dim_v);
        }
    }
    if (l > 0.0f) {
        float inv = 1.0f / l;
        for (int i = 0; i < head_dim_v; i++) o[i] *= inv;
    }
}

/* out (n, n_head * head_dim_v) = softmax(q k^T kq_scale) v over the keys of each token's sequence.
 * Token i (position pos[i], sequence seq[i]) sees, causal: positions max(0, p - window + 1) .. p
 * (window 0: 0 .. p); non-causal: 0 .. seq_len[seq] - 1. Query head h reads KV head h / (n_head / n_head_kv). */
EXPORT void llamay_attention(float *out, const float *q, const float *k_cache, const float *v_cache, int32_t layer,
                             int32_t n_slots, int32_t n, const int32_t *pos, const int32_t *seq, const int32_t *pages,
                             const int32_t *page_off, const int32_t *seq_len, int32_t page_size, int32_t n_head,
                             int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v, float kq_scale, int32_t causal,
                             int32_t window) {
    int group = n_head / n_head_kv;
    int kdim = n_head_kv * head_dim, vdim = n_head_kv * head_dim_v;
    const float *kc = k_cache + (size_t)layer * n_slots * kdim;
    const float *vc = v_cache + (size_t)layer * n_slots * vdim;
    page_table t = {pages, page_size};
    for (int i = 0; i < n; i++) {
        int p = pos[i], s = seq[i];
        int lo = 0, hi;
        if (causal) {
            lo = window && p - window + 1 > 0 ? p - window + 1 : 0;
            hi = p + 1;
        } else {
            hi = seq_len[s];
        }
        for (int h = 0; h < n_head; h++) {
            int kv = h / group;
            attend_head(out + ((size_t)i * n_head + h) * head_dim_v, q + ((size_t)i * n_head + h) * head_dim,
                        kc + kv * head_dim, vc + kv * head_dim_v, kdim, vdim, t, page_off[s], lo, hi, head_dim,
                        head_dim_v, kq_scale);
        }
    }
}
