/* Kernel threads over one shared memory (the threads build only: -matomics, a shared memory import). Every thread
 * runs an instance of this module on the same memory: part 0 is the engine's own thread, which calls
 * llamay_run_list with a command list (a whole forward pass, queued by the backend until its sync); the others
 * sit in llamay_thread_loop. One list costs one wake-up, then a barrier wherever a part could read what another
 * part wrote since the last barrier, or write what another read (decided from the list alone, the same way in
 * every part: place). Split commands (llamay_exec_part: matmuls by weight rows, attention by heads, element-wise
 * ops by elements) share a stretch when their parts touch only their own elements: Q, K and V of one input; gate,
 * up and the SwiGLU of their rows; a matmul and the residual add of its rows (one token). The commands part 0
 * runs alone (norms, RoPE, KV stores) share one too; the element-wise ops among them run there whole.
 *
 * Waiting spins first, then sleeps in memory.atomic.wait32; the last to arrive notifies only when someone sleeps.
 * A decode step has ~240 barriers, each waiting out the parts' skew and what part 0 runs alone (µs to tens of
 * µs), and a wake-up through the OS costs tens of µs: at 4096 spins (1-2 µs) nearly every barrier slept and 2
 * threads decoded no faster than 1, so a barrier spins ~0.1 ms. Between lists (the host's Python, ~1 ms a token)
 * the threads sleep soon.
 *
 * The control block, 32-bit words at `ctl`: */
#include "common.h"
#include "generated_ops.h"
#include "kernels.h"

#ifdef LLAMAY_THREADS
enum {
    CTL_GEN,      /* bumped by part 0 when a list is ready (or to stop) */
    CTL_COUNT,    /* commands in the list */
    CTL_LIST,     /* address of the list: `count` command addresses */
    CTL_NPARTS,   /* threads, part 0 included */
    CTL_ARRIVED,  /* threads at the barrier */
    CTL_BGEN,     /* bumped when the last thread reaches the barrier */
    CTL_RC,       /* the first non-zero result of a command, else 0 */
    CTL_STOP,     /* 1: llamay_thread_loop returns */
    CTL_SLEEPERS, /* threads in memory.atomic.wait32 (or about to be) */
    CTL_WORDS
};
#define SPIN_BARRIER (1 << 18) /* loads of a barrier's word before sleeping: 0.07-0.15 ms here */
#define SPIN_SHORT (1 << 12)   /* ... when the cores are busy (list_done) */
#define SPIN_IDLE (1 << 12)    /* loads of the list's word before sleeping */

typedef _Atomic int32_t atomic_i32;
INLINE int32_t load(int32_t *ctl, int w) { return __c11_atomic_load((atomic_i32 *)(ctl + w), __ATOMIC_SEQ_CST); }
INLINE int32_t add(int32_t *ctl, int w, int32_t v) {
    return __c11_atomic_fetch_add((atomic_i32 *)(ctl + w), v, __ATOMIC_SEQ_CST);
}

/* wait while ctl[w] == seen: spin, then sleep. A sleeper counts itself first: whoever bumps ctl[w] reads the count
 * after (seq_cst), so either it sees the sleeper and notifies, or the sleeper's wait sees the new value. */
static int wait_change(int32_t *ctl, int w, int32_t seen, int spins) {
    for (int i = 0; i < spins; i++)
        if (load(ctl, w) != seen) return 0;
    add(ctl, CTL_SLEEPERS, 1);
    while (load(ctl, w) == seen) __builtin_wasm_memory_atomic_wait32(ctl + w, seen, -1);
    add(ctl, CTL_SLEEPERS, -1);
    return 1; /* slept */
}

/* This thread's barrier waits (each instance has its own static data). When most of a list's waits sleep even
 * after the long spin, the cores are not all ours (more threads than free cores: another tab, other work): a
 * spinning thread then keeps the core from the thread it waits for (2 threads here beside a busy process: a
 * decode step took 41 ms spinning long, 23 short; alone, 1.7 of its 242 waits slept), so the next lists spin
 * short, and every 16th tries the long spin again. */
static struct {
    int spins, short_lists, waits, sleeps;
} waits = {SPIN_BARRIER, 0, 0, 0};

static void list_done(void) {
    if (waits.short_lists > 0) {
        if (--waits.short_lists == 0) waits.spins = SPIN_BARRIER;
    } else if (waits.waits >= 16 && waits.sleeps * 2 > waits.waits) {
        waits.spins = SPIN_SHORT;
        waits.short_lists = 16;
    }
    waits.waits = waits.sleeps = 0;
}

static void bump(int32_t *ctl, int w) {
    add(ctl, w, 1);
    if (load(ctl, CTL_SLEEPERS)) __builtin_wasm_memory_atomic_notify(ctl + w, (uint32_t)-1);
}

static void barrier(int32_t *ctl) {
    int32_t g = load(ctl, CTL_BGEN);
    if (add(ctl, CTL_ARRIVED, 1) == ctl[CTL_NPARTS] - 1) {
        __c11_atomic_store((atomic_i32 *)(ctl + CTL_ARRIVED), 0, __ATOMIC_SEQ_CST);
        bump(ctl, CTL_BGEN);
    } else {
        waits.waits++;
        waits.sleeps += wait_change(ctl, CTL_BGEN, g, waits.spins);
    }
}

