"""The one place the library touches a State's KV-sequence operations (acquire, release, fork, snapshot,
restore, drop, checkpoint, roll back): when those operations move (to `llamay.kv`), only this module follows."""

from __future__ import annotations

from typing import Any

from ..model import State


def acquire(st: State) -> int:
    return st.acquire()


def release(st: State, seq: int) -> None:
    """Give the sequence back, emptied (a library context has no prefix cache to feed)."""
    st.release(seq, cache=False)


def fork(st: State, seq: int) -> int:
    return st.fork(seq)


def snapshot(st: State, seq: int) -> Any:
    return st.snapshot(seq)


def restore(st: State, snap: Any, seq: int) -> None:
    st.restore(snap, seq)


def drop(st: State, snap: Any) -> None:
    st.drop(snap)


def checkpoint(st: State, seq: int) -> Any:
    return st.checkpoint((seq,))


def roll_back(st: State, point: Any) -> list[int]:
    return st.roll_back(point)


def tokens(st: State, seq: int) -> list[int]:
    return st.sequences[seq].tokens


def free_sequences(st: State) -> int:
    return sum(not s.active for s in st.sequences)
