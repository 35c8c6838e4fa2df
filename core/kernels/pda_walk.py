"""The token-trie walk of the `pda` op (pda.py): a state's allowed tokens found by walking the trie with the
automaton (pda_automaton.py), subtrees accepted whole along loops and counter chains, and the slice (a JSON
string's plain characters) set at once where every string of it may follow. One scalar source, as pda.py: run
as the reference, compiled by numba, translated to C for the wasm kernel."""

from __future__ import annotations

from .pda_automaton import (
    class_at,
    entry,
    first_at,
    part_at,
    step,
)
from .pda_layout import (
    DEAD,
    DONE,
    H_CHAINS,
    H_DIRTY,
    H_HEAVY,
    H_N_WORDS,
    H_NEEDS,
    H_NEX,
    H_NTOK,
    H_SRULES,
    H_SSTAMP,
    H_VISITED,
    H_WALKS,
    LIMIT,
    NODE,
    ONLY_EXIT,
    PT_W,
    R_DEPTH,
    R_EXREC,
    R_PARTS,
    R_STATES,
    R_TOKS,
    R_TRANS,
    R_WALKOUT,
    RULE,
    S_EXIT,
    SET,
    SLICE_ALIVE,
    SLICE_NOT,
    SLICE_RULES,
    SLICE_STACKS,
    SLICE_STATES,
    SLICE_UNKNOWN,
    SPARSE_MAX,
    ST_W,
    UNKNOWN,
    V_FIRST_TOK,
    V_NODES,
    V_RFIRST,
    V_ROOT,
    V_RORDER,
    V_SETS,
    V_SLICE,
    V_TOK_ORDER,
)
from .pda_tables import (
    cap,
    grow,
    off,
    set_bit,
)

jit = globals().get("jit") or (lambda f: f)  # numba's njit when native/kernels/pda.py runs this source again
HEAVY = 1  # a budgeted walk's result: its exits cover too much of the trie


# -- the trie walk ----------------------------------------------------------------------------------------


@jit
def add_tokens(V, A, tk, lo, hi):
    """Tokens V[tk+lo : tk+hi] (of tok_order or rorder) into WALKOUT, and into TOKS while a walk has found at
    most SPARSE_MAX."""
    wo, to, nt = off(A, R_WALKOUT), off(A, R_TOKS), A[H_NTOK]
    for j in range(lo, hi):
        t = V[tk + j]
        set_bit(A, wo, t)
        if nt < SPARSE_MAX:
            A[to + nt] = t
        nt += 1
    A[H_NTOK] = nt


@jit
def subset(V, vs, A, at):
    for k in range(8):
        if V[vs + k] & ~A[at + k]:
            return 0
    return 1


@jit
def chain(V, A, s, vs, n):
    """1 when every string of at most n bytes from the set V[vs:vs+8] is alive from s: each state on the way
    takes the whole set alike to one next state (a bounded string's counter), or back to itself (a loop: a
    string's plain characters); 0 when not. One step per state, for the lowest byte of the set: the bytes it takes
    alike are its class. Without chains (A[H_CHAINS] 0: tests) only a loop counts."""
    low = 0
    while not (V[vs + (low >> 5)] >> (low & 31)) & 1:
        low += 1
    for _ in range(n):
        t = entry(A, s, low)
        if t < 0:
            return 0 if t == DEAD else t
        if not subset(V, vs, A, class_at(A, s, low)):
            return 0
        if t == s:
            return 1
        if not A[H_CHAINS]:
            return 0
        s = t
    return 1


@jit
def shortcut(V, A, k, ns):
    """1 when every token below a node with shortcut set k is allowed from state ns; 0 when not."""
    rec = off(A, R_STATES) + ST_W * ns
    vs = V[V_SETS] + SET * k
    if A[rec + 2] & S_EXIT or not subset(V, vs, A, first_at(A, A[rec + 4])):
        return 0
    return chain(V, A, ns, vs, V[vs + 8])


@jit
def lowest_common(V, vs, A, at):
    """The lowest byte in both the set V[vs:vs+8] and the set A[at:at+8], or -1."""
    for k in range(8):
        w = V[vs + k] & A[at + k]
        if w != 0:
            b = 32 * k
            while not (w >> (b & 31)) & 1:
                b += 1
            return b
    return -1