/* The commands since the last barrier: what the split ones touch (exec.c command_accesses). */
#define STRETCH_ACCESSES 30
typedef struct {
    int kind; /* -1: none yet; else SPLIT_NONE (commands part 0 runs alone) or a split kind */
    int attention, n;
    access acc[STRETCH_ACCESSES];
} stretch;

/* may a part touch what another part touches (one of them writing)? Not when both take the same parts' shares of
 * the same elements (the owner of element e: share_of(width) holding e % width). */
INLINE int crosses(const access *a, const access *b) {
    if (!a->write && !b->write) return 0;
    if (a->hi <= b->lo || b->hi <= a->lo) return 0;
    return !(a->width && a->width == b->width && a->lo == b->lo);
}

enum { BARRIER = 1, SPLIT = 2 };

/* How c runs after the stretch: BARRIER if every part must finish the stretch before any part starts c (then the
 * stretch starts over at c), SPLIT if every part runs its share (llamay_exec_part), else part 0 runs it whole. An
 * element-wise op joins the stretch it follows: whole in part 0 among commands part 0 runs alone, split among
 * split ones. */
static int place(stretch *s, const int32_t *c) {
    int kind = split_kind(c);
    if (kind == SPLIT_ELEMENTS && s->kind == SPLIT_NONE) kind = SPLIT_NONE;
    access acc[3];
    int na = kind == SPLIT_MATMUL || kind == SPLIT_ELEMENTS ? command_accesses(c, acc) : 0;
    int cut = s->kind >= 0 && ((kind == SPLIT_NONE) != (s->kind == SPLIT_NONE) || kind == SPLIT_ATTENTION ||
                               s->attention || s->n + na > STRETCH_ACCESSES);
    for (int i = 0; i < na && !cut; i++)
        for (int j = 0; j < s->n && !cut; j++) cut = crosses(&acc[i], &s->acc[j]);
    if (cut || s->kind < 0) {
        s->kind = kind;
        s->attention = 0;
        s->n = 0;
    }
    s->attention |= kind == SPLIT_ATTENTION;
    for (int i = 0; i < na; i++) s->acc[s->n++] = acc[i];
    return (cut ? BARRIER : 0) | (kind != SPLIT_NONE ? SPLIT : 0);
}

int32_t llamay_exec(const int32_t *c);                                     /* exec.c */
int32_t llamay_exec_part(const int32_t *c, int32_t part, int32_t nparts); /* exec.c */

/* Part `part` of the list; every part takes the same barriers, decided from the list alone. */
static void run_list(int32_t *ctl, int32_t part) {
    const int32_t n = ctl[CTL_COUNT], nparts = ctl[CTL_NPARTS];
    const int32_t *list = (const int32_t *)(uintptr_t)(uint32_t)ctl[CTL_LIST];
    stretch s = {.kind = -1};
    for (int32_t i = 0; i < n; i++) {
        const int32_t *c = (const int32_t *)(uintptr_t)(uint32_t)list[i];
        int how = place(&s, c);
        if (how & BARRIER) barrier(ctl);
        int32_t rc = how & SPLIT ? llamay_exec_part(c, part, nparts) : part == 0 ? llamay_exec(c) : 0;
        if (rc) __c11_atomic_compare_exchange_strong((atomic_i32 *)(ctl + CTL_RC), &(int32_t){0}, rc,
                                                     __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    barrier(ctl); /* part 0 returns when every part is done */
    list_done();
}

/* out[i] = how command i of the list runs (place: 1 a barrier before it, 2 split over the parts), as every part
 * decides it; returns the barriers (the last, after the list, not counted). For the tests. */
EXPORT int32_t llamay_list_plan(const int32_t *list, int32_t count, int32_t *out) {
    stretch s = {.kind = -1};
    int32_t total = 0;
    for (int32_t i = 0; i < count; i++) {
        out[i] = place(&s, (const int32_t *)(uintptr_t)(uint32_t)list[i]);
        total += out[i] & BARRIER;
    }
    return total;
}

/* the control block's size in bytes (the caller allocates and zeroes it, and sets CTL_NPARTS) */
EXPORT int32_t llamay_ctl_bytes(void) { return 4 * CTL_WORDS; }

/* Part 0: run `count` commands (addresses at `list`) on all the threads; returns the first non-zero result. */
EXPORT int32_t llamay_run_list(int32_t *ctl, const int32_t *list, int32_t count) {
    ctl[CTL_LIST] = (int32_t)(uintptr_t)list;
    ctl[CTL_COUNT] = count;
    ctl[CTL_RC] = 0;
    bump(ctl, CTL_GEN);
    run_list(ctl, 0);
    return load(ctl, CTL_RC);
}

/* Parts 1 .. nparts-1: wait for lists and run their share until llamay_stop_threads. `seen`: CTL_GEN as the
 * thread's starter read it before starting the thread (read here, a list posted in between would be missed). */
EXPORT int32_t llamay_thread_loop(int32_t *ctl, int32_t part, int32_t seen) {
    for (;;) {
        wait_change(ctl, CTL_GEN, seen, SPIN_IDLE);
        seen = load(ctl, CTL_GEN);
        if (load(ctl, CTL_STOP)) return 0;
        run_list(ctl, part);
    }
}

/* Part 0: make every llamay_thread_loop return. */
EXPORT void llamay_stop_threads(int32_t *ctl) {
    __c11_atomic_store((atomic_i32 *)(ctl + CTL_STOP), 1, __ATOMIC_SEQ_CST);
    bump(ctl, CTL_GEN);
}
#endif
