"""The numba backend: the kernel interface (`llamay.kernels.interface`) over 1-D numpy arrays.

Weights stay where the GGUF map put them: `bind` wraps the tensor's bytes with `np.frombuffer` (no copy) and
picks the type's kernels once, from the traits table (`kernels.table`); the hot methods only call them. The
kernel ops whose arguments are all plain (`llamay.kernels.ops`) call the numba kernel of that name directly.
Matrices of the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) with rows in multiples of eight
are also repacked once, in strips of eight rows (`kernels.strips`), which their matmuls read instead (the map's
bytes still serve `get_rows`); `LLAMAY_REPACK=0` turns that off, for ggml's vec_dot summation order. The kernels
live in `llamay.native.kernels` (numba, `cache=True`: compiled once per machine into `__pycache__`); LLVM's own
pages leave the process's resident set whenever numba is done compiling or loading them (`llvm_pages`).
docs/kernels.md, "Memory of the numba backend", has what stays resident and why.

Threads: numba's parallel loops (matmul rows, attention heads). The count is `LLAMAY_THREADS`, else numba's
default, never more than the cores this process may run on; `set_threads(n)` changes it. Which kernels use
them is `ThreadPolicy`'s call: not those below `LLAMAY_PARALLEL_MIN_WORK` multiply-adds,
nor small ones while the machine is too busy to give every thread its core.
"""

from __future__ import annotations

import functools
import inspect
import mmap
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from llamay.errors import UnsupportedTypeError
from llamay.ggml_types import GGMLType, block_size, row_bytes
from llamay.kernels import compose
from llamay.kernels.gelu import gelu_table
from llamay.kernels.interface import BatchView, Weight
from llamay.kernels.moe import compose_experts
from llamay.kernels.ops import OPS, Op

from . import llvm_pages
from .kernels import attention as att
from .kernels import elementwise as ew
from .kernels import moe
from .kernels import strips as st
from .kernels.activations import QK8_0, QK8_K, QK8_K_SUM
from .kernels.panels import PANEL
from .kernels.pda import pda as _pda
from .kernels.table import KERNELS
from .kernels.traits import FLOAT, Q8, Q8K

STRIPS = "strips"  # the scratch of the strip matmuls (beside the activation formats FLOAT, Q8, Q8K)
OP_MODULES = (ew, att, moe)  # where the kernel of a plain op is found, by its name


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


TOP_K_HEAP_MAX = 64  # top_k takes the heap pass while k is under n / 64: a vocabulary's top 40, not its top half


