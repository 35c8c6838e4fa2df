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
