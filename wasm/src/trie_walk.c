/* The token-trie walk over a DFA's flat tables (op trie_walk), for the constraint masks: llamay's
 * core/kernels/trie_walk.py is the reference (table layouts, the registers in ctl, the results), followed line
 * by line. The walk stops at a DFA entry not computed yet and resumes from ctl once the caller wrote it. */
#include "common.h"

enum { NODE = 4, SET = 9, INFO = 17, FIRST = 1, LOOP = 9 };
enum { EXIT = 1, ONLY_EXIT = 2, LOOP_KNOWN = 4 };
enum { UNKNOWN = -2 };
enum { I, HI, HEAVY, BUDGET, N_EXITS, RECORD, CHAINS, MISS_STATE, MISS_BYTE, VISITED, R_NEXT, R_COUNT, R_START,
       FRESH, D0, N_WORDS };
enum { DONE, HEAVY_CUT, NEED_STEP, NEED_LOOP };

INLINE void set_tokens(uint32_t *out, const int32_t *tok_order, int32_t lo, int32_t hi) {
    for (int32_t j = lo; j < hi; j++) {
        int32_t t = tok_order[j];
        out[t >> 5] |= 1u << (t & 31);
    }
}

INLINE int subset(const uint32_t *a, const uint32_t *b) {
    for (int k = 0; k < 8; k++)
        if (a[k] & ~b[k]) return 0;
    return 1;
}

/* 1: every string of at most n bytes of `set` is alive from s (each state on the way takes the whole set to one
 * next state); 0: not; -1: an entry is missing (named in ctl) */
static int chain(const int32_t *trans, int32_t s, const uint32_t *set, int32_t n, int32_t *ctl) {
    int low = -1;
    for (int k = 0; k < 8; k++)
        if (set[k]) {
            low = 32 * k + __builtin_ctz(set[k]);
            break;
        }
    for (int32_t step = 0; step < n; step++) {
        int32_t t = trans[256 * s + low];
        if (t == UNKNOWN) {
            ctl[MISS_STATE] = s;
            ctl[MISS_BYTE] = low;
            return -1;
        }
        if (t < 0) return 0;
        for (int k = 0; k < 8; k++)
            for (uint32_t w = set[k]; w; w &= w - 1)
                if (trans[256 * s + 32 * k + __builtin_ctz(w)] != t) return 0;
        if (t == s) return 1;
        s = t;
    }
    return 1;
}

EXPORT int32_t llamay_trie_walk(uint32_t *out, const int32_t *nodes, const int32_t *first_tok,
                                const int32_t *tok_order, const uint32_t *sets, const int32_t *trans,
                                const uint32_t *info, int32_t *states, int32_t *exits, int32_t *ctl) {
    if (ctl[FRESH]) { /* a walk starts: out cleared, the start state at its depth */
        ctl[FRESH] = 0;
        for (int32_t w = 0; w < ctl[N_WORDS]; w++) out[w] = 0;
        states[ctl[D0]] = ctl[R_START];
    }
    int32_t i = ctl[I], hi = ctl[HI], heavy = ctl[HEAVY], budget = ctl[BUDGET], n_ex = ctl[N_EXITS];
    int32_t record = ctl[RECORD], chains = ctl[CHAINS], visited = ctl[VISITED];
    int32_t status = DONE;
    for (;;) {
        while (i < hi) {
            const int32_t *node = nodes + NODE * i;
            int32_t d = node[1], end = node[2], k = node[3];
            int32_t s = states[d - 1];
            int32_t ns = trans[256 * s + node[0]];
            if (ns == UNKNOWN) {
                ctl[MISS_STATE] = s;
                ctl[MISS_BYTE] = node[0];
                status = NEED_STEP;
                break;
            }
            if (ns < 0) {
                i = end;
                continue;
            }
            set_tokens(out, tok_order, first_tok[i], first_tok[i + 1]);
            uint32_t fl = info[INFO * ns];
            if (k >= 0 && !(fl & EXIT) && subset(sets + SET * k, info + INFO * ns + FIRST)) {
                if (!(fl & LOOP_KNOWN)) {
                    ctl[MISS_STATE] = ns;
                    status = NEED_LOOP;
                    break;
                }
                int whole = subset(sets + SET * k, info + INFO * ns + LOOP);
                if (!whole && chains) {
                    whole = chain(trans, ns, sets + SET * k, (int32_t)sets[SET * k + 8], ctl);
                    if (whole < 0) {
                        status = NEED_STEP;
                        break;
                    }
                }
                if (whole) { /* every token below is allowed */
                    set_tokens(out, tok_order, first_tok[i + 1], first_tok[end]);
                    visited++;
                    i = end;
                    continue;
                }
            }
            visited++;
            if (fl & EXIT) {
                if (record && end > i + 1) {
                    exits[n_ex++] = i;
                    heavy += end - i - 1;
                    if (budget >= 0 && heavy > budget) {
                        status = HEAVY_CUT;
                        break;
                    }
                }
                if (fl & ONLY_EXIT) {
                    i = end;
                    continue;
                }
            }
            states[d] = ns;
            i++;
        }
        if (status != DONE || ctl[R_NEXT] >= ctl[R_COUNT]) break;
        int32_t ex = exits[ctl[R_NEXT]++];
        i = ex + 1;
        hi = nodes[NODE * ex + 2];
        states[nodes[NODE * ex + 1]] = ctl[R_START];
    }
    ctl[I] = i;
    ctl[HI] = hi;
    ctl[HEAVY] = heavy;
    ctl[N_EXITS] = n_ex;
    ctl[VISITED] = visited;
    return status;
}
