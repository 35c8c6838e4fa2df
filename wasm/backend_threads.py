"""The wasm backend on several kernel threads (under Pyodide, in a browser): the threads build of the kernels
(`llamay_kernels_threads.wasm`) over one shared WebAssembly.Memory that `web/src/kernel-threads.mjs` creates,
with one instance of the module per thread (part 0 here, on the engine's thread; the others in module workers).

Pyodide's own heap is not shared memory, so this backend's buffers and weights live in that other memory: a
weight is copied there once at bind (every thread reads it in place), activations and the KV cache are allocated
there, and the host reads and writes them through JS typed arrays (`SharedRuntime`).

Kernel calls are queued, not run: each is its command's address (packed and kept as `WasmBackend` does), and
`sync()` (the flush point `forward` calls at the end of a pass) hands the whole list to `llamay_run_list`, which
splits every matmul by weight rows over the threads and waits at a barrier only where a matmul's input changes
(wasm/src/threads.c). So a decode step costs one call into wasm and one wake-up of the other threads. The queue is
flushed first whenever the host touches a buffer (write, read, an overlapping copy) or needs a kernel's result
(argmax, top_k), so the model code sees the kernels' effects in order, as on every other backend. A buffer to
buffer `copy` is queued too, as `get_rows` of one F32 row (a memcpy in C), in order with the kernels.
"""

from __future__ import annotations

from array import array
from typing import Any

from ..errors import LlamayError
from ..ggml_types import GGMLType
from ..kernels.interface import Weight
from .backend import CMD_BYTES, CMD_SLOTS, F32, FORMATS, WasmBackend
from .runtime import ABI_VERSION, OPS, RELAXED, SIGNATURES

ALIGN = 16
PAGE = 65536
HEAP_END = 65535 * PAGE  # the module's memory maximum (wasm/build.py THREADS_FLAGS)
_GET_ROWS = OPS["llamay_get_rows"]
_F32 = int(GGMLType.F32)
ERRORS = {-1: "a weight type the module does not run", -2: "a row that is not whole blocks",
          -3: "a row id outside the tensor's rows", -100: "an unknown op"}  # fmt: skip


class SharedRuntime:
    """The runtime protocol (`wasm/runtime.py`) over a `KernelThreads` of kernel-threads.mjs: `fn` are part 0's
    exports, `alloc` a bump allocator over the shared memory from its `heapBase` (nothing is freed: the memory is
    the model's, dropped with it), and byte reads and writes go through typed arrays on the memory's buffer."""

    variant = RELAXED  # the threads build is built with relaxed SIMD

    def __init__(self, pool: Any) -> None:
        from js import Uint8Array

        self.pool = pool
        self._u8 = Uint8Array
        self.fn = {name: getattr(pool.exports, name) for name in (*SIGNATURES, "llamay_run_list")}
        if self.fn["llamay_abi_version"]() != ABI_VERSION:
            raise LlamayError(f"llamay_kernels_threads.wasm: ABI {self.fn['llamay_abi_version']()}, expected "
                              f"{ABI_VERSION}")  # fmt: skip
        self.threads = int(pool.threads)
        self.ctl = int(pool.ctl)
        self._top = int(pool.heapBase)

    @property
    def base(self) -> int:  # the shared memory has no host address here
        raise LlamayError("the kernel threads' memory is read and written through SharedRuntime, not ctypes")

    def alloc(self, nbytes: int) -> int:
        addr = self._top
        self._top = (addr + max(nbytes, 1) + ALIGN - 1) // ALIGN * ALIGN
        if self._top > HEAP_END:
            raise MemoryError(f"the kernel threads' memory is exhausted ({self._top} bytes wanted, at most {HEAP_END})")
        self.pool.ensure(self._top)
        return addr  # zeroed: fresh memory, never handed out twice

    def write(self, addr: int, data: Any) -> None:
        src = memoryview(data).cast("B")
        if src.nbytes:
            self._u8.new(self.pool.memory.buffer, addr, src.nbytes).assign(src)

    def read(self, addr: int, nbytes: int) -> bytes:
        return self._u8.new(self.pool.memory.buffer, addr, nbytes).to_bytes() if nbytes else b""

    def move(self, dst: int, src: int, nbytes: int) -> None:
        self._u8.new(self.pool.memory.buffer).copyWithin(dst, src, src + nbytes)

    def place(self, data: memoryview) -> int:
        src = memoryview(data).cast("B")
        addr = self.alloc(len(src))
        self.write(addr, src)
        return addr


