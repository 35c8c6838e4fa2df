"""A loaded model: config, weights bound to a kernel backend, tokenizer; `new_state()` makes a State to run it."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any

from ..arch import bind_weights, get_architecture
from ..arch.binder import Tensor
from ..arch.weights import ModelWeights
from ..ggml_types import row_bytes
from ..gguf import GGUFFile, open_gguf
from ..kernels import Backend, get_backend
from ..tokenizer.vocab import check_vocab
from .state import DEFAULT_PAGE_SIZE, State
from .tensor_check import check_tensor_data

DEFAULT_N_CTX = 4096
FINGERPRINT_EDGE = 64  # bytes of each tensor's start and end that go into the fingerprint


EXPERT_BIAS = "_exps.bias"  # ffn_{gate,up,down}_exps.bias: one bias vector per expert (gpt-oss)


def _to_backend(node: Any, be: Backend) -> Any:
    """The weight tree with every Tensor replaced by the backend's bound Weight (same dataclasses)."""
    if isinstance(node, Tensor) and (len(node.shape) == 3 or node.name.endswith(EXPERT_BIAS)):
        return _experts(node, be)
    if isinstance(node, Tensor):
        return be.bind(node.name, node.type, node.shape, node.data())
    if isinstance(node, tuple):
        return tuple(_to_backend(x, be) for x in node)
    if dataclasses.is_dataclass(node):
        return dataclasses.replace(
            node, **{f.name: _to_backend(getattr(node, f.name), be) for f in dataclasses.fields(node)}
        )
    return node


def _experts(t: Tensor, be: Backend) -> tuple:
    """A 3-D tensor (n_in, n_out, n_expert) is a stack of matrices (an MoE layer's experts): one bound Weight per
    matrix, each a zero-copy slice of the file, so the existing matmul runs an expert over just its rows. An
    expert bias (n_out, n_expert) is a stack of vectors, one per expert, the same way."""
    *inner, n_mat = t.shape
    size = row_bytes(t.type, inner[0]) * (inner[1] if len(inner) > 1 else 1)
    data = t.data()
    return tuple(be.bind(f"{t.name}[{e}]", t.type, tuple(inner), data[e * size : (e + 1) * size]) for e in range(n_mat))


class Model:
    def __init__(self, f: GGUFFile, backend: Backend | str | None = None, *, check_tensors: bool = False) -> None:
        self.file = f
        self.backend = backend if backend is not None and not isinstance(backend, str) else get_backend(backend)
        # refuses an unrunnable tensor type, and tensors that disagree with the metadata, before any work
        self.cfg, tensors, binder = bind_weights(f, self.backend.runnable_types, strict=True)
        self.arch = get_architecture(f.architecture, f.name)
        self.tensors: ModelWeights = tensors
        check_vocab(f)  # the special ids and token arrays, before the tokenizer is built on first use
        if check_tensors:
            check_tensor_data(f)
        self.unread = binder.unread()
        self.weights = _to_backend(self.tensors, self.backend)
        self._tokenizer = None

    @property
    def tokenizer(self):  # llamay.tokenizer.Tokenizer
        if self._tokenizer is None:
            from ..tokenizer import load_tokenizer

            self._tokenizer = load_tokenizer(self.file)
        return self._tokenizer

    @property
    def fingerprint(self) -> bytes:
        """SHA-256 over the architecture and every tensor's name, type, shape and first and last bytes: what a
        saved KV snapshot must match before it is loaded into this model."""
        h = hashlib.sha256(self.cfg.arch.encode())
        for t in sorted(self.file.tensors.values(), key=lambda t: t.index):
            data = self.file.tensor_data(t)
            h.update(f"{t.name}:{t.type.value}:{t.shape}".encode())
            h.update(data[:FINGERPRINT_EDGE])
            h.update(data[-FINGERPRINT_EDGE:])
        return h.digest()

    @property
    def name(self) -> str:
        name = self.file.get("general.name")  # a STRING (check_vocab)
        return name or os.path.basename(self.file.name)

    def new_state(
        self,
        n_ctx: int | None = None,
        n_batch: int = 512,
        n_seq: int = 1,
        n_outputs: int = 1,
        page_size: int = DEFAULT_PAGE_SIZE,
        n_pages: int | None = None,
        prefix_cache: bool = False,
    ) -> State:
        n_ctx = n_ctx or min(self.cfg.n_ctx_train, DEFAULT_N_CTX)
        if not self.cfg.causal:  # an encoder sees its whole input at once
            n_batch = max(n_batch, n_ctx)
        return State(
            self.cfg, self.backend, n_ctx=n_ctx, n_batch=min(n_batch, n_ctx * n_seq),
            n_seq=n_seq, n_outputs=n_outputs, page_size=page_size, n_pages=n_pages, prefix_cache=prefix_cache,
            scratch=self.arch.scratch,
        )  # fmt: skip

    def warm_up(self, n_tokens: int = 8) -> None:
        """Run one decode step and one small batch on a throwaway state, so every kernel the model needs is
        compiled or loaded before the first real request (numba loads its cached machine code lazily)."""
        from .forward import forward

        bos = self.tokenizer.bos_id
        tok = bos if bos is not None else 0
        st = self.new_state(n_ctx=n_tokens + 2, n_batch=n_tokens, page_size=n_tokens + 2)
        forward(self, st, [tok])
        forward(self, st, [tok] * n_tokens, outputs=() if not self.cfg.causal else None)

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_model(
    path: str | os.PathLike[str], backend: Backend | str | None = None, *, check_tensors: bool = False
) -> Model:
    """Open a GGUF file and bind its weights; refuses unknown architectures and tensor types by name, metadata
    out of range and tensors that disagree with it; `check_tensors` also reads every value (NaN, infinities)."""
    f = open_gguf(path)
    try:
        return Model(f, backend, check_tensors=check_tensors)
    except BaseException:
        f.close()
        raise
