"""The token-trie walk over a DFA's flat tables (op `trie_walk`), compiled: `llamay.kernels.trie_walk` is the
reference (layouts, registers, results), followed line by line. Words are int32: bit sets
are read as `& 0xFFFFFFFF` (int64) so that shifts see no sign, and a token's bit 31 is stored truncated."""

from __future__ import annotations

from numba import njit

from llamay.kernels import trie_walk as K


@njit(cache=True)
def _set_tokens(out, tok_order, lo, hi):
    for j in range(lo, hi):
        t = tok_order[j]
        out[t >> 5] = out[t >> 5] | (1 << (t & 31))


@njit(cache=True)
def _subset(a, ia, b, ib):
    for k in range(8):  # noqa: SIM110 (a loop: numba compiles no generator in all())
        if a[ia + k] & ~b[ib + k]:
            return False
    return True


@njit(cache=True)
def _chain(trans, s, sets, at, n, ctl):
    low = -1
    for k in range(8):
        w = sets[at + k] & 0xFFFFFFFF
        if w:
            b = 0
            while not (w >> b) & 1:
                b += 1
            low = 32 * k + b
            break
    for _ in range(n):
        t = trans[256 * s + low]
        if t == K.UNKNOWN:
            ctl[K.MISS_STATE] = s
            ctl[K.MISS_BYTE] = low
            return -1
        if t < 0:
            return 0
        for k in range(8):
            w = sets[at + k] & 0xFFFFFFFF
            b = 0
            while w:
                if w & 1 and trans[256 * s + 32 * k + b] != t:
                    return 0
                w >>= 1
                b += 1
        if t == s:
            return 1
        s = t
    return 1


@njit(cache=True)
def _start(out, states, ctl):
    ctl[K.FRESH] = 0
    for w in range(ctl[K.N_WORDS]):
        out[w] = 0
    states[ctl[K.D0]] = ctl[K.R_START]


@njit(cache=True)
def _shortcut(sets, at, trans, info, ns, chains, ctl):
    fl = info[K.INFO * ns]
    if fl & K.EXIT or not _subset(sets, at, info, K.INFO * ns + K.FIRST):
        return 0
    if not fl & K.LOOP_KNOWN:
        ctl[K.MISS_STATE] = ns
        return -K.NEED_LOOP
    if _subset(sets, at, info, K.INFO * ns + K.LOOP):
        return 1
    if not chains:
        return 0
    whole = _chain(trans, ns, sets, at, sets[at + 8], ctl)
    return -K.NEED_STEP if whole < 0 else whole


@njit(cache=True)
def trie_walk(out, nodes, first_tok, tok_order, sets, trans, info, states, exits, ctl):
    if ctl[K.FRESH]:
        _start(out, states, ctl)
    i, hi, heavy, budget, n_ex = ctl[K.I], ctl[K.HI], ctl[K.HEAVY], ctl[K.BUDGET], ctl[K.N_EXITS]
    record, chains, visited = ctl[K.RECORD], ctl[K.CHAINS], ctl[K.VISITED]
    status = K.DONE
    while True:
        while i < hi:
            at = K.NODE * i
            d = nodes[at + 1]
            end = nodes[at + 2]
            s = states[d - 1]
            ns = trans[256 * s + nodes[at]]
            if ns == K.UNKNOWN:
                ctl[K.MISS_STATE] = s
                ctl[K.MISS_BYTE] = nodes[at]
                status = K.NEED_STEP
                break
            if ns < 0:
                i = end
                continue
            _set_tokens(out, tok_order, first_tok[i], first_tok[i + 1])
            k = nodes[at + 3]
            if k >= 0:
                whole = _shortcut(sets, K.SET * k, trans, info, ns, chains, ctl)
                if whole < 0:
                    status = -whole
                    break
                if whole:
                    _set_tokens(out, tok_order, first_tok[i + 1], first_tok[end])
                    visited += 1
                    i = end
                    continue
            visited += 1
            fl = info[K.INFO * ns]
            if fl & K.EXIT:
                if record and end > i + 1:
                    exits[n_ex] = i
                    n_ex += 1
                    heavy += end - i - 1
                    if budget >= 0 and heavy > budget:
                        status = K.HEAVY_CUT
                        break
                if fl & K.ONLY_EXIT:
                    i = end
                    continue
            states[d] = ns
            i += 1
        if status != K.DONE or ctl[K.R_NEXT] >= ctl[K.R_COUNT]:
            break
        ex = exits[ctl[K.R_NEXT]]
        ctl[K.R_NEXT] += 1
        i, hi = ex + 1, nodes[K.NODE * ex + 2]
        states[nodes[K.NODE * ex + 1]] = ctl[K.R_START]
    ctl[K.I] = i
    ctl[K.HI] = hi
    ctl[K.HEAVY] = heavy
    ctl[K.N_EXITS] = n_ex
    ctl[K.VISITED] = visited
    return status