@jit
def slice_alive(V, A, s0):
    """1 when every string of the slice's bytes, of at most as many as its longest token, is alive from state
    s0: then all the slice's tokens are allowed. A breadth-first search over the states those strings reach (by
    one byte of each class the slice meets), each of which must take every slice byte; 0 when one does not, or
    when the search gives up (the walks then find the tokens one by one); or an error. Run on a whole state,
    before any walk of its stacks (each of them may take only some of the bytes: a key's names and the other
    keys); the answer is kept in the state, unless the search gave up."""
    sl = V[V_SLICE]
    height = V[sl + 8]
    so = off(A, R_STATES)
    known = A[so + ST_W * s0 + 7]
    if height <= 0 or known == SLICE_NOT:
        return 0
    if known == SLICE_ALIVE:
        return 1
    r = slice_search(V, A, s0, sl, height)
    if r < 0:
        return r
    if r != SLICE_UNKNOWN:  # (a search that gave up may succeed later: its rules compiled, its states made)
        A[so + ST_W * s0 + 7] = r
    return 1 if r == SLICE_ALIVE else 0


@jit
def slice_gives_up(A, t):
    """1 when a slice search gives up at `entry`'s result t: a limit (the walks may never reach it), or a rule not
    compiled yet past SLICE_RULES in one operation (each is compiled by the host, and the operation starts over:
    a few, not all of a large trie's)."""
    if t == LIMIT:
        return 1
    if t == RULE:
        if A[H_SRULES] >= SLICE_RULES:
            A[H_NEEDS] = 0  # (given up: the rules it named are not asked for)
            return 1
        A[H_SRULES] += A[H_NEEDS]  # (the rules named, compiled at once)
    return 0


@jit
def slice_search(V, A, s0, sl, height):
    """`slice_alive`'s search, not cached: SLICE_ALIVE, SLICE_NOT, SLICE_UNKNOWN when it gave up (a state of
    more than SLICE_STACKS stacks, more states than its queue holds, a limit, more rules not compiled yet than
    SLICE_RULES in one operation), or an error (a rule not compiled yet is compiled: the host is asked, and the
    search runs again)."""
    so, q, qcap = off(A, R_STATES), off(A, R_TOKS), min(cap(A, R_TOKS), SLICE_STATES)
    stamp = A[H_SSTAMP] + 1
    A[H_SSTAMP] = stamp
    A[so + ST_W * s0 + 6] = stamp
    A[q] = s0
    lo, hi, n = 0, 1, 1
    for d in range(height):  # A[q+lo : q+hi]: the states first reached after d bytes
        for j in range(lo, hi):
            s = A[q + j]
            p = A[so + ST_W * s + 4]
            if not subset(V, sl, A, first_at(A, p)):
                return SLICE_NOT
            if A[so + ST_W * s + 1] > SLICE_STACKS:
                return SLICE_UNKNOWN
            if d == height - 1:
                continue
            pa = part_at(A, p)
            for c in range(A[off(A, R_PARTS) + PT_W * p + 3]):
                b = lowest_common(V, sl, A, pa + 256 + 8 * c)
                if b < 0:
                    continue
                t = entry(A, s, b)
                if t == DEAD:
                    return SLICE_NOT
                if slice_gives_up(A, t):
                    return SLICE_UNKNOWN
                if t < 0:
                    return t
                if A[so + ST_W * t + 6] != stamp:
                    if n >= qcap:
                        return SLICE_UNKNOWN
                    A[so + ST_W * t + 6] = stamp
                    A[q + n] = t
                    n += 1
        if n == hi:
            return SLICE_ALIVE
        lo, hi = hi, n
    return SLICE_ALIVE


@jit
def enter(A, do, d, s):
    """State s at depth d of a walk, with where its byte classes and its row of TRANS are (fixed while the
    operation runs: the arena grows only between calls)."""
    rec = off(A, R_STATES) + ST_W * s
    at = do + 3 * d
    A[at], A[at + 1], A[at + 2] = s, part_at(A, A[rec + 4]), off(A, R_TRANS) + A[rec + 5]


