"""The grammar automaton and its token masks over flat tables (the `pda` op): the pushdown automaton of
core/constraints/automaton.py and the cut-and-cache trie walk of core/constraints/masks.py, run in one call.

The reference of the op: one scalar source in the subset of Python that numba compiles (here it runs as it is,
over `array('i')` buffers; native/kernels/pda.py compiles these modules, this one, pda_walk.py (the trie walk)
and pda_automaton.py, with numba; wasm/scalar_c.py translates them to C for the wasm kernel). Layouts:
`pda_layout.py`.

One call runs one operation (A[H_OP]) to its end: START (the initial state), PUSH_TOKEN / PUSH_BYTES (the state
after a token's bytes, or DEAD), MASK (the tokens a state allows, into OUT) or IMPORT (a state given as stacks
of frames). Every DFA entry, closure, node and state it needs is computed and interned on the way, so a mask
never goes back to the host for a missing entry. When a region is full the call returns NEED_GROW (A[H_GROW]
names it): the host copies the arena into a larger one and calls again, and the operation starts over,
finding what it built before in its tables (interning is idempotent, and a cache entry is written only once
its work is complete). A limit passed (max_stacks, max_stack_depth) returns LIMIT_PASSED, named in A[H_ERR_*].
"""

from __future__ import annotations

from .pda_automaton import (
    closure,
    entry,
    sort_unique,
    state_of,
)
from .pda_layout import (
    DENSE,
    DONE,
    EMPTY,
    EXIT,
    FULL,
    H_ARG,
    H_ARG2,
    H_BUDGET,
    H_END_POS,
    H_FRAMES,
    H_HEAVY,
    H_HORIZON,
    H_M_LEN,
    H_M_OFF,
    H_N_MASKS,
    H_N_STATES,
    H_N_WORDS,
    H_NEEDS,
    H_NEX,
    H_NTOK,
    H_OP,
    H_P_ALTS,
    H_P_REPS,
    H_P_RULES,
    H_REHASH,
    H_RES,
    H_RES_FLAGS,
    H_REST,
    H_ROOT,
    H_SLICED,
    H_SRULES,
    LIMIT,
    LIMIT_PASSED,
    MAX_CUTS,
    MAX_NEEDS,
    NEED_GROW,
    NEED_RULE,
    NODE,
    OP_IMPORT,
    OP_MASK,
    OP_PUSH_BYTES,
    OP_PUSH_TOKEN,
    OP_START,
    R_CLOS,
    R_CPOOL,
    R_EXPOOL,
    R_EXREC,
    R_INPUT,
    R_LHASH,
    R_LOCAL,
    R_MASKS,
    R_OUT,
    R_SBHASH,
    R_SBITS,
    R_SPOOL,
    R_STATES,
    R_STEP,
    R_TOKS,
    R_TPOOL,
    R_WALKOUT,
    R_XBITS,
    R_XHASH,
    RULE,
    SPARSE_MAX,
    ST_W,
    V_NODES,
    V_SLICE,
    V_TOK_BYTES,
    V_TOK_OFF,
)
from .pda_tables import (
    add,
    arg,
    cap,
    find,
    grow,
    ncount,
    ndepth,
    node,
    nparent,
    npos,
    off,
    rehash,
    room,
    set_bit,
    set_used,
    used,
)
from .pda_walk import HEAVY, begin_walk, end_walk, slice_alive, walk, walk_all

jit = globals().get("jit") or (lambda f: f)  # numba's njit when native/kernels/pda.py runs this source again


@jit
def mask_room(A):
    """FULL unless the mask of the walk just done can be stored (`keep_mask`)."""
    if A[H_NTOK] <= SPARSE_MAX:
        if used(A, R_TPOOL) + A[H_NTOK] > cap(A, R_TPOOL):
            return grow(A, R_TPOOL)
    elif used(A, R_MASKS) >= cap(A, R_MASKS):
        return grow(A, R_MASKS)
    return 0


