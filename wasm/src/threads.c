/* Kernel threads over one shared memory (the threads build only: -matomics, a shared memory import). Every thread
 * runs an instance of this module on the same memory: part 0 is the engine's own thread, which calls
 * llamay_run_list with a command list (a whole forward pass, queued by the backend until its sync); the others
 * sit in llamay_thread_loop. One list costs one wake-up, then a barrier at each change between a split command (a
 * matmul by rows, attention by heads: llamay_exec_part) and the small commands part 0 runs alone; consecutive matmuls that do not read each
 * other's output (Q, K, V; gate, up) share one. Waiting spins a little first (a wake-up through the OS costs
 * tens of µs, a layer's small commands a few), then sleeps in memory.atomic.wait32.
 *
 * The control block, 32-bit words at `ctl`: */
#include "common.h"
#include "generated_ops.h"

#ifdef LLAMAY_THREADS
enum {
    CTL_GEN,     /* bumped by part 0 when a list is ready (or to stop) */
    CTL_COUNT,   /* commands in the list */
    CTL_LIST,    /* address of the list: `count` command addresses */
    CTL_NPARTS,  /* threads, part 0 included */
    CTL_ARRIVED, /* threads at the barrier */
    CTL_BGEN,    /* bumped when the last thread reaches the barrier */
    CTL_RC,      /* the first non-zero result of a command, else 0 */
    CTL_STOP,    /* 1: llamay_thread_loop returns */
    CTL_WORDS
};
#define SPINS 4096

typedef _Atomic int32_t atomic_i32;
INLINE int32_t load(int32_t *ctl, int w) { return __c11_atomic_load((atomic_i32 *)(ctl + w), __ATOMIC_SEQ_CST); }

/* wait while ctl[w] == seen: spin, then sleep */
static void wait_change(int32_t *ctl, int w, int32_t seen) {
    for (int i = 0; i < SPINS; i++)
        if (load(ctl, w) != seen) return;
    while (load(ctl, w) == seen) __builtin_wasm_memory_atomic_wait32(ctl + w, seen, -1);
}

static void barrier(int32_t *ctl) {
    int32_t g = load(ctl, CTL_BGEN);
    if (__c11_atomic_fetch_add((atomic_i32 *)(ctl + CTL_ARRIVED), 1, __ATOMIC_SEQ_CST) == ctl[CTL_NPARTS] - 1) {
        __c11_atomic_store((atomic_i32 *)(ctl + CTL_ARRIVED), 0, __ATOMIC_SEQ_CST);
        __c11_atomic_fetch_add((atomic_i32 *)(ctl + CTL_BGEN), 1, __ATOMIC_SEQ_CST);
        __builtin_wasm_memory_atomic_notify(ctl + CTL_BGEN, (uint32_t)-1);
    } else {
        wait_change(ctl, CTL_BGEN, g);
    }
}

INLINE int is_matmul(const int32_t *c) { return c[0] == LLAMAY_OP_MATMUL; }
/* split over the parts (llamay_exec_part): matmuls by weight rows, attention by (token, KV head) */
INLINE int is_split(const int32_t *c) { return is_matmul(c) || c[0] == LLAMAY_OP_ATTENTION; }
/* does matmul b read what matmul a writes? (its input is a's output) */
INLINE int reads(const int32_t *b, const int32_t *a) { return b[4] == a[2]; }
/* must every part finish a before any starts b? Yes between a split command and one part 0 runs alone, and between
 * two split ones, except matmuls where b does not read a's output (Q, K, V of one input; gate and up) */
INLINE int needs_barrier(const int32_t *b, const int32_t *a) {
    if (!is_split(a) && !is_split(b)) return 0;
    return !(is_matmul(a) && is_matmul(b) && !reads(b, a));
}

int32_t llamay_exec_part(const int32_t *c, int32_t part, int32_t nparts); /* exec.c */

/* Part `part` of the list; every part takes the same barriers, decided from the list alone. */
static void run_list(int32_t *ctl, int32_t part) {
    const int32_t n = ctl[CTL_COUNT], nparts = ctl[CTL_NPARTS];
    const int32_t *list = (const int32_t *)(uintptr_t)(uint32_t)ctl[CTL_LIST];
    for (int32_t i = 0; i < n; i++) {
        const int32_t *c = (const int32_t *)(uintptr_t)(uint32_t)list[i];
        if (i > 0 && needs_barrier(c, (const int32_t *)(uintptr_t)(uint32_t)list[i - 1])) barrier(ctl);
        int32_t rc = llamay_exec_part(c, part, nparts);
        if (rc) __c11_atomic_compare_exchange_strong((atomic_i32 *)(ctl + CTL_RC), &(int32_t){0}, rc,
                                                     __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    barrier(ctl); /* part 0 returns when every part is done */
}

/* the control block's size in bytes (the caller allocates and zeroes it, and sets CTL_NPARTS) */
EXPORT int32_t llamay_ctl_bytes(void) { return 4 * CTL_WORDS; }

/* Part 0: run `count` commands (addresses at `list`) on all the threads; returns the first non-zero result. */
EXPORT int32_t llamay_run_list(int32_t *ctl, const int32_t *list, int32_t count) {
    ctl[CTL_LIST] = (int32_t)(uintptr_t)list;
    ctl[CTL_COUNT] = count;
    ctl[CTL_RC] = 0;
    __c11_atomic_fetch_add((atomic_i32 *)(ctl + CTL_GEN), 1, __ATOMIC_SEQ_CST);
    __builtin_wasm_memory_atomic_notify(ctl + CTL_GEN, (uint32_t)-1);
    run_list(ctl, 0);
    return load(ctl, CTL_RC);
}

/* Parts 1 .. nparts-1: wait for lists and run their share until llamay_stop_threads. `seen`: CTL_GEN as the
 * thread's starter read it before starting the thread (read here, a list posted in between would be missed). */
EXPORT int32_t llamay_thread_loop(int32_t *ctl, int32_t part, int32_t seen) {
    for (;;) {
        wait_change(ctl, CTL_GEN, seen);
        seen = load(ctl, CTL_GEN);
        if (load(ctl, CTL_STOP)) return 0;
        run_list(ctl, part);
    }
}

/* Part 0: make every llamay_thread_loop return. */
EXPORT void llamay_stop_threads(int32_t *ctl) {
    __c11_atomic_store((atomic_i32 *)(ctl + CTL_STOP), 1, __ATOMIC_SEQ_CST);
    __c11_atomic_fetch_add((atomic_i32 *)(ctl + CTL_GEN), 1, __ATOMIC_SEQ_CST);
    __builtin_wasm_memory_atomic_notify(ctl + CTL_GEN, (uint32_t)-1);
}
#endif
