"""Everything a model needs to run that changes while it runs: the batch and activation buffers, the
architecture's scratch buffers (`State.scratch`), and the paged KV cache with its sequences (`State.kv`, a
`llamay.kv.cache.KVCache`: every sequence and page operation lives there). Allocated once, sized by n_batch
(tokens per forward), n_seq (sequences at once) and the page pools; nothing here allocates inside the token loop.
"""

from __future__ import annotations

from typing import Any

from ..arch import ALIASES, ARCHITECTURES
from ..arch.config import ModelConfig
from ..arch.scratch import BUFFERS, Scratch
from ..kernels import Backend
from ..kv.cache import DEFAULT_PAGE_SIZE, KVCache

__all__ = ["DEFAULT_PAGE_SIZE", "State"]


class State:
    def __init__(
        self,
        cfg: ModelConfig,
        backend: Backend,
        *,
        n_ctx: int,
        n_batch: int = 512,
        n_seq: int = 1,
        n_outputs: int = 1,
        page_size: int = DEFAULT_PAGE_SIZE,
        n_pages: int | None = None,
        prefix_cache: bool = False,
        scratch: BUFFERS | None = None,
    ) -> None:
        be = self.backend = backend
        self.cfg = cfg
        self.n_ctx = n_ctx
        self.n_batch = n_batch
        self.n_seq = n_seq
        self.page_size = page_size
        n, e = n_batch, cfg.n_embd
        self.ids = be.alloc_i32(n)  # (n_batch,) token ids
        self.pos = be.alloc_i32(n)  # (n_batch,) positions
        self.seq = be.alloc_i32(n)  # (n_batch,) sequence index of each token

        self.kv = KVCache(
            cfg, be, self.pos, self.seq, n_ctx=n_ctx, n_batch=n, n_seq=n_seq, page_size=page_size, n_pages=n_pages,
            prefix_cache=prefix_cache,
        )  # fmt: skip

        self.x = be.alloc_f32(n * e)  # (n_batch, n_embd): the residual stream
        self.xb = be.alloc_f32(n * e)  # (n_batch, n_embd): normed input of a sub-block
        self.xb2 = be.alloc_f32(n * e)  # (n_batch, n_embd): output of a sub-block
        self.q = be.alloc_f32(n * cfg.n_head * cfg.head_dim)  # (n_batch, n_head·head_dim)
        self.k = be.alloc_f32(n * cfg.n_embd_k_gqa)  # (n_batch, n_head_kv·head_dim)
        self.v = be.alloc_f32(n * cfg.n_embd_v_gqa)  # (n_batch, n_head_kv·head_dim_v)
        self.att = be.alloc_f32(n * cfg.n_head * cfg.head_dim_v)  # (n_batch, n_head·head_dim_v)
        self.ff_a = be.alloc_f32(n * cfg.n_ff)  # (n_batch, n_ff): gate (or up) projection
        self.ff_b = be.alloc_f32(n * cfg.n_ff)  # (n_batch, n_ff): up projection
        if scratch is None:  # the architecture's own buffers (see arch/scratch.py)
            arch = ARCHITECTURES.get(ALIASES.get(cfg.arch, cfg.arch))
            scratch = arch.scratch if arch is not None else ()
        self.scratch = Scratch(be, scratch, cfg, n)

        self.n_outputs = 0
        self.out_x = None  # (n_outputs, n_embd): rows the LM head reads
        self.logits = None  # (n_outputs, n_vocab)
        self.reserve_outputs(n_outputs)

    def __getattr__(self, name: str) -> Any:
        # only reached for a name State lacks: the architecture's scratch buffers (st.pooled for BERT)
        scratch = self.__dict__.get("scratch")
        if scratch is None or name.startswith("__"):
            raise AttributeError(name)
        try:
            return getattr(scratch, name)
        except AttributeError:
            raise AttributeError(f"State has no buffer {name!r} (scratch: {', '.join(scratch.names)})") from None

    # -- buffers --------------------------------------------------------------------------------------------

    def reserve_outputs(self, n: int) -> None:
        """Room for logits of n rows per forward (grown only between forwards, never inside the loop)."""
        if n > self.n_outputs:
            self.n_outputs = n
            self.out_x = self.backend.alloc_f32(n * self.cfg.n_embd)
            self.logits = self.backend.alloc_f32(n * self.cfg.n_vocab)