@jit
def keep_mask(A):
    """The walk's tokens kept as a mask (after `mask_room`): into A[H_M_OFF], A[H_M_LEN]."""
    nt = A[H_NTOK]
    if nt <= SPARSE_MAX:
        start = used(A, R_TPOOL)
        for j in range(nt):
            A[off(A, R_TPOOL) + start + j] = A[off(A, R_TOKS) + j]
        set_used(A, R_TPOOL, start + nt)
        A[H_M_OFF], A[H_M_LEN] = start, nt
    else:
        row = used(A, R_MASKS)
        mo, wo = off(A, R_MASKS) + A[H_N_WORDS] * row, off(A, R_WALKOUT)
        for w in range(A[H_N_WORDS]):
            A[mo + w] = A[wo + w]
        set_used(A, R_MASKS, row + 1)
        A[H_M_OFF], A[H_M_LEN] = row, DENSE
        A[H_N_MASKS] += 1
    end_walk(A)


@jit
def or_mask(A, m_off, m_len):
    oo = off(A, R_OUT)
    if m_len == DENSE:
        mo = off(A, R_MASKS) + A[H_N_WORDS] * m_off
        for w in range(A[H_N_WORDS]):
            A[oo + w] |= A[mo + w]
    else:
        to = off(A, R_TPOOL) + m_off
        for j in range(m_len):
            set_bit(A, oo, A[to + j])


# -- masks: stacks cut at their top frames, walked once, cached (masks.py) --------------------------------


@jit
def canonical_count(A, pos, n, horizon):
    ri = A[H_P_REPS] + 3 * arg(A, pos)
    lo, hi, m = A[ri + 1], A[ri + 2], horizon + 2
    if n < lo - m:
        return 1
    if lo <= n < hi - m:
        return max(lo, 1)
    return n


@jit
def truncate(A, s, d):
    """The top d frames of stack s re-rooted on EXIT, counts canonical (automaton.truncate); A[H_REST]: the
    node below them."""
    x = s
    for j in range(d):
        A[H_FRAMES + 2 * j], A[H_FRAMES + 2 * j + 1] = npos(A, x), ncount(A, x)
        x = nparent(A, x)
    A[H_REST] = x
    t = EXIT
    for j in range(d - 1, -1, -1):
        p, n = A[H_FRAMES + 2 * j], A[H_FRAMES + 2 * j + 1]
        if n > 0:
            n = canonical_count(A, p, n, A[H_HORIZON])
        t = node(A, p, t, n)
        if t < 0:
            return t
    return t


@jit
def local_walk(V, A, key, budget, sliced):
    """The LOCAL entry of truncated stack `key` (and `sliced`): its walk over the whole trie (HEAVY past
    `budget`)."""
    r = room(A, R_LHASH, R_LOCAL)
    if r < 0:
        return r
    if used(A, R_EXPOOL) + cap(A, R_EXREC) > cap(A, R_EXPOOL):
        return grow(A, R_EXPOOL)
    A[off(A, R_STEP)] = key
    st = state_of(A, off(A, R_STEP), 1)
    if st < 0:
        return st
    begin_walk(A)
    status = walk_all(V, A, st, budget, sliced)
    if status < 0:
        return status
    if status != HEAVY:
        r = mask_room(A)
        if r < 0:
            return r
    e = add(A, R_LHASH, R_LOCAL, 6, 2 * key + sliced, 0)
    at = off(A, R_LOCAL) + 6 * e
    A[at + 1] = 1 if status == HEAVY else 0
    if status != HEAVY:
        keep_mask(A)
        A[at + 2], A[at + 3] = A[H_M_OFF], A[H_M_LEN]
        start, nx = used(A, R_EXPOOL), A[H_NEX]
        for j in range(nx):
            A[off(A, R_EXPOOL) + start + j] = A[off(A, R_EXREC) + j]
        set_used(A, R_EXPOOL, start + nx)
        A[at + 4], A[at + 5] = start, nx
    else:
        end_walk(A)
    return e


