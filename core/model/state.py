"""Everything a model needs to run that changes while it runs: activation buffers, the paged KV cache and the
int32 buffers describing a batch. Allocated once, sized by n_batch (tokens per forward) and the KV pool."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..arch.config import ModelConfig
from ..kernels import Backend, BatchView
from ..kv import KVPages

DEFAULT_PAGE_SIZE = 16


@dataclass
class Sequence:
    """One sequence's place in the KV cache: its page table and how many positions are computed."""

    index: int  # row in page_off / seq_len
    table: list[int] = field(default_factory=list)
    n_past: int = 0
    tokens: list[int] = field(default_factory=list)  # the tokens whose keys/values are in the cache


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
    ) -> None:
        be = self.backend = backend
        self.cfg = cfg
        self.n_ctx = n_ctx
        self.n_batch = n_batch
        self.n_seq = n_seq
        pages_per_seq = -(-n_ctx // page_size)
        self.pages = KVPages(n_pages if n_pages is not None else pages_per_seq * n_seq, page_size)
        self.n_slots = self.pages.n_slots
        kdim, vdim = cfg.n_embd_k_gqa, cfg.n_embd_v_gqa
        self.k_cache = be.alloc_f32(cfg.n_layer * self.n_slots * kdim)  # (n_layer, n_slots, n_head_kv·head_dim)
        self.v_cache = be.alloc_f32(cfg.n_layer * self.n_slots * vdim)  # (n_layer, n_slots, n_head_kv·head_dim_v)

        n, e = n_batch, cfg.n_embd
        self.x = be.alloc_f32(n * e)  # (n_batch, n_embd): the residual stream
        self.xb = be.alloc_f32(n * e)  # (n_batch, n_embd): normed input of a sub-block
        self.xb2 = be.alloc_f32(n * e)  # (n_batch, n_embd): output of a sub-block
        self.q = be.alloc_f32(n * cfg.n_head * cfg.head_dim)  # (n_batch, n_head·head_dim)
        self.k = be.alloc_f32(n * kdim)  # (n_batch, n_head_kv·head_dim)
        self.v = be.alloc_f32(n * vdim)  # (n_batch, n_head_kv·head_dim_v)
        self.att = be.alloc_f32(n * cfg.n_head * cfg.head_dim_v)  # (n_batch, n_head·head_dim_v)
        self.ff_a = be.alloc_f32(n * cfg.n_ff)  # (n_batch, n_ff): gate (or up) projection
        self.ff_b = be.alloc_f32(n * cfg.n_ff)  # (n_batch, n_ff): up projection
        self.tmp_e = be.alloc_f32(n * e)  # (n_batch, n_embd): position/type embeddings (BERT)

        self.ids = be.alloc_i32(n)  # (n_batch,) token ids
        self.zero_ids = be.alloc_i32(n)  # (n_batch,) zeros: token type 0 for every token (BERT)
        self.pos = be.alloc_i32(n)  # (n_batch,) positions
        self.seq = be.alloc_i32(n)  # (n_batch,) sequence index of each token
        self.slots = be.alloc_i32(n)  # (n_batch,) KV slot each token writes
        self.page_list = be.alloc_i32(self.pages.n_pages)  # page tables of the batch's sequences, concatenated
        self.page_off = be.alloc_i32(n_seq)  # (n_seq,) where each sequence's table starts in page_list
        self.seq_len = be.alloc_i32(n_seq)  # (n_seq,) positions a non-causal sequence attends to
        self.batch = BatchView(
            0, self.pos, self.seq, self.slots, self.page_list, self.page_off, self.seq_len, page_size
        )

        self.n_outputs = 0
        self.out_x = None  # (n_outputs, n_embd): rows the LM head reads
        self.logits = None  # (n_outputs, n_vocab)
        self.pooled = be.alloc_f32(e)  # (n_embd,): pooled embedding (encoders)
        self.reserve_outputs(n_outputs)
        self.sequences = [Sequence(i) for i in range(n_seq)]

    def reserve_outputs(self, n: int) -> None:
        """Room for logits of n rows per forward (grown only between forwards, never inside the loop)."""
        if n > self.n_outputs:
            self.n_outputs = n
            self.out_x = self.backend.alloc_f32(n * self.cfg.n_embd)
            self.logits = self.backend.alloc_f32(n * self.cfg.n_vocab)

    def truncate(self, seq: int, n: int) -> None:
        """Keep the first n cached positions of a sequence; pages past them go back to the pool."""
        s = self.sequences[seq]
        n = min(n, s.n_past)
        keep_pages = -(-n // self.pages.page_size)
        for page in s.table[keep_pages:]:
            self.pages.release(page)
        del s.table[keep_pages:]
        del s.tokens[n:]
        s.n_past = n

    def reset(self, seq: int = 0) -> None:
        """Forget a sequence's cached positions and give its pages back."""
        self.truncate(seq, 0)

    def reuse_prefix(self, seq: int, tokens: list[int]) -> int:
        """Keep the longest cached prefix of `tokens` (at least one token is left to compute, so the caller
        gets fresh logits); returns how many positions were kept."""
        cached = self.sequences[seq].tokens
        n = 0
        limit = min(len(cached), len(tokens) - 1)
        while n < limit and cached[n] == tokens[n]:
            n += 1
        self.truncate(seq, n)
        return n