class ThreadsBackend(WasmBackend):
    """WasmBackend whose kernels are queued and run as one command list on `pool.threads` threads at sync."""

    def __init__(self, pool: Any) -> None:
        rt = SharedRuntime(pool)
        self.threads = rt.threads
        self._queue: list[int] = []
        super().__init__(rt)
        self._exec_now = self._exec
        self._exec = self._queue.append  # a kernel call queues its command (None: no error code yet)
        self._run = self.fn["llamay_run_list"]
        self._list, self._list_cap = 0, 0

    # -- the queue ------------------------------------------------------------------------------------------

    def sync(self) -> None:
        q = self._queue
        if not q:
            return
        if len(q) > self._list_cap:
            self._list_cap = max(len(q), 2 * self._list_cap, 1024)
            self._list = self.rt.alloc(4 * self._list_cap)
        self.rt.write(self._list, array("I", q))
        count = len(q)
        q.clear()
        rc = self._run(self.rt.ctl, self._list, count)
        if rc:
            raise LlamayError(f"wasm kernel failed in a command list of {count} on {self.threads} threads: "
                              f"{ERRORS.get(rc, 'an error')} (code {rc})")  # fmt: skip

    def _command(self, key: tuple, args: tuple | None = None) -> int:
        if len(self._cmds) >= CMD_SLOTS:
            self.sync()  # the arena starts over: queued commands must have run before their slots are reused
            self._cmds.clear()
        addr = self._arena + CMD_BYTES * len(self._cmds)
        args = key if args is None else args
        words = [a & 0xFFFFFFFF if type(a) is int else a for a in args]
        self.rt.write(addr, FORMATS[args[0]].pack(*words))
        self._cmds[key] = addr
        return addr

    def _scratch_for(self, nbytes: int) -> int:
        # every thread converts the activation rows into its own share (llamay_exec_part: 16-aligned shares)
        return super()._scratch_for((nbytes + 15) // 16 * 16 * self.threads)

    # -- memory: the host's accesses flush the queue first ---------------------------------------------------

    def write_f32(self, buf: int, values: Any, offset: int = 0) -> None:
        if self._queue:
            self.sync()
        vals = values if isinstance(values, array) and values.typecode == "f" else array("f", values)
        self.rt.write(buf + F32 * offset, vals)

    def write_i32(self, buf: int, values: Any, offset: int = 0) -> None:
        if self._queue:
            self.sync()
        vals = values if isinstance(values, array) and values.typecode == "i" else array("i", values)
        self.rt.write(buf + F32 * offset, vals)

    def read_f32(self, buf: int, offset: int, n: int) -> list[float]:
        if self._queue:
            self.sync()
        return array("f", self.rt.read(buf + F32 * offset, F32 * n)).tolist()

    def read_bytes(self, buf: int, offset: int, n: int) -> bytes:
        if self._queue:
            self.sync()
        return self.rt.read(buf + F32 * offset, F32 * n)

    def copy(self, dst: int, dst_off: int, src: int, src_off: int, n: int) -> None:
        d, s = dst + F32 * dst_off, src + F32 * src_off
        if d + F32 * n <= s or s + F32 * n <= d:  # apart: queued in order, as a one-row F32 get_rows (memcpy)
            key = (_GET_ROWS, _F32, d, s, self._zero, 1, n, 1)
            self._exec(self._cmds.get(key) or self._command(key))
            return
        self.sync()
        self.rt.move(d, s, F32 * n)

    def bind(self, name: str, t: GGMLType, shape: tuple[int, ...], data: memoryview) -> Weight:
        self.sync()
        return super().bind(name, t, shape, data)

    # -- the kernels with a result run at once, after the queue --------------------------------------------

    def argmax(self, x: int, offset: int, n: int) -> int:
        self.sync()
        key = (OPS["llamay_argmax"], x + F32 * offset, n)
        return self._exec_now(self._cmds.get(key) or self._command(key))

    def top_k(self, x: int, offset: int, n: int, k: int) -> list[tuple[int, float]]:
        self.sync()
        cap, idx, val = self._topk
        if k > cap:
            cap = max(k, 64)
            idx, val = self.rt.alloc(F32 * cap), self.rt.alloc(F32 * cap)
            self._topk = (cap, idx, val)
        key = (OPS["llamay_top_k"], x + F32 * offset, n, k, idx, val)
        got = self._exec_now(self._cmds.get(key) or self._command(key))
        ids = array("i", self.rt.read(idx, F32 * got)).tolist()
        vals = array("f", self.rt.read(val, F32 * got)).tolist()
        return list(zip(ids, vals, strict=True))