@jit
def exit_walk(V, A, le, rest):
    """The XBITS entry of (le, rest): the subtrees below LOCAL entry le's exits, walked from the state after
    control returns into `rest` (automaton.pop_into)."""
    r = room(A, R_XHASH, R_XBITS)
    if r < 0:
        return r
    e = closure(A, A[H_END_POS], rest)
    if e < 0:
        return e
    ce = off(A, R_CLOS) + 4 * e
    st = state_of(A, off(A, R_CPOOL) + A[ce + 2], A[ce + 3])
    if st < 0:
        return st
    begin_walk(A)
    A[H_HEAVY] = 0
    vn = V[V_NODES]
    lo = off(A, R_LOCAL) + 6 * le
    for j in range(A[lo + 5]):
        ex = A[off(A, R_EXPOOL) + A[lo + 4] + j]
        status = walk(V, A, st, ex + 1, V[vn + NODE * ex + 2], V[vn + NODE * ex + 1], -1, 0)
        if status < 0:
            return status
    r = mask_room(A)
    if r < 0:
        return r
    x = add(A, R_XHASH, R_XBITS, 4, le, rest)
    keep_mask(A)
    at = off(A, R_XBITS) + 4 * x
    A[at + 2], A[at + 3] = A[H_M_OFF], A[H_M_LEN]
    return x


@jit
def stack_entry(V, A, s, sliced):
    """The SBITS entry of stack s (and `sliced`: the tokens not in the slice): the LOCAL entry of its cut and
    the XBITS entry of its exits (-1: none)."""
    e = find(A, R_SBHASH, R_SBITS, 3, 2 * s, 0, 0)  # (keyed by both: the entries have one key word)
    if e >= 0:  # all its tokens: those not in the slice among them
        return e
    if sliced:
        e = find(A, R_SBHASH, R_SBITS, 3, 2 * s + 1, 0, 0)
        if e >= 0:
            return e
    total = ndepth(A, s)
    d = 1
    while True:
        if d >= total or d > MAX_CUTS:
            key, rest = s, -1
        else:
            key = truncate(A, s, d)
            if key < 0:
                return key
            rest = A[H_REST]
        le = find(A, R_LHASH, R_LOCAL, 6, 2 * key, 0, 0)
        if le < 0 and sliced:
            le = find(A, R_LHASH, R_LOCAL, 6, 2 * key + 1, 0, 0)
        if le < 0:
            le = local_walk(V, A, key, A[H_BUDGET] if rest >= 0 else -1, sliced)
            if le < 0:
                return le
        if not A[off(A, R_LOCAL) + 6 * le + 1]:
            break
        d += 1
    xe = -1
    if rest >= 0 and A[off(A, R_LOCAL) + 6 * le + 5] > 0:
        xe = find(A, R_XHASH, R_XBITS, 4, le, rest, 1)
        if xe < 0:
            xe = exit_walk(V, A, le, rest)
            if xe < 0:
                return xe
    r = room(A, R_SBHASH, R_SBITS)
    if r < 0:
        return r
    e = add(A, R_SBHASH, R_SBITS, 3, 2 * s + sliced, 0)
    at = off(A, R_SBITS) + 3 * e
    A[at + 1], A[at + 2] = le, xe
    return e


@jit
def state_mask(V, A, s):
    """OUT: the tokens state s allows (the union of its stacks' masks). Where the slice is alive from s, its
    tokens at once (a string's plain characters, in any context: llguidance's slices) and the rest from the
    stacks' walks."""
    rec = off(A, R_STATES) + ST_W * s
    walks = 0  # stacks whose masks are not known yet (only then is the slice worth a look)
    for j in range(A[rec + 1]):
        x = A[off(A, R_SPOOL) + A[rec] + j]
        if x > EXIT and find(A, R_SBHASH, R_SBITS, 3, 2 * x, 0, 0) < 0:
            walks += 1
    sliced = slice_alive(V, A, s) if walks else 0
    if sliced < 0:
        return sliced
    oo = off(A, R_OUT)
    for w in range(A[H_N_WORDS]):
        A[oo + w] = 0
    if sliced:
        sm = V[V_SLICE] + 9
        for w in range(A[H_N_WORDS]):
            A[oo + w] = V[sm + w]
        A[H_SLICED] += 1
    missing = 0
    for j in range(A[rec + 1]):
        x = A[off(A, R_SPOOL) + A[rec] + j]
        if x <= EXIT:
            continue
        e = stack_entry(V, A, x, sliced)
        if e == RULE and A[H_NEEDS] < MAX_NEEDS:  # (the other stacks' walks name their rules too)
            missing = 1
            continue
        if e < 0:
            return e
        if missing:
            continue
        at = off(A, R_SBITS) + 3 * e
        lo = off(A, R_LOCAL) + 6 * A[at + 1]
        or_mask(A, A[lo + 2], A[lo + 3])
        if A[at + 2] >= 0:
            xo = off(A, R_XBITS) + 4 * A[at + 2]
            or_mask(A, A[xo + 2], A[xo + 3])
    return RULE if missing else DONE


