"""The automaton half of the `pda` op (pda.py): the grammar's stacks, closures, states and DFA in flat tables,
as core/constraints/automaton.py builds them in Python objects (the tables under them: pda_tables.py).

Every function works on A, the arena (`pda_layout.py`), and returns an id or entry (>= 0), DEAD, or FULL (a
region is full: A[H_GROW] names it; the operation starts over once the host grew it), RULE (a rule of a lazy
program not compiled yet: a closure names every one it meets, in A[H_NEED_LIST]) or LIMIT (A[H_ERR_*]). A
function writes an entry only once its work is complete, so starting over finds what was done before.
"""

from __future__ import annotations

from .pda_layout import (
    BYTES,
    COMPLETE,
    DEAD,
    EMPTY,
    END,
    EXIT,
    H_MAX_STACKS,
    H_NEED_LIST,
    H_NEEDS,
    H_P_ALTS,
    H_P_REPS,
    H_P_RULES,
    H_P_SETS,
    H_STAMP,
    LIM_ITEMS,
    LIM_STACKS,
    MAX_NEEDS,
    ONLY_EXIT,
    PT_BYTES,
    PT_W,
    R_CHASH,
    R_CLOS,
    R_CLOUT,
    R_CPOOL,
    R_PARTS,
    R_PHASH,
    R_PPOOL,
    R_PSCR,
    R_SEEN,
    R_SHASH,
    R_SPOOL,
    R_STATES,
    R_STEP,
    R_TRANS,
    R_WORK,
    REP,
    RULE,
    S_EXIT,
    SLICE_UNKNOWN,
    ST_W,
    UNKNOWN,
)
from .pda_tables import (
    add,
    arg,
    cap,
    find,
    grow,
    has,
    hash3,
    kind,
    limit,
    list_hash,
    ncount,
    node,
    nparent,
    npos,
    off,
    room,
    set_bit,
    set_used,
    used,
)

jit = globals().get("jit") or (lambda f: f)  # numba's njit when native/kernels/pda.py runs this source again


# -- closures ---------------------------------------------------------------------------------------------


@jit
def push_item(A, n, p, par):
    """Item (p, par) on the worklist of n items: n + 1, or FULL."""
    if n >= cap(A, R_WORK):
        return grow(A, R_WORK)
    at = off(A, R_WORK) + 2 * n
    A[at], A[at + 1] = p, par
    return n + 1


@jit
def note_rule(A, rule):
    """A lazy program's rule not compiled yet, met by a closure: named once in A[H_NEED_LIST], so that the host
    compiles every rule an operation meets at once before it starts over (0; RULE once MAX_NEEDS are named)."""
    k = A[H_NEEDS]
    for j in range(k):
        if A[H_NEED_LIST + j] == rule:
            return 0
    if k >= MAX_NEEDS:
        return RULE
    A[H_NEED_LIST + k] = rule
    A[H_NEEDS] = k + 1
    return 0


@jit
def push_alts(A, n, rule, par):
    """The alternatives of compiled rule `rule` on the worklist, each with continuation par."""
    ro, ao = A[H_P_RULES] + 2 * rule, A[H_P_ALTS]
    for j in range(A[ro], A[ro + 1]):
        n = push_item(A, n, A[ao + j], par)
        if n < 0:
            return n
    return n


@jit
def seen_add(A, p, par, stamp):
    """1 when item (p, par) is new in this closure (then recorded), 0 when seen."""
    so, smask = off(A, R_SEEN), cap(A, R_SEEN) - 1
    h = hash3(p, par, 7) & smask
    while A[so + 3 * h + 2] == stamp:
        if A[so + 3 * h] == p and A[so + 3 * h + 1] == par:
            return 0
        h = (h + 1) & smask
    A[so + 3 * h], A[so + 3 * h + 1], A[so + 3 * h + 2] = p, par, stamp
    return 1


@jit
def sort_unique(A, at, n):
    """Sort A[at : at+n] and drop repeats: the new length (a shell sort: short lists, no allocation)."""
    gap = n // 2
    while gap > 0:
        for i in range(gap, n):
            v = A[at + i]
            j = i
            while j >= gap and A[at + j - gap] > v:
                A[at + j] = A[at + j - gap]
                j -= gap
            A[at + j] = v
        gap //= 2
    m = 0
    for i in range(n):
        if m == 0 or A[at + i] != A[at + m - 1]:
            A[at + m] = A[at + i]
            m += 1
    return m


