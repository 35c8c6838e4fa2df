/* The paged KV cache: storing new keys/values, and attention over each token's own sequence.
 *
 * A cache holds (n_layer, n_slots, dim) float32; position p of sequence s lives in slot
 * pages[page_off[s] + p / page_size] * page_size + p % page_size. Attention runs the query heads that share a
 * KV head together (each key and value row is then read once for all of them) with a streaming softmax over
 * chunks of keys: the scores of a chunk sit in a small stack array, the running output accumulates in `out`
 * itself and is rescaled when a chunk raises the maximum. No scratch needed. */
#include "common.h"
#include "kernels.h"
#include "mathf.h"

#define CHUNK 64

/* cache[layer, slots[i], :] = src[i, :] for i < n */
EXPORT void llamay_kv_store(float *cache, int32_t layer, int32_t n_slots, const int32_t *slots, const float *src,
                            int32_t n, int32_t dim) {
    float *base = cache + (size_t)layer * n_slots * dim;
    for (int i = 0; i < n; i++)
        __builtin_memcpy(base + (size_t)slots[i] * dim, src + (size_t)i * dim, 4 * (size_t)dim);
}

/* two accumulators: the adds of one chain wait on each other */
static float dot_f32(const float *a, const float *b, int n) {
    v128_t acc0 = wasm_f32x4_splat(0.0f), acc1 = acc0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        acc0 = wasm_f32x4_add(acc0, wasm_f32x4_mul(wasm_v128_load(a + i), wasm_v128_load(b + i)));
        acc1 = wasm_f32x4_add(acc1, wasm_f32x4_mul(wasm_v128_load(a + i + 4), wasm_v128_load(b + i + 4)));
    }
    if (i + 4 <= n) {
        acc0 = wasm_f32x4_add(acc0, wasm_f32x4_mul(wasm_v128_load(a + i), wasm_v128_load(b + i)));
        i += 4;
    }
    float s = hsum_f32x4(wasm_f32x4_add(acc0, acc1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* o[0..d) = o * f + sum over c < cnt of w[c] * (v + slots[c] * vstride)[0..d): 16 lanes at a time held in
 * registers across the chunk's keys (per element, the same operations in the same order as one key at a time) */
static void scale_accumulate(float *o, float f, const float *w, const float *v, const int *slots, int vstride,
                             int cnt, int d) {
    v128_t fv = wasm_f32x4_splat(f);
    int i = 0;
    for (; i + 16 <= d; i += 16) {
        v128_t a0 = wasm_f32x4_mul(wasm_v128_load(o + i), fv), a1 = wasm_f32x4_mul(wasm_v128_load(o + i + 4), fv);
        v128_t a2 = wasm_f32x4_mul(wasm_v128_load(o + i + 8), fv), a3 = wasm_f32x4_mul(wasm_v128_load(o + i + 12), fv);
        for (int c = 0; c < cnt; c++) {
            const float *vr = v + (size_t)slots[c] * vstride + i;
            v128_t wc = wasm_f32x4_splat(w[c]);
            a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(wasm_v128_load(vr), wc));
            a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(wasm_v128_load(vr + 4), wc));
            a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(wasm_v128_load(vr + 8), wc));
            a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(wasm_v128_load(vr + 12), wc));
        }
        wasm_v128_store(o + i, a0);
        wasm_v128_store(o + i + 4, a1);
        wasm_v128_store(o + i + 8, a2);
        wasm_v128_store(o + i + 12, a3);
    }
    for (; i + 4 <= d; i += 4) {
        v128_t a = wasm_f32x4_mul(wasm_v128_load(o + i), fv);
        for (int c = 0; c < cnt; c++)
            a = wasm_f32x4_add(a, wasm_f32x4_mul(wasm_v128_load(v + (size_t)slots[c] * vstride + i),
                                                 wasm_f32x4_splat(w[c])));
        wasm_v128_store(o + i, a);
    }
    for (; i < d; i++) {
        float a = o[i] * f;
        for (int c = 0; c < cnt; c++) a = a + w[c] * v[(size_t)slots[c] * vstride + i];
        o[i] = a;
    }
}

#define GROUP 8 /* query heads attended together (those sharing one KV head; more are taken in turns) */

/* Query heads h0 .. h0+ng-1 of one token, all reading one KV head, over keys lo..hi-1 of a sequence whose page
 * list is pages[off ..]. Per chunk of keys: their slots once (no division per key), the scores of every head,
 * then each head's running softmax and output. */
