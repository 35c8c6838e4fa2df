"""The layouts of the `pda` op's two int32 buffers (the op: `pda.py`; the tables are built by
core/constraints/kernel_engine.py; the C kernel is translated from the same source, wasm/scalar_c.py).

V, a vocabulary (read only, one per vocabulary and backend): a header of V_HDR words, then

    nodes     (n_nodes, NODE)   the token trie in preorder: byte, depth, skip (the node after the subtree), set
                                (-1, or a row of `sets`)
    first_tok (n_nodes + 1,)    tokens at node i: tok_order[first_tok[i] : first_tok[i+1]]; below it, to skip[i]
    tok_order                   token ids in preorder
    sets      (n_sets, SET)     for nodes with more than SHORTCUT nodes below: the bytes below (8 words), height
    tok_off   (n_vocab + 1,)    token t's bytes: tok_bytes[tok_off[t] : tok_off[t+1]] (none for control tokens)
    tok_bytes                   one byte per word
    root      (256,)            the root's child for each first byte (-1: no token starts with it)
    slice     (8 + 1 + n_words) the slice: its bytes (8 words), its tokens' most bytes (0: no slice), its tokens
                                as a mask. The slice's tokens are those of only its bytes (a JSON string's plain
                                characters): where every string of them is alive, they are allowed as one mask
    rfirst    (n_nodes + 1,)    first_tok for the tokens not in the slice (the rest)
    rorder                      those tokens' ids in preorder

A, a constraint's arena (read and written, grown by the host): a header of HDR words (registers, limits, the
program's sub-tables, and a directory of regions: offset, capacity and entries used of each), then the regions.
The program: per position kind and arg (a BYTES element's arg is a row of its byte sets, 8 words), per rule
where its alternatives' start positions are in ALTS (start, end; -1, -1: a lazy program's rule not compiled yet,
the op returns NEED_RULE with the rules it met in A[H_NEED_LIST] and the host compiles them and writes
the program again: it only grows at its end), per REP (rule, min, max). The rest grows as the automaton is run:

    NODES   (pos, parent, count, depth)   stacks as interned nodes; node 0 EMPTY, node 1 EXIT (automaton.py)
    CLOS    (pos, parent, off, len)       closures: the sorted stacks in CPOOL
    STATES  (off, len, flags, hash, part, trans, stamp, slice)   states: their sorted stacks in SPOOL; flags
                                          COMPLETE, EXIT, ONLY_EXIT; the partition of the bytes into the classes it
                                          treats alike; its row of TRANS; the last slice check (H_SSTAMP) that
                                          reached it; whether the slice is alive from it (SLICE_*)
    PARTS   (off, n, hash, n_classes, dead)   partitions, interned by the byte sets of the stacks' tops (sorted
                                          set rows, at PPOOL[off]); after them in PPOOL: each byte's class (256
                                          words), each class's bytes (8 words each), the bytes of all classes
                                          but `dead` (the bytes no top takes: -1 when none) (8 words)
    TRANS   a row per state, a word per class: the next state, DEAD, or UNKNOWN (computed on first use)
    LOCAL   (key, heavy, m_off, m_len, x_off, x_len)   a truncated stack's walk: its mask, its exit nodes (EXPOOL)
    XBITS   (local, rest, m_off, m_len)   the exits of a LOCAL entry's walk continued below the cut, from `rest`
    SBITS   (stack, local, xbits)         a stack's mask: its cut's walk and exits (entries of LOCAL, XBITS)
            (LOCAL's and SBITS' key: 2 * the stack + 1 for a walk of only the tokens not in the slice)
    *HASH                                  open-addressing tables of entry ids (-1: empty) over those entries

A mask is (m_off, m_len): m_len DENSE, a row of MASKS (n_words words), else m_len tokens of TPOOL. The rest are
scratch: WORK, SEEN (stamped) and CLOUT for a closure, STEP for a step's stacks, PSCR for a partition's sets,
DEPTH for the walk's state per trie depth (with where its classes and row of TRANS are), EXREC and TOKS for what
a walk records (TOKS is also the queue of a slice check, which runs before its walk records anything), WALKOUT
and OUT (n_words each), INPUT for bytes or stacks.
"""

from __future__ import annotations

# the program's element kinds (core/constraints/compile.py)
BYTES, REF, END, REP = 0, 1, 2, 3
EMPTY, EXIT = 0, 1  # nodes
DEAD, UNKNOWN = -1, -2  # TRANS entries besides state ids
FULL, LIMIT, RULE = -3, -4, -5  # internal results: a region is full (the host grows it) / a limit is passed /
# a rule of a lazy program is not compiled yet (the host compiles it)

# V
(V_N_NODES, V_N_VOCAB, V_MAX_DEPTH, V_N_WORDS, V_NODES, V_FIRST_TOK, V_TOK_ORDER, V_SETS, V_TOK_OFF, V_TOK_BYTES,
 V_ROOT, V_SLICE, V_RFIRST, V_RORDER) = range(14)  # fmt: skip
