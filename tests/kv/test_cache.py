"""The KV cache stands on its own (`core/kv/cache.py`): built from a config and the batch's position and sequence
buffers, without a State, its sequence and page operations keep the accounting exact; State holds activations
and reaches the cache as `State.kv` only."""

from __future__ import annotations

from llamay.arch import load_config
from llamay.gguf import GGUFFile
from llamay.kernels import get_backend
from llamay.kv.cache import KVCache
from llamay.model import State
from tests.models.tiny import build_tiny

OPERATIONS = ("acquire", "release", "claimed", "borrowed", "truncate", "reset", "reuse_prefix", "cache_prefix",
              "checkpoint", "roll_back", "fork", "snapshot", "restore", "drop", "audit", "page_use")  # fmt: skip


def _cache(arch: str = "gemma3", **kw) -> KVCache:
    with GGUFFile.from_buffer(build_tiny(arch).to_bytes(), f"{arch}.gguf") as f:
        cfg = load_config(f)[1]
    be = get_backend("portable")
    return KVCache(cfg, be, be.alloc_i32(4), be.alloc_i32(4), n_ctx=32, n_batch=4, n_seq=3, page_size=4, **kw)


def test_the_operations_live_in_the_cache_not_the_state():
    for op in OPERATIONS:
        assert callable(getattr(KVCache, op)) and not hasattr(State, op), op


def test_a_cache_without_a_state_keeps_exact_accounting():
    kv = _cache(prefix_cache=True)
    assert [g.name for g in kv.groups] == ["kv", "kv-swa"]  # gemma3: window layers apart from the global one
    a = kv.acquire()
    for g, table in zip(kv.groups, kv.sequences[a].tables, strict=True):  # what a forward pass would place
        g.prepare_write(table, 0, 9)
    kv.sequences[a].tokens.extend(range(9))
    b = kv.fork(a)
    snap = kv.snapshot(b)
    assert kv.audit() == []
    kv.release(a)
    kv.release(b, cache=False)
    assert kv.audit() == [] and kv.page_use()["snapshots"] > 0
    c = kv.restore(snap)
    kv.drop(snap)
    kv.release(c)
    assert kv.audit() == []
    assert kv.page_use()["sequences"] == kv.page_use()["snapshots"] == 0
