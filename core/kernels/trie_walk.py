"""The token-trie walk over flat tables (the `trie_walk` op): which tokens a lazily built DFA allows.

The reference of the op, in pure Python over int32 buffers; the numba (native/kernels/trie_walk.py) and C
(wasm/src/trie_walk.c) kernels follow it line by line. The tables (core/constraints/kernel_masks.py fills them):

    nodes     (n_nodes, NODE)   byte, depth, skip (the node after the subtree), set (-1, or a row of `sets`)
    first_tok (n_nodes + 1,)    tokens at node i: tok_order[first_tok[i] : first_tok[i+1]]; below it, to skip[i]
    sets      (n_sets, SET)     for nodes with more than 16 nodes below: the bytes below (8 words), height
    trans     (cap, 256)        the DFA: next state, DEAD, or UNKNOWN (not computed yet: the walk asks for it)
    info      (cap, INFO)       per state: flags (EXIT, ONLY_EXIT, LOOP_KNOWN), first bytes (8), loop bytes (8)
    states    (max_depth + 2,)  the state at each depth of the current path (the walk's stack)
    exits     (cap_exits,)      nodes where control left a truncated stack (out), or ranges to walk (in)
    ctl       (CTL,)            the walk's registers, so that a walk suspended for a missing entry resumes

A walk stops with NEED_STEP (ctl[MISS_STATE], ctl[MISS_BYTE]) or NEED_LOOP (ctl[MISS_STATE]) when it meets a
transition or loop set not computed yet; the caller computes it with the automaton, writes it into the tables
and calls again: the walk resumes at the node it stopped at. The bits of allowed tokens are OR-ed into `out`
(n_vocab bits, little-endian words); the caller clears it.
"""

from __future__ import annotations

NODE = 4  # words per trie node
SET = 9  # words per shortcut set: 8 of bytes below, the height
INFO = 17  # words per DFA state: flags, first bytes (8), loop bytes (8)
FIRST, LOOP = 1, 9  # offsets in a state's info
EXIT, ONLY_EXIT, LOOP_KNOWN = 1, 2, 4  # state flags
DEAD, UNKNOWN = -1, -2  # trans entries besides state ids
SHORTCUT = 16  # nodes below which a subtree has a shortcut set (masks.py's _SHORTCUT)
# ctl registers; a call with FRESH set starts a walk: out's N_WORDS words cleared, state R_START at depth D0
I, HI, HEAVY, BUDGET, N_EXITS, RECORD, CHAINS, MISS_STATE, MISS_BYTE, VISITED, R_NEXT, R_COUNT, R_START = range(13)
FRESH, D0, N_WORDS = 13, 14, 15
CTL = 16
# results
DONE, HEAVY_CUT, NEED_STEP, NEED_LOOP = 0, 1, 2, 3
_SIGN = 1 << 31
_WRAP = 1 << 32


def _set_tokens(out, tok_order, lo: int, hi: int) -> None:
    for j in range(lo, hi):
        t = tok_order[j]
        v = out[t >> 5] | (1 << (t & 31))
        out[t >> 5] = v - _WRAP if v >= _SIGN else v


def _subset(a, ia: int, b, ib: int) -> bool:
    """Whether the 256-bit set a[ia : ia+8] is inside b[ib : ib+8]."""
    return all(not a[ia + k] & ~b[ib + k] for k in range(8))


def _chain(trans, s: int, sets, at: int, n: int, ctl) -> int:
    """1 when every string of at most n bytes from the set at sets[at] is alive from state s: each next state on
    the way takes all of the set to one state (a bounded string's counter, or a loop); 0 when not; -1 when an
    entry is missing (ctl names it)."""
    low = -1
    for k in range(8):
        w = sets[at + k] & 0xFFFFFFFF
        if w:
            low = 32 * k + ((w & -w).bit_length() - 1)
            break
    for _ in range(n):
        t = trans[256 * s + low]
        if t == UNKNOWN:
            ctl[MISS_STATE] = s
            ctl[MISS_BYTE] = low
            return -1
        if t < 0:
            return 0
        for k in range(8):
            w = sets[at + k] & 0xFFFFFFFF
            while w:
                bit = w & -w
                if trans[256 * s + 32 * k + bit.bit_length() - 1] != t:
                    return 0
                w ^= bit
        if t == s:
            return 1
        s = t
    return 1