V_HDR = 16
NODE = 4  # words per trie node
SET = 9  # words per shortcut set: 8 of bytes below, the height
SHORTCUT = 16  # nodes below which a subtree has a shortcut set

# A: registers
(H_OP, H_ARG, H_ARG2, H_RES, H_RES_FLAGS, H_N_STATES, H_N_MASKS, H_GROW, H_ERR_LIMIT, H_ERR_AMOUNT, H_ERR_POS,
 H_MAX_STACKS, H_MAX_DEPTH, H_BUDGET, H_CHAINS, H_HORIZON, H_N_WORDS, H_REHASH, H_STAMP, H_VISITED, H_WALKS,
 H_P_KIND, H_P_ARG, H_P_SETS, H_P_RULES, H_P_ALTS, H_P_REPS, H_END_POS, H_ROOT, H_NTOK, H_NEX, H_REST, H_M_OFF,
 H_M_LEN, H_DIRTY, H_HEAVY, H_SSTAMP, H_SLICED, H_SRULES, H_NEEDS) = range(40)  # fmt: skip
H_FRAMES = 48  # 2 * MAX_CUTS words: the frames of a stack being cut
# the rules not compiled yet that an operation met (H_NEEDS of them, from H_NEED_LIST): a closure, a step and a
# state's mask go on past each one to name the others, so the host compiles them at once and the operation starts
# over once, not once per rule
H_NEED_LIST, MAX_NEEDS = 64, 32
H_REG = H_NEED_LIST + MAX_NEEDS  # the region directory: REG_W words per region
REG_W = 3  # offset, capacity (entries), used (entries)
# regions (their entry widths: WIDTH)
(R_PROG, R_NODES, R_NHASH, R_CLOS, R_CHASH, R_CPOOL, R_STATES, R_TRANS, R_SHASH, R_SPOOL, R_LOCAL, R_LHASH, R_XBITS,
 R_XHASH, R_SBITS, R_SBHASH, R_MASKS, R_TPOOL, R_EXPOOL, R_WORK, R_SEEN, R_CLOUT, R_STEP, R_DEPTH, R_EXREC, R_TOKS,
 R_WALKOUT, R_OUT, R_INPUT, R_PARTS, R_PHASH, R_PPOOL, R_PSCR) = range(33)  # fmt: skip
N_REGIONS = 33
HDR = H_REG + REG_W * N_REGIONS
ST_W = 8  # a state: off, len, flags, hash, partition, its row of TRANS, the last slice check to reach it, its slice
SLICE_UNKNOWN, SLICE_ALIVE, SLICE_NOT = 0, 1, 2  # a state's slice (`pda_walk.slice_alive` from it)
SLICE_STACKS = 32  # a slice check gives up at a state of more stacks (costly to step: sets of strings' unique items)
SLICE_RULES = 16  # and at a rule not compiled yet past this many in one operation (H_SRULES: those asked for;
# slice 0's masks in one process: 1 rule 74 us a mask, p99 924 us; 4: 69, 905; 16: 66, 862; 48: 69, 901; any: 71, 951)
SLICE_STATES = 128  # and past this many states (its queue is TOKS: at most SPARSE_MAX; slice 0's masks, in one
# process: 64 states 76 us a mask, p99 946 us; 128: 71, 951; 256: 73, 1,008)
PT_W = 5  # a partition: off, n (set rows), hash, classes, dead class
PT_CLASS, PT_BYTES = 256, 512  # a partition's per-byte class, then its classes' bytes, after its n set rows
WIDTH = (1, 4, 1, 4, 1, 1, ST_W, 1, 1, 1, 6, 1, 4, 1, 3, 1, -1, 1, 1, 2, 3, 1, 1, 3, 1, 1, -1, -1, 1, PT_W, 1, 1, 1)
# WIDTH -1: n_words (a mask)
HASHES = ((R_NHASH, R_NODES), (R_CHASH, R_CLOS), (R_SHASH, R_STATES), (R_LHASH, R_LOCAL), (R_XHASH, R_XBITS),
          (R_SBHASH, R_SBITS), (R_PHASH, R_PARTS), (R_SEEN, -1))  # fmt: skip
# state flags
COMPLETE, S_EXIT, ONLY_EXIT = 1, 2, 4
DENSE = -1  # m_len of a mask stored as a row of MASKS
SPARSE_MAX = 256  # masks of at most this many tokens are stored as token lists
MAX_CUTS = 8  # cuts tried (each a budgeted walk) before a stack is walked whole (masks.py's _MAX_CUTS)
assert H_NEEDS < H_FRAMES and H_FRAMES + 2 * MAX_CUTS <= H_NEED_LIST  # (registers, then H_FRAMES, the list)
# operations (H_OP) and results
OP_START, OP_PUSH_TOKEN, OP_PUSH_BYTES, OP_MASK, OP_IMPORT = range(5)
DONE, NEED_GROW, LIMIT_PASSED, NEED_RULE = 0, 1, 2, 3
# H_ERR_LIMIT: which limit was passed (max_stacks by a state's stacks or a closure's items; max_stack_depth)
LIM_STACKS, LIM_ITEMS, LIM_DEPTH = 1, 2, 3