typedef struct {
    float kq_scale, softcap; /* softcap 0: none */
    int qpos;                /* the query's position: ALiBi's distances */
    const float *slope;      /* (ng,) ALiBi slopes, or NULL */
    const float *sink;       /* (ng,) sink logits, or NULL */
} Scoring;

static void attend_heads(float *o, const float *q, int ng, const float *kc, const float *vc, int kstride,
                         int vstride, const int32_t *pages, int page_size, int off, int lo, int hi, int head_dim,
                         int head_dim_v, const Scoring *sc_) {
    float kq_scale = sc_->kq_scale, softcap = sc_->softcap;
    float scores[GROUP][CHUNK], m[GROUP], l[GROUP];
    int slots[CHUNK];
    for (int g = 0; g < ng; g++) {
        m[g] = -__builtin_inff();
        l[g] = 0.0f;
        for (int i = 0; i < head_dim_v; i++) o[g * head_dim_v + i] = 0.0f;
    }
    for (int j0 = lo; j0 < hi; j0 += CHUNK) {
        int cnt = hi - j0 < CHUNK ? hi - j0 : CHUNK;
        int page = off + j0 / page_size, r = j0 % page_size;
        for (int c = 0; c < cnt; c++) {
            slots[c] = pages[page] * page_size + r;
            if (++r == page_size) {
                r = 0;
                page++;
            }
        }
        for (int c = 0; c < cnt; c++) {
            const float *k = kc + (size_t)slots[c] * kstride;
            for (int g = 0; g < ng; g++) scores[g][c] = dot_f32(q + g * head_dim, k, head_dim) * kq_scale;
        }
        if (softcap > 0.0f)
            for (int g = 0; g < ng; g++)
                for (int c = 0; c < cnt; c++)
                    scores[g][c] = softcap * wasm_f32x4_extract_lane(tanh_x4(wasm_f32x4_splat(scores[g][c] / softcap)), 0);
        if (sc_->slope) /* ggml's mask holds -|p_j - p|; soft_max adds slope times it */
            for (int g = 0; g < ng; g++)
                for (int c = 0; c < cnt; c++) {
                    int d = j0 + c - sc_->qpos;
                    scores[g][c] -= sc_->slope[g] * (float)(d < 0 ? -d : d);
                }
        for (int g = 0; g < ng; g++) {
            float *sc = scores[g];
            float cmax = -__builtin_inff();
            for (int c = 0; c < cnt; c++) cmax = sc[c] > cmax ? sc[c] : cmax;
            float f = 1.0f;
            if (cmax > m[g]) {
                f = m[g] == -__builtin_inff() ? 0.0f : exp_f(m[g] - cmax);
                l[g] *= f;
                m[g] = cmax;
            }
            int c = 0;
            v128_t mv = wasm_f32x4_splat(m[g]);
            for (; c + 4 <= cnt; c += 4) wasm_v128_store(sc + c, exp_x4(wasm_f32x4_sub(wasm_v128_load(sc + c), mv)));
            for (; c < cnt; c++) sc[c] = exp_f(sc[c] - m[g]);
            for (c = 0; c < cnt; c++) l[g] += sc[c];
            scale_accumulate(o + g * head_dim_v, f, sc, vc, slots, vstride, cnt, head_dim_v);
        }
    }
    for (int g = 0; g < ng; g++) {
        if (sc_->sink) { /* the sink joins the max and the denominator, not the values */
            float s = sc_->sink[g], top = s > m[g] ? s : m[g];
            float f = m[g] == -__builtin_inff() ? 0.0f : exp_f(m[g] - top);
            l[g] = l[g] * f + exp_f(s - top);
            for (int i = 0; i < head_dim_v; i++) o[g * head_dim_v + i] *= f;
        }
        if (l[g] > 0.0f) {
            float inv = 1.0f / l[g];
            for (int i = 0; i < head_dim_v; i++) o[g * head_dim_v + i] *= inv;
        }
    }
}

/* ALiBi's slope of head h as ggml's soft_max computes it (llamay.kernels.portable.alibi_slope) */
static float alibi_slope(int h, int n_head, float max_bias) {
    int n2 = 1;
    while (n2 * 2 <= n_head) n2 *= 2;
    float base = h < n2 ? -max_bias / n2 : -(max_bias / 2.0f) / n2;
    int power = h < n2 ? h + 1 : 2 * (h - n2) + 1;
    return exp_f(base * (float)power * 0.693147180559945f); /* (2^base)^power, freestanding: no powf */
}