@jit
def closure(A, pos, parent):  # noqa: C901 (one loop over the element kinds, as automaton.closure)
    """The CLOS entry of the stacks reached from `pos` with continuation `parent` (automaton.closure)."""
    e = find(A, R_CHASH, R_CLOS, 4, pos, parent, 1)
    if e >= 0:
        return e
    stamp = A[H_STAMP] + 1
    if stamp >= 1 << 30:  # the stamps start over: clear the seen table
        for h in range(cap(A, R_SEEN)):
            A[off(A, R_SEEN) + 3 * h + 2] = 0
        stamp = 1
    A[H_STAMP] = stamp
    nw = push_item(A, 0, pos, parent)
    nc, n_seen, missing = 0, 0, 0
    rp = A[H_P_REPS]
    while nw > 0:
        nw -= 1
        p, par = A[off(A, R_WORK) + 2 * nw], A[off(A, R_WORK) + 2 * nw + 1]
        if 2 * (n_seen + 1) > cap(A, R_SEEN):
            return grow(A, R_SEEN)
        if not seen_add(A, p, par, stamp):
            continue
        n_seen += 1
        if n_seen > A[H_MAX_STACKS]:
            return limit(A, LIM_ITEMS, n_seen, pos)
        k = kind(A, p)
        s = -1
        rule, frame = -1, 0  # a rule to enter: its alternatives on the worklist, each with continuation frame
        if k == BYTES:
            s = node(A, p, par, 0)
            if s < 0:
                return s
        elif k == END:
            if par <= EXIT:
                s = par
            elif ncount(A, par) > 0:  # a copy of a REP returned: begin another, or go on after the REP
                q, grand, n = npos(A, par), nparent(A, par), ncount(A, par)
                ri = rp + 3 * arg(A, q)
                if n < A[ri + 2]:
                    frame = node(A, q, grand, n + 1)
                    if frame < 0:
                        return frame
                    rule = A[ri]
                if n >= A[ri + 1]:
                    nw = push_item(A, nw, q + 1, grand)
            else:
                nw = push_item(A, nw, npos(A, par), nparent(A, par))
        elif k == REP:  # entered: begin the first copy (or skip them all when none are needed)
            ri = rp + 3 * arg(A, p)
            if A[ri + 2] > 0:
                frame = node(A, p, par, 1)
                if frame < 0:
                    return frame
                rule = A[ri]
            if A[ri + 1] == 0:
                nw = push_item(A, nw, p + 1, par)
        else:  # REF: push the return position unless it is the end of the alternative (tail call)
            frame = par
            if kind(A, p + 1) != END:
                frame = node(A, p + 1, par, 0)
                if frame < 0:
                    return frame
            rule = arg(A, p)
        if nw >= 0 and rule >= 0:
            if A[A[H_P_RULES] + 2 * rule] < 0:  # not compiled yet: named, and the closure goes on without it
                missing = 1
                if note_rule(A, rule) < 0:
                    return RULE
            else:
                nw = push_alts(A, nw, rule, frame)
        if nw < 0:
            return nw
        if s >= 0:
            if nc >= cap(A, R_CLOUT):
                return grow(A, R_CLOUT)
            A[off(A, R_CLOUT) + nc] = s
            nc += 1
    if missing:
        return RULE  # (not interned: the host compiles the rules named, and the operation starts over)
    co = off(A, R_CLOUT)
    nc = sort_unique(A, co, nc)
    if used(A, R_CPOOL) + nc > cap(A, R_CPOOL):
        return grow(A, R_CPOOL)
    r = room(A, R_CHASH, R_CLOS)
    if r < 0:
        return r
    start = used(A, R_CPOOL)
    po = off(A, R_CPOOL) + start
    for j in range(nc):
        A[po + j] = A[co + j]
    set_used(A, R_CPOOL, start + nc)
    e = add(A, R_CHASH, R_CLOS, 4, pos, parent)
    A[off(A, R_CLOS) + 4 * e + 2] = start
    A[off(A, R_CLOS) + 4 * e + 3] = nc
    return e


# -- states and the DFA -----------------------------------------------------------------------------------


@jit
def find_list(A, rh, rr, w, hk, rp, at, n, h):
    """Lists interned by hash table rh over the records of region rr (w words a record: the list's offset in pool
    region rp, its length, and its hash at word hk): the record holding A[at : at+n] (hash h), else -1 - the free
    slot of rh where it goes."""
    ho, hmask, ro, po = off(A, rh), cap(A, rh) - 1, off(A, rr), off(A, rp)
    slot = h & hmask
    while A[ho + slot] >= 0:
        rec = ro + w * A[ho + slot]
        if A[rec + hk] == h and A[rec + 1] == n:
            same = 1
            for j in range(n):
                if A[po + A[rec] + j] != A[at + j]:
                    same = 0
                    break
            if same:
                return A[ho + slot]
        slot = (slot + 1) & hmask
    return -1 - slot


