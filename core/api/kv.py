"""The one place the library touches the KV-sequence operations (acquire, release, fork, snapshot, restore,
drop, checkpoint, roll back) of a State's cache (`State.kv`, `llamay.kv.cache.KVCache`)."""

from __future__ import annotations

from typing import Any

from ..model import State


def acquire(st: State) -> int:
    return st.kv.acquire()


def release(st: State, seq: int) -> None:
    """Give the sequence back, emptied (a library context has no prefix cache to feed)."""
    st.kv.release(seq, cache=False)


def fork(st: State, seq: int) -> int:
    return st.kv.fork(seq)


def snapshot(st: State, seq: int) -> Any:
    return st.kv.snapshot(seq)


def restore(st: State, snap: Any, seq: int) -> None:
    st.kv.restore(snap, seq)


def drop(st: State, snap: Any) -> None:
    st.kv.drop(snap)


def checkpoint(st: State, seq: int) -> Any:
    return st.kv.checkpoint((seq,))


def roll_back(st: State, point: Any) -> list[int]:
    return st.kv.roll_back(point)


def tokens(st: State, seq: int) -> list[int]:
    return st.kv.sequences[seq].tokens


def free_sequences(st: State) -> int:
    return sum(not s.active for s in st.kv.sequences)