# -- the operations ---------------------------------------------------------------------------------------


@jit
def start(A):
    """The initial state: the closure of the root rule's alternatives on EMPTY."""
    ro, ao = A[H_P_RULES] + 2 * A[H_ROOT], A[H_P_ALTS]
    m, missing = 0, 0
    for j in range(A[ro], A[ro + 1]):  # (the start rule is compiled before the program is written)
        e = closure(A, A[ao + j], EMPTY)
        if e == RULE:  # (the other alternatives name their rules too)
            missing = 1
            continue
        if e < 0:
            return e
        ce = off(A, R_CLOS) + 4 * e
        if m + A[ce + 3] > cap(A, R_STEP):
            return grow(A, R_STEP)
        for k in range(A[ce + 3]):
            A[off(A, R_STEP) + m + k] = A[off(A, R_CPOOL) + A[ce + 2] + k]
        m += A[ce + 3]
    if missing:
        return RULE
    return state_of(A, off(A, R_STEP), sort_unique(A, off(A, R_STEP), m))


@jit
def push(A, s, src, at, n):
    """The state after n bytes (src[at : at+n]) from state s, or DEAD."""
    for j in range(n):
        s = entry(A, s, src[at + j])
        if s < 0:
            return s
    return s


@jit
def import_state(A):
    """INPUT: a count of stacks, then each as its floor (EMPTY or EXIT), its frame count and its frames
    (pos, count) from the bottom up: the state of those stacks."""
    io = off(A, R_INPUT)
    n, k = A[io], 1
    if n > cap(A, R_STEP):
        return grow(A, R_STEP)
    for j in range(n):
        s, nf = A[io + k], A[io + k + 1]
        k += 2
        for _ in range(nf):
            s = node(A, A[io + k], s, A[io + k + 1])
            if s < 0:
                return s
            k += 2
        A[off(A, R_STEP) + j] = s
    return state_of(A, off(A, R_STEP), sort_unique(A, off(A, R_STEP), n))


@jit
def pda(V, A):
    """Run operation A[H_OP]: DONE (result in A[H_RES] and its flags, or the mask in OUT), NEED_GROW or
    LIMIT_PASSED."""
    if A[H_REHASH]:
        rehash(A)
    op = A[H_OP]
    A[H_NEEDS] = 0  # (the rules not compiled yet this run of the operation meets: NEED_RULE names them)
    r = DONE
    if op == OP_START:
        r = start(A)
    elif op == OP_PUSH_TOKEN:
        t = A[H_ARG2]
        to = V[V_TOK_OFF]
        r = push(A, A[H_ARG], V, V[V_TOK_BYTES] + V[to + t], V[to + t + 1] - V[to + t])
    elif op == OP_PUSH_BYTES:
        r = push(A, A[H_ARG], A, off(A, R_INPUT), A[H_ARG2])
    elif op == OP_MASK:
        r = state_mask(V, A, A[H_ARG])
    elif op == OP_IMPORT:
        r = import_state(A)
    if r == FULL:
        return NEED_GROW
    A[H_SRULES] = 0 if r != RULE else A[H_SRULES]  # (counted over one operation, its starts over included)
    if r == LIMIT:
        return LIMIT_PASSED
    if r == RULE:
        return NEED_RULE
    A[H_RES] = r
    A[H_N_STATES] = used(A, R_STATES)
    A[H_RES_FLAGS] = A[off(A, R_STATES) + ST_W * r + 2] if r >= 0 and op != OP_MASK else 0
    return DONE