/* out (n, n_head * head_dim_v) = softmax(q k^T kq_scale) v over the keys of each token's sequence; the scores
 * soft-capped (softcap > 0: softcap tanh(s / softcap)), minus slope_h |p_j - p| (ALiBi, max_bias > 0), sinks
 * (n_head,) joined to the denominator (NULL: none).
 * Token i (position pos[i], sequence seq[i]) sees, causal: positions max(0, p - window + 1) .. p
 * (window 0: 0 .. p); non-causal: 0 .. seq_len[seq] - 1. Query head h reads KV head h / (n_head / n_head_kv). */
EXPORT void llamay_attention(float *out, const float *q, const float *k_cache, const float *v_cache, int32_t layer,
                             int32_t n_slots, int32_t n, const int32_t *pos, const int32_t *seq, const int32_t *pages,
                             const int32_t *page_off, const int32_t *seq_len, int32_t page_size, int32_t n_head,
                             int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v, float kq_scale, int32_t causal,
                             int32_t window, float softcap, float max_bias, const float *sinks) {
    attention_units(out, q, k_cache, v_cache, layer, n_slots, n, pos, seq, pages, page_off, seq_len, page_size, n_head,
                    n_head_kv, head_dim, head_dim_v, kq_scale, causal, window, softcap, max_bias, sinks,
                    n_head / n_head_kv, 0, n * n_head_kv, 1);
}

/* llamay_attention's units u_first, u_first + step, ... below u_end, a unit being (token i, KV head kv, sub-group
 * s): query heads kv * group + s * per .. + per - 1 of token i (the last sub-group may hold fewer), per = group
 * (one unit a KV head) or fewer (more, smaller units: a decode step's few KV heads spread over the threads). A
 * kernel thread's share (llamay_exec_part: every nparts-th unit, so a causal prefill's longer rows spread over the
 * threads). Each query head's output is computed by the same code from the same inputs whichever thread runs it
 * and whichever heads share its unit (attend_heads keeps every head's scores, softmax and sums apart). */
void attention_units(float *out, const float *q, const float *k_cache, const float *v_cache, int32_t layer,
                     int32_t n_slots, int32_t n, const int32_t *pos, const int32_t *seq, const int32_t *pages,
                     const int32_t *page_off, const int32_t *seq_len, int32_t page_size, int32_t n_head,
                     int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v, float kq_scale, int32_t causal,
                     int32_t window, float softcap, float max_bias, const float *sinks, int32_t per, int32_t u_first,
                     int32_t u_end, int32_t step) {
    (void)n;
    int group = n_head / n_head_kv, nsub = (group + per - 1) / per;
    float slopes[GROUP];
    int kdim = n_head_kv * head_dim, vdim = n_head_kv * head_dim_v;
    const float *kc = k_cache + (size_t)layer * n_slots * kdim;
    const float *vc = v_cache + (size_t)layer * n_slots * vdim;
    for (int u = u_first; u < u_end; u += step) {
        int i = u / (n_head_kv * nsub), r = u % (n_head_kv * nsub), kv = r / nsub, sub = r % nsub;
        int p = pos[i], s = seq[i];
        int lo = 0, hi;
        if (causal) {
            lo = window && p - window + 1 > 0 ? p - window + 1 : 0;
            hi = p + 1;
        } else {
            hi = seq_len[s];
        }
        int g_end = (sub + 1) * per < group ? (sub + 1) * per : group;
        for (int g0 = sub * per; g0 < g_end; g0 += GROUP) {
            int h = kv * group + g0, ng = g_end - g0 < GROUP ? g_end - g0 : GROUP;
            for (int g = 0; g < ng && max_bias > 0.0f; g++) slopes[g] = alibi_slope(h + g, n_head, max_bias);
            Scoring sc = {kq_scale, softcap, p, max_bias > 0.0f ? slopes : 0, sinks ? sinks + h : 0};
            attend_heads(out + ((size_t)i * n_head + h) * head_dim_v, q + ((size_t)i * n_head + h) * head_dim, ng,
                         kc + kv * head_dim, vc + kv * head_dim_v, kdim, vdim, pages, page_size, page_off[s], lo, hi,
                         head_dim, head_dim_v, &sc);
        }
    }
}