def _start(out, states, ctl) -> None:
    """A fresh walk: out cleared, the start state at its depth."""
    ctl[FRESH] = 0
    for w in range(ctl[N_WORDS]):
        out[w] = 0
    states[ctl[D0]] = ctl[R_START]


def _shortcut(sets, at: int, trans, info, ns: int, chains: int, ctl) -> int:
    """Whether the subtree with the shortcut set at sets[at] is allowed whole from state ns: 1 or 0, or
    -NEED_LOOP / -NEED_STEP when an entry is missing."""
    fl = info[INFO * ns]
    if fl & EXIT or not _subset(sets, at, info, INFO * ns + FIRST):
        return 0
    if not fl & LOOP_KNOWN:
        ctl[MISS_STATE] = ns
        return -NEED_LOOP
    if _subset(sets, at, info, INFO * ns + LOOP):
        return 1
    if not chains:
        return 0
    whole = _chain(trans, ns, sets, at, sets[at + 8], ctl)
    return -NEED_STEP if whole < 0 else whole


def trie_walk(out, nodes, first_tok, tok_order, sets, trans, info, states, exits, ctl) -> int:
    """Walk trie nodes ctl[I] .. ctl[HI] (then each range of ctl[R_NEXT] .. ctl[R_COUNT]: the subtree below
    node exits[r], from state ctl[R_START]) over the DFA: set the bits of allowed tokens in out; with
    ctl[RECORD], record in exits the nodes where an EXIT state is reached with nodes below, and stop with
    HEAVY_CUT once those subtrees hold more than ctl[BUDGET] nodes (-1: no budget). Returns DONE, HEAVY_CUT,
    NEED_STEP or NEED_LOOP."""
    if ctl[FRESH]:
        _start(out, states, ctl)
    i, hi, heavy, budget, n_ex = ctl[I], ctl[HI], ctl[HEAVY], ctl[BUDGET], ctl[N_EXITS]
    record, chains, visited = ctl[RECORD], ctl[CHAINS], ctl[VISITED]
    status = DONE
    while True:
        while i < hi:
            at = NODE * i
            d = nodes[at + 1]
            end = nodes[at + 2]
            s = states[d - 1]
            ns = trans[256 * s + nodes[at]]
            if ns == UNKNOWN:
                ctl[MISS_STATE] = s
                ctl[MISS_BYTE] = nodes[at]
                status = NEED_STEP
                break
            if ns < 0:
                i = end
                continue
            _set_tokens(out, tok_order, first_tok[i], first_tok[i + 1])
            k = nodes[at + 3]
            if k >= 0:
                whole = _shortcut(sets, SET * k, trans, info, ns, chains, ctl)
                if whole < 0:
                    status = -whole
                    break
                if whole:  # every token below is allowed
                    _set_tokens(out, tok_order, first_tok[i + 1], first_tok[end])
                    visited += 1
                    i = end
                    continue
            visited += 1
            fl = info[INFO * ns]
            if fl & EXIT:
                if record and end > i + 1:
                    exits[n_ex] = i
                    n_ex += 1
                    heavy += end - i - 1
                    if budget >= 0 and heavy > budget:
                        status = HEAVY_CUT
                        break
                if fl & ONLY_EXIT:
                    i = end
                    continue
            states[d] = ns
            i += 1
        if status != DONE or ctl[R_NEXT] >= ctl[R_COUNT]:
            break
        ex = exits[ctl[R_NEXT]]
        ctl[R_NEXT] += 1
        i, hi = ex + 1, nodes[NODE * ex + 2]
        states[nodes[NODE * ex + 1]] = ctl[R_START]
    ctl[I], ctl[HI], ctl[HEAVY], ctl[N_EXITS], ctl[VISITED] = i, hi, heavy, n_ex, visited
    return status
