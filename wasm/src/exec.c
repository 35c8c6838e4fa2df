/* One entry point for every kernel: `llamay_exec(cmd)` runs the command at `cmd`, an array of 32-bit words in
 * linear memory: the op code (LLAMAY_OP_*, numbered as `runtime.OPS`), then the kernel's arguments as its export
 * takes them, each i32 and f32 in one word (the f32 as its bits), each f64 in two (little-endian, 4-aligned). It returns what the kernel returns (0 for the void ones), or -100 for an
 * unknown op.
 *
 * Why: under Pyodide a call from Python into wasm costs about 0.2 µs per argument on top of ~0.5 µs (each
 * argument is converted to a JS value); a kernel call takes 4 to 20 of them. The backend packs a command once,
 * keeps it (a decode step calls the same kernels with the same arguments at every token: the positions and
 * token ids live in buffers), and calls this with one argument. */
#include "common.h"
#include "kernels.h"
/* the op codes, the exports' prototypes and the dispatch's cases, generated from llamay.kernels.ops (codegen.py) */
#include "generated_ops.h"

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
#define ATTENTION_UNITS_PER_PART 8 /* fewer (token, KV head) units than this a part: split them by query head */

EXPORT int32_t llamay_exec(const int32_t *c) {
    switch (c[0]) {
        LLAMAY_EXEC_CASES
    default:
        return -100;
    }
}

/* An element-wise command: output element i from input elements i alone (the SIMD lanes apart, the tail of a
 * count not a multiple of 4 through the same lane code), so any 4-aligned range of it gives the whole's values
 * there. nbuf: its buffers at words 1 .. nbuf, the first written (in place when nbuf is 1), the others read;
 * count: the word of its element count; words: the command's. {0}: not element-wise. */
typedef struct {
    int8_t nbuf, count, words;
} elementwise;

static elementwise elementwise_of(int32_t op) {
    switch (op) {
    case LLAMAY_OP_ADD:
    case LLAMAY_OP_SWIGLU:
        return (elementwise){3, 4, 5};
    case LLAMAY_OP_GEGLU: /* + the GELU table */
        return (elementwise){3, 4, 6};
    case LLAMAY_OP_SWIGLU_OAI: /* + alpha, limit: f64 */
        return (elementwise){3, 4, 9};
    case LLAMAY_OP_GELU: /* x, count, the table */
        return (elementwise){1, 2, 4};
    case LLAMAY_OP_SCALE: /* x, an f64, count */
    case LLAMAY_OP_SOFTCAP:
        return (elementwise){1, 4, 5};
    case LLAMAY_OP_CLAMP: /* x, lo and hi: f64, count */
        return (elementwise){1, 6, 7};
    default:
        return (elementwise){0, 0, 0};
    }
}

/* Part `part`'s share of `width` things (weight rows, elements): [lo, hi), the bounds at multiples of 16 (a cache
 * line of floats between parts, and every element in the lanes it has in the whole), the last part to the end. */
INLINE void share_of(int32_t width, int32_t part, int32_t nparts, int32_t *lo, int32_t *hi) {
    *lo = part == 0 ? 0 : (int32_t)((int64_t)width * part / nparts) & ~15;
    *hi = part == nparts - 1 ? width : (int32_t)((int64_t)width * (part + 1) / nparts) & ~15;
}

int32_t split_kind(const int32_t *c) {
    if (c[0] == LLAMAY_OP_MATMUL) return SPLIT_MATMUL;
    if (c[0] == LLAMAY_OP_ATTENTION) return SPLIT_ATTENTION;
    return elementwise_of(c[0]).nbuf ? SPLIT_ELEMENTS : SPLIT_NONE;
}

/* What a split matmul or element-wise command touches, for the barriers (threads.c): up to 3 accesses. A part's
 * share of a write or a read is given by `width`: the part that owns element e of the range is the one whose
 * share_of(width) holds e % width; width 0: every part reads the whole range. */
int32_t command_accesses(const int32_t *c, access *acc) {
    if (c[0] == LLAMAY_OP_MATMUL) { /* out (n, m) by weight rows: column e % m; x (n, k) read whole */
        uint32_t out = (uint32_t)c[2], x = (uint32_t)c[4], n = (uint32_t)c[5], k = (uint32_t)c[6], m = (uint32_t)c[7];
        acc[0] = (access){out, out + 4 * n * m, m, 1};
        acc[1] = (access){x, x + 4 * n * k, 0, 0};
        return 2;
    }
    elementwise e = elementwise_of(c[0]);
    uint32_t count = (uint32_t)c[e.count];
    for (int b = 0; b < e.nbuf; b++) {
        uint32_t at = (uint32_t)c[1 + b];
        acc[b] = (access){at, at + 4 * count, count, b == 0};
    }
    return e.nbuf;
}

/* Part `part` of `nparts` of the command at `cmd`, for kernel threads over one shared memory: a matmul computes
 * its share of the weight rows (share_of(m)), converting the activation rows into its own scratch (scratch + part
 * * llamay_act_bytes rounded up to 16: redundant work of n * k, so no thread waits for another before its rows);
 * attention computes every nparts-th unit (attention_units); an element-wise command its share of the elements
 * (share_of(count)), so a part's share of `add` or `swiglu` right after matmuls of as many rows is the elements
 * it computed itself; any other command runs whole in part 0 only (small: norms, rope, KV stores). Run over every
 * part, the result is llamay_exec's, bit for bit (each output element is computed by the same code from the same
 * inputs). */
EXPORT int32_t llamay_exec_part(const int32_t *c, int32_t part, int32_t nparts) {
    int32_t lo, hi;
    switch (split_kind(c)) {
    case SPLIT_ATTENTION: {
        int32_t n = I(7), n_head = I(14), n_head_kv = I(15), group = n_head / n_head_kv;
        /* a unit a (token, KV head) when there are plenty; else one a query head (a decode step: 3 KV heads over
         * 2 threads would split 2:1, its 9 query heads split 5:4) */
        int32_t per = n * n_head_kv >= ATTENTION_UNITS_PER_PART * nparts ? group : 1;
        attention_units(P(1), P(2), P(3), P(4), I(5), I(6), n, P(8), P(9), P(10), P(11), P(12), I(13), n_head,
                        n_head_kv, I(16), I(17), F(18), I(19), I(20), F(21), F(22), P(23), per, part,
                        n * n_head_kv * ((group + per - 1) / per), nparts);
        return 0;
    }
    case SPLIT_MATMUL: {
        int32_t type = I(1), n = I(5), k = I(6), m = I(7);
        share_of(m, part, nparts, &lo, &hi);
        uint32_t share = ((uint32_t)llamay_act_bytes(type, n, k) + 15u) & ~15u;
        uint8_t *scratch = (uint8_t *)P(8) + (size_t)share * (uint32_t)part;
        return matmul_rows(type, P(2), P(3), P(4), n, k, m, scratch, lo, hi);
    }
    case SPLIT_ELEMENTS: {
        elementwise e = elementwise_of(c[0]);
        share_of(c[e.count], part, nparts, &lo, &hi);
        if (lo >= hi) return 0;
        int32_t cmd[9]; /* the command over elements lo .. hi */
        __builtin_memcpy(cmd, c, 4 * (size_t)e.words);
        for (int b = 1; b <= e.nbuf; b++) cmd[b] += 4 * lo;
        cmd[(int)e.count] = hi - lo;
        return llamay_exec(cmd);
    }
    default:
        return part == 0 ? llamay_exec(c) : 0;
    }
}