@jit
def walk(V, A, st0, lo, hi, d0, budget, sliced):
    """Trie nodes lo..hi (below a node at depth d0 whose state is st0): allowed tokens into WALKOUT/TOKS,
    nodes where an EXIT state is reached with nodes below into EXREC; HEAVY once those subtrees hold more than
    `budget` nodes (-1: no budget). `sliced`: the slice's tokens are in WALKOUT already (`slice_alive`), so only
    the rest's are added and subtrees of none of them are skipped. DONE, HEAVY, or an error."""
    vn = V[V_NODES]
    ft = V[V_RFIRST] if sliced else V[V_FIRST_TOK]
    tk = V[V_RORDER] if sliced else V[V_TOK_ORDER]
    do, so = off(A, R_DEPTH), off(A, R_STATES)
    enter(A, do, d0, st0)
    heavy, visited = A[H_HEAVY], 0
    i = lo
    status = DONE
    while i < hi:
        at = vn + NODE * i
        d, end, b = V[at + 1], V[at + 2], V[at]
        if sliced and V[ft + i] == V[ft + end]:
            i = end  # (no EXIT on the way: slice_alive saw every state of these bytes take them all)
            continue
        up = do + 3 * (d - 1)
        cell = A[up + 2] + A[A[up + 1] + b]  # the TRANS entry of b's class in the state above
        ns = A[cell]
        if ns == UNKNOWN:
            ns = step(A, A[up], b)
            if ns < DEAD:
                status = ns
                break
            A[cell] = ns
        if ns == DEAD:
            i = end
            continue
        add_tokens(V, A, tk, V[ft + i], V[ft + i + 1])
        visited += 1
        if V[at + 3] >= 0:
            whole = shortcut(V, A, V[at + 3], ns)
            if whole < 0:
                status = whole
                break
            if whole:  # every token below is allowed
                add_tokens(V, A, tk, V[ft + i + 1], V[ft + end])
                i = end
                continue
        fl = A[so + ST_W * ns + 2]
        if fl & S_EXIT:
            if end > i + 1:
                nx = A[H_NEX]
                if nx >= cap(A, R_EXREC):
                    status = grow(A, R_EXREC)
                    break
                A[off(A, R_EXREC) + nx] = i
                A[H_NEX] = nx + 1
                heavy += end - i - 1
                if budget >= 0 and heavy > budget:
                    status = HEAVY
                    break
            if fl & ONLY_EXIT:
                i = end
                continue
        enter(A, do, d, ns)
        i += 1
    A[H_VISITED] += visited
    A[H_HEAVY] = heavy
    return status


@jit
def walk_all(V, A, st0, budget, sliced):
    """The whole trie from state st0 (`walk`), one root child per byte st0 takes: the others are never looked
    at. `sliced`: only the tokens not in the slice."""
    A[H_HEAVY] = 0
    first = first_at(A, A[off(A, R_STATES) + ST_W * st0 + 4])
    vn, ro = V[V_NODES], V[V_ROOT]
    for k in range(8):
        w = A[first + k]
        if w == 0:
            continue
        for b in range(32 * k, 32 * k + 32):
            if (w >> (b & 31)) & 1 and V[ro + b] >= 0:
                i = V[ro + b]
                status = walk(V, A, st0, i, V[vn + NODE * i + 2], 0, budget, sliced)
                if status != DONE:
                    return status
    return DONE


@jit
def begin_walk(A):
    """A walk starts: WALKOUT is clear (after a walk that stopped midway, cleared here)."""
    wo = off(A, R_WALKOUT)
    if A[H_DIRTY]:
        for w in range(A[H_N_WORDS]):
            A[wo + w] = 0
    A[H_DIRTY] = 1
    A[H_NTOK] = 0
    A[H_NEX] = 0
    A[H_WALKS] += 1


@jit
def end_walk(A):
    """WALKOUT cleared after a walk: the words of its tokens when it found few, else all of it."""
    wo, nt = off(A, R_WALKOUT), A[H_NTOK]
    if nt <= SPARSE_MAX:
        to = off(A, R_TOKS)
        for j in range(nt):
            A[wo + (A[to + j] >> 5)] = 0
    else:
        for w in range(A[H_N_WORDS]):
            A[wo + w] = 0
    A[H_DIRTY] = 0
