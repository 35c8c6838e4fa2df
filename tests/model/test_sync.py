"""`forward` ends with `backend.sync()` (interface.Backend.sync), the flush point that lets a backend queue its
kernels and run a pass as one command list (kernel threads). A backend that defers every kernel to the next flush
gives the same logits as one that runs each at once, and a decode step of a dense model flushes a non-empty queue
once: at its sync, not at a read in the middle of the pass."""

from __future__ import annotations

import pytest

from llamay.gguf import GGUFFile
from llamay.kernels.ops import OPS
from llamay.kernels.portable import PortableBackend
from llamay.model import Model
from llamay.model.forward import forward
from tests.models.tiny import build_tiny

HOST = ("write_f32", "write_i32", "read_f32")  # the host reads or writes a buffer: a flush first


class DeferredBackend(PortableBackend):
    """Portable, but a kernel with no result only joins a queue; the queue runs at sync and before anything that
    reads or writes a buffer from the host or returns a kernel's result (as a command-list backend must); `copy`,
    buffer to buffer, joins the queue as a kernel does. An op that portable composes of other ops (qkv,
    moe_experts, head_rms_norm) runs them when it runs: a command list holds the op, not its parts."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: list = []
        self.flushes = 0  # flushes that ran at least one kernel
        self.flushing = False

    def sync(self) -> None:
        if self.queue:
            self.flushes += 1
            queue, self.queue = self.queue, []
            self.flushing = True
            try:
                for method, args in queue:
                    method(self, *args)
            finally:
                self.flushing = False


def _deferred(name: str, returns: bool):
    method = getattr(PortableBackend, name)
    if returns:

        def call(self, *args):
            DeferredBackend.sync(self)
            return method(self, *args)
    else:

        def call(self, *args):
            if self.flushing:
                method(self, *args)
            else:
                self.queue.append((method, args))

    return call


for _name in HOST:
    setattr(DeferredBackend, _name, _deferred(_name, True))
DeferredBackend.copy = _deferred("copy", False)  # buffer to buffer: in order with the kernels
for _op in OPS:
    setattr(DeferredBackend, _op.name, _deferred(_op.name, _op.result != "None"))


def _logits(backend, f: GGUFFile, tokens: list[int]) -> list[list[float]]:
    m = Model(f, backend)
    st = m.new_state(n_ctx=len(tokens) + 1, n_batch=len(tokens))
    v = m.cfg.n_vocab
    out = [(forward(m, st, tokens[:4]), m.backend.read_f32(st.logits, 0, v))[1]]
    for t in tokens[4:]:
        forward(m, st, [t])
        out.append(m.backend.read_f32(st.logits, 0, v))
    return out


# dense; per-head QK norms (head_rms_norm is portable's rms_norm); experts in one op (moe_experts) and grouped
@pytest.mark.parametrize("arch", ["granite", "qwen3", "qwen3moe", "olmoe"])
def test_a_deferring_backend_gives_the_same_logits_and_flushes_once_a_step(arch: str) -> None:
    f = GGUFFile.from_buffer(build_tiny(arch).to_bytes(), f"tiny-{arch}.gguf")
    tokens = [1, 5, 9, 3, 7, 2, 8]
    want = _logits(PortableBackend(), f, tokens)
    deferred = DeferredBackend()
    got = _logits(deferred, f, tokens)
    assert got == want and any(any(row) for row in want)
    if "moe" not in arch:  # an MoE layer reads its router's logits on the host: a flush a layer
        # the prefill and each decode step: one flush of a non-empty queue each (bind's writes run no kernel)
        assert deferred.flushes == 1 + len(tokens) - 4
