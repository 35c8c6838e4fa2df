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

EXPORT int32_t llamay_exec(const int32_t *c) {
    switch (c[0]) {
        LLAMAY_EXEC_CASES
    default:
        return -100;
    }
}

/* Part `part` of `nparts` of the command at `cmd`, for kernel threads over one shared memory: a matmul computes
 * its share of the weight rows (rows m * part / nparts .. m * (part + 1) / nparts), converting the activation rows
 * into its own scratch (scratch + part * llamay_act_bytes rounded up to 16: redundant work of n * k, so no thread
 * waits for another before its rows); attention computes every nparts-th (token, KV head) unit; any other
 * command runs whole in part 0 only (small: norms, rope, element-wise ops). Run over every part, the result is
 * llamay_exec's, bit for bit (each output element is computed by the same code from the same inputs). */
EXPORT int32_t llamay_exec_part(const int32_t *c, int32_t part, int32_t nparts) {
    if (c[0] == LLAMAY_OP_ATTENTION) { /* every nparts-th (token, KV head) unit: see attention_units */
        attention_units(P(1), P(2), P(3), P(4), I(5), I(6), I(7), P(8), P(9), P(10), P(11), P(12), I(13), I(14), I(15),
                        I(16), I(17), F(18), I(19), I(20), F(21), F(22), P(23), part, I(7) * I(15), nparts);
        return 0;
    }
    if (c[0] != LLAMAY_OP_MATMUL) return part == 0 ? llamay_exec(c) : 0;
    int32_t type = I(1), n = I(5), k = I(6), m = I(7);
    int32_t lo = (int32_t)((int64_t)m * part / nparts), hi = (int32_t)((int64_t)m * (part + 1) / nparts);
    uint32_t share = ((uint32_t)llamay_act_bytes(type, n, k) + 15u) & ~15u;
    uint8_t *scratch = (uint8_t *)P(8) + (size_t)share * (uint32_t)part;
    return matmul_rows(type, P(2), P(3), P(4), n, k, m, scratch, lo, hi);
}