@jit
def partition(A, at, n):  # noqa: C901 (lookup, then the classes by refinement)
    """The partition of the bytes by the byte sets of stacks A[at : at+n] (tops of a state's stacks): the
    classes of bytes every top takes or refuses alike, interned by the sets' rows."""
    sets = A[H_P_SETS]
    m = 0
    if n > cap(A, R_PSCR):
        return grow(A, R_PSCR)
    so = off(A, R_PSCR)
    for j in range(n):
        x = A[at + j]
        if x > EXIT:
            A[so + m] = arg(A, npos(A, x))
            m += 1
    m = sort_unique(A, so, m)
    h = list_hash(A, so, m)
    ho, hmask, po, qo = off(A, R_PHASH), cap(A, R_PHASH) - 1, off(A, R_PARTS), off(A, R_PPOOL)
    found = find_list(A, R_PHASH, R_PARTS, PT_W, 2, R_PPOOL, so, m, h)
    if found >= 0:
        return found
    slot = -1 - found
    p = used(A, R_PARTS)
    if p >= cap(A, R_PARTS):
        return grow(A, R_PARTS)
    if 2 * (p + 1) > hmask + 1:
        return grow(A, R_PHASH)
    start = used(A, R_PPOOL)
    if start + m + PT_BYTES + 8 * 257 > cap(A, R_PPOOL):
        return grow(A, R_PPOOL)
    key, cls = qo + start, qo + start + m
    for j in range(m):
        A[key + j] = A[so + j]
    # refine: each set splits every class into its bytes in the set and the rest (ids renumbered by first byte)
    for b in range(256):
        A[cls + b] = 0
    n_cls = 1
    split, ren = cls + 256, cls + 512  # scratch (the class bytes go there after)
    cb = cls + 256
    first = cb + 8 * 257  # scratch until the classes are known: the bytes some top takes
    for k in range(8):
        A[first + k] = 0
    for j in range(m):
        bs = sets + 8 * A[key + j]
        for c in range(n_cls + 1):
            A[split + c] = -1
        fresh = n_cls
        for k in range(8):
            w = A[bs + k]
            A[first + k] |= w
            if w == 0:
                continue
            for b in range(32 * k, 32 * k + 32):
                if (w >> (b & 31)) & 1:
                    c = A[cls + b]
                    if A[split + c] < 0:
                        A[split + c] = fresh
                        fresh += 1
                    A[cls + b] = A[split + c]
        if fresh == n_cls:
            continue
        for c in range(fresh):
            A[ren + c] = -1
        n_cls = 0
        for b in range(256):
            c = A[cls + b]
            if A[ren + c] < 0:
                A[ren + c] = n_cls
                n_cls += 1
            A[cls + b] = A[ren + c]
    dead = -1  # the class of the bytes no top takes (all one class: none of the sets splits them)
    for b in range(256):
        if not has(A, first, b):
            dead = A[cls + b]
            break
    for k in range(8):
        A[cb + 8 * n_cls + k] = A[first + k]
    for w in range(8 * n_cls):
        A[cb + w] = 0
    for b in range(256):
        set_bit(A, cb + 8 * A[cls + b], b)
    first = cb + 8 * n_cls
    set_used(A, R_PPOOL, start + m + 256 + 8 * (n_cls + 1))
    rec = po + PT_W * p
    A[rec], A[rec + 1], A[rec + 2], A[rec + 3], A[rec + 4] = start, m, h, n_cls, dead
    A[ho + slot] = p
    set_used(A, R_PARTS, p + 1)
    return p


@jit
def part_at(A, p):
    """Where partition p's per-byte classes start in A (then its classes' bytes, then its first bytes)."""
    rec = off(A, R_PARTS) + PT_W * p
    return off(A, R_PPOOL) + A[rec] + A[rec + 1]


@jit
def first_at(A, p):
    """Where the bytes some top of partition p's states takes start in A (8 words)."""
    return part_at(A, p) + 256 + 8 * A[off(A, R_PARTS) + PT_W * p + 3]