def release_file_pages(data: memoryview) -> None:
    """Drop the pages of a mapped file region from this process's memory (repacking read them all, and the
    matmuls now read the repacked copy): they stay in the OS's page cache, and a later read (get_rows of an
    embedding) maps just the pages it touches again. Only for a read-only file map, where this loses nothing;
    memory that is not a map (bytes, under Pyodide) is left alone."""
    owner = data.obj
    if not isinstance(owner, mmap.mmap) or not hasattr(owner, "madvise") or data.nbytes == 0:
        return
    base = np.frombuffer(owner, np.uint8, count=1).ctypes.data
    start = np.frombuffer(data, np.uint8, count=1).ctypes.data - base
    first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE  # whole pages inside the region only
    end = (start + data.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
    if end > first:
        owner.madvise(mmap.MADV_DONTNEED, first, end - first)


# -- threads: which kernels run on all of them ------------------------------------------------------------

SMALL_WORK = 200_000  # multiply-adds: about 10 µs on one core
BIG_WORK = 4_000_000  # about 200 µs on one core
# the policy counts work in a strip matmul's multiply-adds; one of attention's takes about eight times as long
# (float32 against int8 dot4s, a score's exp, rows gathered by slot): 16 heads of 64 over 50 keys take ~38 µs
ATTENTION_COST = 8
STALL_S = 0.002  # a small kernel that took this long waited for a preempted thread
STALLS = 3  # hiccups (bursts of stalls) within WINDOW that make a back-off
HICCUP = 50  # stalls within this many small kernels of a hiccup's first are that hiccup (one burst of another process)
WINDOW = 2_000  # small parallel kernels (about ten decode steps of a small model)
BACK_OFF_MIN = 500  # small kernels on one thread after a first back-off (a few decode steps)
BACK_OFF_MAX = 20_000  # ... doubled while back-offs follow each other, up to about a hundred decode steps
RELAPSE = 5 * WINDOW  # a back-off this soon after the last one ended doubles the length; a later one starts over


class ThreadPolicy:
    """How many threads a kernel runs on: numba's parallel loops, guarded against a busy machine.

    A parallel kernel ends when its slowest thread does. On a machine shared with other busy processes the OS now
    and then preempts one of our threads, and a kernel that takes 50 µs waits a whole time slice (4-12 ms) instead;
    one decode step runs some 200 such kernels, so a few preemptions cost more than the second thread saves. Hence:

    - below `small_work` multiply-adds a kernel runs on one thread (fork and join cost what a second thread saves);
    - from `big_work` up it runs on all of them (its work hides a stall);
    - in between it runs on all of them while they keep up: the caller reports how long each took (`observe`), and
      after STALLS hiccups within the last WINDOW, the next ones run on one thread for a back-off, then all
      threads are tried again.

    Evidence must be sustained: the stalls of one burst (another process waking for a few milliseconds) are one
    hiccup, however many kernels it delays. A back-off starts short (BACK_OFF_MIN) and doubles, up to BACK_OFF_MAX,
    only while the machine stays busy (the next back-off within RELAPSE of the last one's end): a transient hiccup
    on an idle machine costs a few decode steps on one thread, never the rest of a run.
    """

    def __init__(self, n_threads: int, small_work: int = SMALL_WORK, big_work: int = BIG_WORK) -> None:
        self.n_threads = n_threads
        self.small_work = small_work
        self.big_work = big_work
        self._seen = 0  # small kernels run on all threads so far
        self._hiccups: deque[int] = deque()  # when (in _seen) the recent hiccups began
        self._serial_left = 0  # small kernels still to run on one thread
        self._back_off = BACK_OFF_MIN  # the length of the next back-off
        self._resumed = -RELAPSE  # when (in _seen) the last back-off ended
        self.back_offs = 0  # how often the policy backed off (for reports and tests)

    def threads(self, work: int) -> int:
        """Threads for a kernel of `work` multiply-adds; if it is more than one and `watched(work)`, report the
        kernel's duration to `observe`."""
        if self.n_threads == 1 or work < self.small_work:
            return 1
        if work >= self.big_work:
            return self.n_threads
        if self._serial_left:
            self._serial_left -= 1
            if not self._serial_left:
                self._resumed = self._seen
            return 1
        return self.n_threads

    def watched(self, work: int) -> bool:
        return self.small_work <= work < self.big_work

    def observe(self, seconds: float) -> None:
        """The duration of a small kernel that ran on all threads."""
        self._seen += 1
        if seconds < STALL_S:
            return
        if self._hiccups and self._seen - self._hiccups[-1] < HICCUP:
            return  # the same burst
        self._hiccups.append(self._seen)
        while self._hiccups[0] <= self._seen - WINDOW:
            self._hiccups.popleft()
        if len(self._hiccups) >= STALLS:
            self._hiccups.clear()
            relapse = self._seen - self._resumed <= RELAPSE
            self._back_off = min(2 * self._back_off, BACK_OFF_MAX) if relapse and self.back_offs else BACK_OFF_MIN
            self._serial_left = self._back_off
            self.back_offs += 1


def _same(*formats: st.StripFormat | None) -> bool:
    """Whether the weights' strip formats are one (by identity first: a type's format is one object, and a
    dataclass's == costs microseconds on every decode step's qkv and moe_experts)."""
    return all(g is formats[0] or g == formats[0] for g in formats[1:])


@dataclass(eq=False)
class NumbaWeight:
    """A weight's bytes (uint8, zero-copy) and its kernels; vectors (n_out = 1) also decoded to float32."""

    type: GGMLType
    data: np.ndarray  # (n_out · row_bytes,) uint8, a view of the file map
    row_bytes: int
    matmul: Callable
    act: str  # the scratch its matmul takes: its activation format, or STRIPS
    get_rows: Callable
    rows_act: str  # the scratch its get_rows takes: its activation format
    vec: np.ndarray | None  # (n_in,) float32 for vectors (norm weights, biases), else None
    strips: np.ndarray | None = None  # the weight repacked for `strips.matmul_strips` (then act is STRIPS)
    strip_format: st.StripFormat | None = None


class NumbaBackend:
    name = "numba"
    runnable_types = frozenset(KERNELS)  # the types of the traits table

    def __init__(self) -> None:
        llvm_pages.install()  # LLVM's pages leave the resident set whenever numba is done compiling
        self._tls = threading.local()
        self._loaded: set[Callable] = set()  # parallel kernels called once: their next durations are observed
        env = os.environ.get("LLAMAY_THREADS", "").strip()
        min_work = os.environ.get("LLAMAY_PARALLEL_MIN_WORK", "").strip()
        self.policy = ThreadPolicy(1, int(min_work) if min_work else SMALL_WORK)
        self.n_threads = 0
        # 32-element block types in strips of eight rows (`strips`); LLAMAY_REPACK=0 keeps ggml's vec_dot order
        self.repack = os.environ.get("LLAMAY_REPACK", "1").strip() != "0"
        self.set_threads(int(env) if env else numba.config.NUMBA_NUM_THREADS)
        self._one = np.ones(1, np.float32)  # stands in for an absent weight vector
        self._row0 = np.zeros(1, np.int32)  # row 0: `moe_experts` without its fused kernel adds one row
        self._cap = 0  # activation elements (rows × n_in) the scratch holds
        self._panel_in = 0  # the longest row the panel scratch holds
        self._panel_q = np.zeros((0, 0), np.uint8)
        self._scratch: dict[str, tuple[np.ndarray, ...]] = {}
        self._acc = np.zeros((1, st.ACC), np.float32)  # (threads, tokens · ACC): strip matmuls' sums
        self._grow(1, QK8_K)
        self._scores = np.zeros((1, 1), np.float32)  # (threads, n_slots): attention scores
        self._slots = np.zeros((1, 1), np.int32)  # (threads, n_slots): the cache slots of the keys
        self._cos_sin = np.zeros(2, np.float64)  # (n_rot,): rope's cos and sin per pair
        self._rope_consts: dict[tuple, tuple] = {}  # rope's float32 constants by (base, n_rot, YaRN's three)
        self._attn_consts: dict[tuple, tuple] = {}  # attention's float32 scale and (softcap, max_bias) by their floats
        # per layer, judged once: keyed weakly on a weight's handle (this backend outlives the models it runs, and
        # the values hold no reference to their key), so a model's weights are freed with it
        self._fused_qkv: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # q's -> (k's, v's, one kernel?)
        self._experts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # gate[0]'s: `_expert_strips`

    # -- threads --------------------------------------------------------------------------------------------

    def set_threads(self, n: int) -> int:
        """Use n threads (at least 1, at most the cores and numba's pool); returns the count in effect."""
        self.n_threads = max(1, min(int(n), available_cores(), numba.config.NUMBA_NUM_THREADS))
        self.policy.n_threads = self.n_threads
        return self.n_threads

    def _parallel(self, kernel: Callable, work: int, *args: Any) -> None:
        """Run a parallel kernel of `work` multiply-adds on the threads the policy gives it, timing it if asked."""
        n = self.policy.threads(work)
        # numba's thread count belongs to the calling Python thread: set it wherever kernels are called from
        if getattr(self._tls, "n", 0) != n:
            numba.set_num_threads(n)
            self._tls.n = n
        if n > 1 and self.policy.watched(work) and kernel in self._loaded:
            start = time.perf_counter()
            kernel(*args)
            self.policy.observe(time.perf_counter() - start)
        else:
            kernel(*args)
            # a kernel's first call loads it from numba's cache (or compiles it): a pause that is no stall
            self._loaded.add(kernel)

    # -- memory ---------------------------------------------------------------------------------------------

    def alloc_f32(self, n: int) -> np.ndarray:
        return np.zeros(n, np.float32)

    def alloc_i32(self, n: int) -> np.ndarray:
        return np.zeros(n, np.int32)

    def write_f32(self, buf: np.ndarray, values: Any, offset: int = 0) -> None:
        vals = np.asarray(values, dtype=np.float32)
        buf[offset : offset + len(vals)] = vals

    def write_i32(self, buf: np.ndarray, values: Any, offset: int = 0) -> None:
        vals = np.asarray(values, dtype=np.int32)
        buf[offset : offset + len(vals)] = vals

    def read_f32(self, buf: np.ndarray, offset: int, n: int) -> list[float]:
        return buf[offset : offset + n].tolist()

    def read_bytes(self, buf: np.ndarray, offset: int, n: int) -> bytes:
        return buf[offset : offset + n].tobytes()

    def copy(self, dst: np.ndarray, dst_off: int, src: np.ndarray, src_off: int, n: int) -> None:
        dst[dst_off : dst_off + n] = src[src_off : src_off + n]

    def sync(self) -> None:  # every kernel runs when it is called
        pass

    def _fits(self, n: int, n_in: int) -> bool:
        """Whether the activation scratch holds n rows of n_in for the current threads."""
        return n * n_in <= self._cap and self._scratch_threads == self.n_threads and n <= self._scratch_tokens

    def _grow(self, n: int, n_in: int) -> None:
        """Scratch for matmuls of n rows of n_in; grown, never shrunk, between calls."""
        size = max(n * n_in, 2 * self._cap) if n * n_in > self._cap else self._cap
        panel_in = max(n_in, self._panel_in)
        threads = max(self.n_threads, len(self._panel_q))
        if size != self._cap:
            self._cap = size
            self._xq = np.zeros(size, np.int8)  # (rows, n_in) quants, shared by Q8_0/Q8_1 and Q8_K
            nb, nbk = size // QK8_0 + 1, size // QK8_K + 1
            self._xf = (np.zeros(size, np.float32),)  # (rows, n_in): x rounded to fp16 / bf16
            self._x8 = (np.zeros(nb, np.float32), np.zeros(nb, np.float32))  # (rows, n_in / 32): xd, xs
            self._xsum = np.zeros(nb, np.int32)  # (rows, n_in / 32): Σq, for the strip matmuls' -K·Σq
            self._x8k = (np.zeros(nbk, np.float32), np.zeros(size // QK8_K_SUM + 1, np.int32))  # kd, bsum
        if panel_in != self._panel_in or threads != len(self._panel_q):
            self._panel_in = panel_in
            # per thread: a panel's unpacked quants and block scales, row after row, then interleaved (`panels`)
            self._panel_q = np.zeros((threads, 2 * PANEL * panel_in), np.uint8)
            self._panel_d = np.zeros((threads, 2 * PANEL * panel_in // QK8_0 + 1), np.float32)
            self._panel_e = np.zeros((threads, 2 * PANEL * panel_in // QK8_0 + 1), np.float32)
            self._panel_f = np.zeros((threads, PANEL * panel_in // QK8_K + 1), np.float32)
            self._panel_sc = np.zeros((threads, PANEL * panel_in // QK8_K_SUM + 1), np.int32)
            self._panel_ei = np.zeros((threads, PANEL * panel_in // QK8_K_SUM + 1), np.int32)
        t = self.n_threads
        if len(self._acc) < t or self._acc.shape[1] < n * st.ACC:
            self._acc = np.zeros((max(t, len(self._acc)), max(n * st.ACC, self._acc.shape[1])), np.float32)
        panels = (self._panel_q[:t], self._panel_d[:t], self._panel_e[:t])
        panels_k = (self._panel_q[:t], self._panel_d[:t], self._panel_f[:t], self._panel_sc[:t], self._panel_ei[:t])
        strips = (self._xq, *self._x8, self._xsum, self._acc[:t])
        self._scratch = {
            FLOAT: self._xf,
            Q8: (self._xq, *self._x8, *panels),
            Q8K: (self._xq, *self._x8k, *panels_k),
            STRIPS: strips,
        }
        # get_rows unpacks a row into the first thread's panel scratch
        self._rows_scratch = {FLOAT: (), Q8: tuple(a[0] for a in panels), Q8K: tuple(a[0] for a in panels_k)}
        self._scratch_threads, self._scratch_tokens = t, self._acc.shape[1] // st.ACC

    # -- weights --------------------------------------------------------------------------------------------

    def bind(self, name: str, t: GGMLType, shape: tuple[int, ...], data: memoryview) -> Weight:
        kernels = KERNELS.get(t)
        if kernels is None:
            raise UnsupportedTypeError(
                f"{name}: the numba backend cannot run {t.name}; it runs {', '.join(k.name for k in KERNELS)}"
            )
        n_in = shape[0]
        n_out = 1
        for d in shape[1:]:
            n_out *= d
        if n_in % block_size(t):
            raise ValueError(f"{name}: rows of {n_in} are not whole {t.name} blocks")
        rb = row_bytes(t, n_in)
        raw = np.frombuffer(data, dtype=np.uint8, count=rb * n_out)
        tr = kernels.traits
        handle = NumbaWeight(t, raw, rb, kernels.matmul, tr.act, kernels.get_rows, tr.act, None)
        if n_out == 1:
            handle.vec = np.zeros(n_in, np.float32)
            self._get_rows(handle.vec, handle, np.zeros(1, np.int32), 1, n_in)
        if self.repack and tr.strip is not None and n_out % st.ROWS == 0:
            handle.strips, handle.strip_format = st.repack(tr.strip, tr.block, raw, n_in, n_out), tr.strip
            handle.matmul, handle.act = st.matmul_strips, STRIPS
            release_file_pages(data)
        return Weight(name, t, n_in, n_out, handle)

    # -- kernels --------------------------------------------------------------------------------------------

    def get_rows(self, out: np.ndarray, w: Weight, ids: np.ndarray, n: int) -> None:
        self._get_rows(out, w.handle, ids, n, w.n_in)

    def _get_rows(self, out: np.ndarray, h: NumbaWeight, ids: np.ndarray, n: int, n_in: int) -> None:
        if h.rows_act != FLOAT and (n_in > self._panel_in or self._scratch_threads != self.n_threads):
            self._grow(1, n_in)
        h.get_rows(out, h.data, h.row_bytes, ids, n, n_in, *self._rows_scratch[h.rows_act])

    def matmul(self, out: np.ndarray, w: Weight, x: np.ndarray, n: int) -> None:
        h: NumbaWeight = w.handle
        if not self._fits(n, w.n_in) or w.n_in > self._panel_in:
            self._grow(n, w.n_in)
        work = n * w.n_out * w.n_in
        if h.strips is not None:
            f = h.strip_format
            args = (h.strips, f.fmt, f.offset, f.has_min, w.n_out, x, n, w.n_in)
            self._parallel(h.matmul, work, out, *args, *self._scratch[STRIPS])
            return
        self._parallel(h.matmul, work, out, h.data, h.row_bytes, w.n_out, x, n, w.n_in, *self._scratch[h.act])

    def qkv(
        self,
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        wq: Weight,
        wk: Weight,
        wv: Weight,
        x: np.ndarray,
        n: int,
    ) -> None:
        hq, hk, hv = wq.handle, wk.handle, wv.handle
        f = hq.strip_format
        fused = self._fused_qkv.get(hq)
        if fused is None or fused[0] is not hk or fused[1] is not hv:  # a layer's three, judged once
            ok = hq.strips is not None and hk.strips is not None and hv.strips is not None
            fused = self._fused_qkv[hq] = (hk, hv, ok and _same(hk.strip_format, f, hv.strip_format))
        if not fused[2]:
            compose.qkv(self.matmul, q, k, v, wq, wk, wv, x, n)
            return
        n_in = wq.n_in
        if not self._fits(n, n_in):
            self._grow(n, n_in)
        work = n * (wq.n_out + wk.n_out + wv.n_out) * n_in
        self._parallel(st.qkv_strips, work, q, k, v, hq.strips, hk.strips, hv.strips, f.fmt, f.offset, f.has_min,
                       wq.n_out, wk.n_out, wv.n_out, x, n, n_in, *self._scratch[STRIPS])  # fmt: skip

    def moe_route(
        self,
        ids: np.ndarray,
        weights: np.ndarray,
        logits: np.ndarray,
        router: Weight,
        x: np.ndarray,
        k: int,
        gating: int,
        norm_w: bool,
        w_scale: float,
    ) -> None:
        if router.type == GGMLType.F32:  # llama.cpp's quantizer leaves routers F32: one serial kernel
            h: NumbaWeight = router.handle
            moe.moe_route_f32(ids, weights, logits, h.data, h.row_bytes, x, router.n_out, router.n_in, k, gating,
                              norm_w, w_scale)  # fmt: skip
            return
        self.matmul(logits, router, x, 1)
        moe.moe_route(ids, weights, logits, router.n_out, k, gating, norm_w, w_scale)

    def moe_experts(
        self,
        out: np.ndarray,
        gate: tuple,
        up: tuple,
        down: tuple,
        x: np.ndarray,
        ids: np.ndarray,
        weights: np.ndarray,
        k: int,
        h: np.ndarray,
        y: np.ndarray,
    ) -> None:
        chosen = ids[:k].tolist()
        strips = self._expert_strips(gate, up, down)
        if strips is None:
            compose_experts(self, out, gate, up, down, x, chosen, weights, h, y, self._row0, lambda b, at: b[at:])
            return
        gs, us, ds, f = strips
        mats = tuple(gs[e] for e in chosen) + tuple(us[e] for e in chosen)
        downs = tuple(ds[e] for e in chosen)
        n_embd, n_ff = gate[0].n_in, gate[0].n_out
        if max(n_embd, k * n_ff) > self._cap or self._scratch_threads != self.n_threads or self._scratch_tokens < 2:
            self._grow(max(k, 2), max(n_embd, n_ff))
        xq, xd, xs, xsum, acc = self._scratch[STRIPS]
        # the policy judges a parallel loop: the larger of the kernel's two (all gate and up rows), so that on a busy
        # machine it backs off to one thread as the per-expert matmuls it replaces did (counted whole, 3 k e f, it was
        # always 'big': a stalled thread at each of its two barriers took decode from ~150 to 5 tok/s under load)
        work = 2 * k * n_embd * n_ff
        self._parallel(st.moe_strips, work, out, mats, downs, f.fmt, f.offset, f.has_min, weights, k, x, n_embd,
                       n_ff, h, xq, xd, xs, xsum, acc)  # fmt: skip

    def _expert_strips(self, gate: tuple, up: tuple, down: tuple) -> tuple | None:
        """A layer's experts' strips (gate, up, down, each by expert) and their one format, or None when some expert
        is not in strips of that format; looked up once per layer (keyed on gate[0]'s handle, checked against the
        first up and down handles: a layer's three go together)."""
        key = gate[0].handle
        hit = self._experts.get(key)
        if hit is not None and hit[0] is up[0].handle and hit[1] is down[0].handle and hit[2] == len(gate):
            return hit[3]
        gs, us, ds = (tuple(w.handle.strips for w in ws) for ws in (gate, up, down))
        f = down[0].handle.strip_format
        fmts = [w.handle.strip_format for w in (*gate, *up, *down)]
        ok = all(m is not None for m in gs + us + ds) and _same(f, *fmts)
        strips = (gs, us, ds, f) if ok else None
        self._experts[key] = (up[0].handle, down[0].handle, len(gate), strips)  # (arrays and other handles only)
        return strips

    def add_bias(self, x: np.ndarray, b: Weight, n: int) -> None:
        ew.add_bias(x, b.handle.vec, n, b.n_in)

    def rms_norm(self, out: np.ndarray, x: np.ndarray, w: Weight | None, n: int, dim: int, eps: float) -> None:
        if w is None:
            ew.rms_norm(out, x, self._one, False, n, dim, eps)
        else:
            ew.rms_norm(out, x, w.handle.vec, True, n, dim, eps)

    def layer_norm(
        self, out: np.ndarray, x: np.ndarray, w: Weight, b: Weight | None, n: int, dim: int, eps: float
    ) -> None:
        bias = b.handle.vec if b is not None else self._one
        ew.layer_norm(out, x, w.handle.vec, bias, b is not None, n, dim, eps)

    def head_rms_norm(self, x: np.ndarray, w: Weight, n: int, n_heads: int, head_dim: int, eps: float) -> None:
        ew.rms_norm(x, x, w.handle.vec, True, n * n_heads, head_dim, eps)

    def rope(
        self,
        x: np.ndarray,
        pos: np.ndarray,
        n: int,
        n_heads: int,
        head_dim: int,
        n_rot: int,
        base: float,
        scale: float,
        neox: bool,
        freq_factors: Weight | None,
        ext_factor: float,
        mscale: float,
        corr_low: float,
        corr_high: float,
    ) -> None:
        if len(self._cos_sin) < n_rot:
            self._cos_sin = np.zeros(n_rot, np.float64)
        key = (base, n_rot, ext_factor, corr_low, corr_high)
        consts = self._rope_consts.get(key)
        if consts is None:  # a model's few sets, converted once (not per call: two calls per layer and token)
            consts = tuple(map(np.float32, (base ** (-2.0 / n_rot), ext_factor, corr_low, corr_high)))
            self._rope_consts[key] = consts
        theta_scale, ext, lo, hi = consts
        ff = freq_factors.handle.vec if freq_factors is not None else self._one
        ew.rope(x, pos, n, n_heads, head_dim, n_rot, theta_scale, scale, neox, ff, freq_factors is not None,
                self._cos_sin, ext, mscale, lo, hi)  # fmt: skip

    @staticmethod
    @functools.cache
    def _gelu_table() -> np.ndarray:
        """ggml's fp16 GELU table, the one portable uses (built on first use: only GELU models need it)."""
        return np.frombuffer(gelu_table(), dtype=np.float32)

    def geglu(self, out: np.ndarray, gate: np.ndarray, up: np.ndarray, count: int) -> None:
        ew.geglu(out, gate, up, count, self._gelu_table())

    def gelu(self, x: np.ndarray, count: int) -> None:
        ew.gelu(x, count, self._gelu_table())

    def attention(
        self,
        out: np.ndarray,
        q: np.ndarray,
        k_cache: np.ndarray,
        v_cache: np.ndarray,
        layer: int,
        n_slots: int,
        batch: BatchView,
        n_head: int,
        n_head_kv: int,
        head_dim: int,
        head_dim_v: int,
        kq_scale: float,
        causal: bool,
        window: int,
        softcap: float,
        max_bias: float,
        sinks: Weight | None,
    ) -> None:
        scores, slots = self._scores, self._slots
        if scores.shape[0] < self.n_threads or scores.shape[1] < n_slots:
            scores = self._scores = np.zeros((self.n_threads, n_slots), np.float32)
            slots = self._slots = np.zeros((self.n_threads, n_slots), np.int32)
        b = batch
        work = ATTENTION_COST * b.n * n_head * (int(b.pos[b.n - 1]) + 1) * (head_dim + head_dim_v)
        key = (kq_scale, softcap, max_bias)
        consts = self._attn_consts.get(key)
        if consts is None:  # a model's one set, converted once (not on every layer of every token)
            consts = self._attn_consts[key] = (np.float32(kq_scale), np.float32(softcap), np.float32(max_bias))
        t = self.n_threads
        self._parallel(
            att.attention, work, out, q, k_cache, v_cache, layer, n_slots,
            (b.n, b.pos, b.seq, b.pages, b.page_off, b.seq_len, b.page_size),
            (n_head, n_head_kv, head_dim, head_dim_v), consts[0], causal, window,
            (consts[1], consts[2], sinks is not None),
            sinks.handle.vec if sinks is not None else self._one, scores[:t], slots[:t],
        )  # fmt: skip

    def argmax(self, x: np.ndarray, offset: int, n: int) -> int:
        return int(ew.argmax(x, offset, n))

    def top_k(self, x: np.ndarray, offset: int, n: int, k: int) -> list[tuple[int, float]]:
        k = min(k, n)
        if k * TOP_K_HEAP_MAX < n:  # one pass with a small heap: no copy of the whole row
            vals, idx = np.empty(k, np.float32), np.empty(k, np.int64)
            kept = ew.top_k(x, offset, n, k, vals, idx)
            order = np.lexsort((idx[:kept], -vals[:kept]))
            return [(int(idx[j]), float(vals[j])) for j in order]
        seg = x[offset : offset + n]
        if k < n:  # every index at least as large as the k-th largest value, then sorted (ties by index)
            kth = np.partition(seg, n - k)[n - k]
            cand = np.flatnonzero(seg >= kth)
        else:
            cand = np.arange(n)
        order = cand[np.lexsort((cand, -seg[cand]))][:k]
        return [(int(j), float(seg[j])) for j in order]

    def pda(self, vocab: np.ndarray, arena: np.ndarray) -> int:
        return int(_pda(vocab, arena))


# -- the plain ops: the numba kernel of the same name, with the interface's arguments as they are ----------------


def _plain_kernel(op: Op) -> Callable:
    kernels = [getattr(m, op.name) for m in OP_MODULES if hasattr(m, op.name)]
    if len(kernels) != 1:
        raise ImportError(f"the numba backend has no method for op {op.name} and {len(kernels)} kernels of that name")
    kernel = kernels[0]
    want = [p.name for p in op.params]
    if list(inspect.signature(kernel.py_func).parameters) != want:
        raise ImportError(f"numba kernel {op.name} takes {inspect.signature(kernel.py_func)}, op {op.name} {want}")

    def method(self, *args):
        kernel(*args)

    method.__name__ = method.__qualname__ = op.name
    method.__signature__ = op.method_signature()
    return method


for _op in OPS:
    if _op.name not in vars(NumbaBackend):
        if not _op.plain or _op.result != "None":  # a result needs a method that returns it
            raise ImportError(f"op {_op.name} takes {_op.params}, returns {_op.result}: the numba backend needs a "
                              "method that lowers them")  # fmt: skip
        setattr(NumbaBackend, _op.name, _plain_kernel(_op))