@jit
def state_of(A, at, n):
    """The state whose sorted stacks are A[at : at+n], interned (its row of TRANS started)."""
    if n > A[H_MAX_STACKS]:
        last = A[at + n - 1]
        return limit(A, LIM_STACKS, n, npos(A, last) if last > EXIT else 0)
    h = list_hash(A, at, n)
    ho, hmask, so, po = off(A, R_SHASH), cap(A, R_SHASH) - 1, off(A, R_STATES), off(A, R_SPOOL)
    found = find_list(A, R_SHASH, R_STATES, ST_W, 3, R_SPOOL, at, n, h)
    if found >= 0:
        return found
    slot = -1 - found
    p = partition(A, at, n)
    if p < 0:
        return p
    n_cls = A[off(A, R_PARTS) + PT_W * p + 3]
    s = used(A, R_STATES)
    if s >= cap(A, R_STATES):
        return grow(A, R_STATES)
    if used(A, R_TRANS) + n_cls > cap(A, R_TRANS):
        return grow(A, R_TRANS)
    if 2 * (s + 1) > hmask + 1:
        return grow(A, R_SHASH)
    start = used(A, R_SPOOL)
    if start + n > cap(A, R_SPOOL):
        return grow(A, R_SPOOL)
    flags, only_exit = 0, 1
    for j in range(n):
        x = A[at + j]
        A[po + start + j] = x
        if x == EMPTY:
            flags |= COMPLETE
        elif x == EXIT:
            flags |= S_EXIT
        else:
            only_exit = 0
    if only_exit:
        flags |= ONLY_EXIT
    row = used(A, R_TRANS)
    to = off(A, R_TRANS) + row
    for c in range(n_cls):
        A[to + c] = UNKNOWN
    dead = A[off(A, R_PARTS) + PT_W * p + 4]
    if dead >= 0:
        A[to + dead] = DEAD
    rec = so + ST_W * s
    A[rec], A[rec + 1], A[rec + 2], A[rec + 3], A[rec + 4], A[rec + 5] = start, n, flags, h, p, row
    A[rec + 6], A[rec + 7] = 0, SLICE_UNKNOWN  # no slice check reached it yet (H_SSTAMP counts from 1)
    A[ho + slot] = s
    set_used(A, R_SPOOL, start + n)
    set_used(A, R_STATES, s + 1)
    set_used(A, R_TRANS, row + n_cls)
    return s


@jit
def step(A, s, b):
    """The state after byte b from state s (automaton.step), or DEAD."""
    rec = off(A, R_STATES) + ST_W * s
    first, n = A[rec], A[rec + 1]
    bo, sets = off(A, R_STEP), A[H_P_SETS]
    m, parts, last, missing = 0, 0, -1, 0
    for j in range(n):
        x = A[off(A, R_SPOOL) + first + j]
        if x <= EXIT or not has(A, sets + 8 * arg(A, npos(A, x)), b):
            continue
        e = closure(A, npos(A, x) + 1, nparent(A, x))
        if e == RULE:  # (the other stacks' closures name their rules too: one start over for the step)
            missing = 1
            continue
        if e < 0:
            return e
        ce = off(A, R_CLOS) + 4 * e
        cn = A[ce + 3]
        if m + cn > cap(A, R_STEP):
            return grow(A, R_STEP)
        co = off(A, R_CPOOL) + A[ce + 2]
        for k in range(cn):
            A[bo + m + k] = A[co + k]
        m += cn
        parts += 1
        last = e
    if missing:
        return RULE
    if m == 0:
        return DEAD
    if parts == 1:  # one stack took the byte: its closure is sorted already
        return state_of(A, off(A, R_CPOOL) + A[off(A, R_CLOS) + 4 * last + 2], m)
    return state_of(A, bo, sort_unique(A, bo, m))


@jit
def entry(A, s, b):
    """The state byte b leads to from state s, or DEAD (computed for b's whole class on first use)."""
    rec = off(A, R_STATES) + ST_W * s
    c = A[part_at(A, A[rec + 4]) + b]
    at = off(A, R_TRANS) + A[rec + 5] + c
    t = A[at]
    if t == UNKNOWN:
        t = step(A, s, b)
        if t >= DEAD:
            A[off(A, R_TRANS) + A[off(A, R_STATES) + ST_W * s + 5] + c] = t
    return t


@jit
def class_at(A, s, b):
    """Where the bytes state s treats as it treats b start in A (8 words)."""
    p = A[off(A, R_STATES) + ST_W * s + 4]
    at = part_at(A, p)
    return at + 256 + 8 * A[at + b]
