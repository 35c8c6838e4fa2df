"""KV snapshot files: a round trip continues exactly (one and two KV groups); everything read back is covered by
the checksum; every field of a correctly checksummed but forged file is checked, by name, before anything is
allocated; a load that cannot get its pages gives them all back; writes are atomic."""

from __future__ import annotations

import hashlib
import os
import struct

import pytest

from llamay.generate import prefill
from llamay.kv import snapshot_file as sf
from llamay.kv.pages import OutOfPages
from llamay.model import forward, load_model
from tests import paths

PROMPT = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337]
N_CTX = 64
LABEL = "tale-1"


@pytest.fixture(scope="module")
def model():
    with load_model(paths.stories("q8_0"), "portable") as m:
        yield m


def greedy(m, st, seq: int, n: int) -> list[int]:
    out = []
    for _ in range(n):
        out.append(m.backend.argmax(st.logits, 0, m.cfg.n_vocab))
        forward(m, st, out[-1:], (seq,))
    return out


@pytest.fixture(scope="module")
def saved(model, tmp_path_factory):
    """A file of 13 computed positions standing for a context of 14 tokens, and what the state generates next."""
    st = model.new_state(n_ctx=N_CTX, page_size=4)
    prefill(model, st, PROMPT[:13])
    path = tmp_path_factory.mktemp("snap") / "kv.llkv"
    sf.save(st, st.kv.snapshot(0), path, model.fingerprint, context=PROMPT[:14], label=LABEL)
    return path.read_bytes(), greedy(model, st, 0, 8)


def fresh(model):
    return model.new_state(n_ctx=N_CTX, page_size=4)


def reseal(body: bytes) -> bytes:
    """A forged file with a valid checksum (what a careless tool or an attacker writes)."""
    return body + hashlib.sha256(body).digest()


def forge(data: bytes, offset: int, fmt: str, value) -> bytes:
    body = bytearray(data[: -sf.DIGEST_BYTES])
    struct.pack_into(fmt, body, offset, value)
    return reseal(bytes(body))


def refused(model, tmp_path, data: bytes, match: str) -> None:
    """Loading `data` fails with a SnapshotFileError matching `match`, and nothing stays allocated."""
    path = tmp_path / "forged.llkv"
    path.write_bytes(data)
    st = fresh(model)
    with pytest.raises(sf.SnapshotFileError, match=match):
        sf.load(st, path, model.fingerprint)
    assert st.kv.audit() == [] and not any(s.active for s in st.kv.sequences)
    assert all(g.pages.n_free == g.pages.n_pages for g in st.kv.groups)


# offsets in the file of the fixture: counts after the prefix, then the label, tokens, context, the group
N_TOKENS, N_CONTEXT, N_GROUPS, LABEL_BYTES = (sf.PREFIX.size + 4 * i for i in range(4))
LABEL_AT = sf.HEADER_BYTES
TOKENS_AT = LABEL_AT + len(LABEL)
CONTEXT_AT = TOKENS_AT + 4 * 13
GROUP_AT = CONTEXT_AT + 4 * 14


def test_round_trip_continues_exactly(model, saved, tmp_path):
    data, want = saved
    path = tmp_path / "kv.llkv"
    path.write_bytes(data)
    got = sf.read(path, sf.Layout.of(fresh(model)), model.fingerprint)
    assert (got.label, got.tokens, got.context) == (LABEL, PROMPT[:13], PROMPT[:14])
    other = fresh(model)  # as in another process
    seq = sf.load(other, path, model.fingerprint, seq=0)
    assert other.kv.sequences[seq].tokens == PROMPT[:13]
    other.kv.truncate(seq, 12)
    forward(model, other, PROMPT[12:13], [seq])
    assert greedy(model, other, seq, 8) == want
    head = sf.peek(path)
    assert (head.version, head.n_tokens, head.n_context, head.label) == (sf.FORMAT_VERSION, 13, 14, LABEL)


@pytest.mark.parametrize("n", [1, 4, 13])
def test_size_is_known_before_encoding(model, n):
    st = fresh(model)
    prefill(model, st, PROMPT[:n])
    snap = st.kv.snapshot(0)
    for context, label in ((PROMPT[:n], ""), (PROMPT[: n + 1], LABEL)):
        data = sf.encode(st, snap, model.fingerprint, context=context, label=label)
        assert sf.size(st, snap, len(context), label) == len(data)
    st.kv.drop(snap)


def test_another_model_another_version_and_not_a_snapshot_are_refused(model, saved, tmp_path):
    data, _ = saved
    path = tmp_path / "kv.llkv"
    path.write_bytes(data)
    with load_model(paths.stories("f32"), "portable") as m2, pytest.raises(sf.SnapshotFileError, match="different"):
        sf.load(m2.new_state(n_ctx=N_CTX, page_size=4), path, m2.fingerprint)
    future = bytearray(data)
    future[8] = 99
    refused(model, tmp_path, bytes(future), "format version 99; this llamay reads 2")
    v1 = sf.PREFIX.pack(sf.MAGIC, 1, model.fingerprint) + struct.pack("<II", 13, 1) + bytes(200)
    refused(model, tmp_path, v1, "format version 1")
    refused(model, tmp_path, b"GGUF" + bytes(100), "not a llamay KV snapshot")


@pytest.mark.parametrize("where", ["counts", "label", "tokens", "context", "group", "kv", "digest"])
def test_damage_anywhere_past_the_fingerprint_fails_the_checksum(model, saved, tmp_path, where):
    data, _ = saved
    offset = {"counts": N_CONTEXT, "label": LABEL_AT + 2, "tokens": TOKENS_AT + 4 * 5, "context": CONTEXT_AT + 4 * 13,
              "group": GROUP_AT + 12, "kv": len(data) - 100, "digest": len(data) - 1}[where]  # fmt: skip
    damaged = bytearray(data)
    damaged[offset] ^= 0x01
    refused(model, tmp_path, bytes(damaged), "checksum mismatch")


def test_empty_and_truncated_files_are_refused(model, saved, tmp_path):
    data, _ = saved
    refused(model, tmp_path, b"", "empty file")
    for n in (1, 7, 8, 40, sf.PREFIX.size, sf.HEADER_BYTES, GROUP_AT, len(data) // 2, len(data) - 33, len(data) - 1):
        refused(model, tmp_path, data[:n], "truncated|checksum mismatch")


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "match"),
    [
        (TOKENS_AT + 4 * 3, "<i", 512, r"tokens\[3\] is 512, outside the vocabulary of 512"),
        (TOKENS_AT, "<i", -7, r"tokens\[0\] is -7, outside the vocabulary"),
        (CONTEXT_AT + 4 * 13, "<i", 1 << 30, r"context\[13\] is 1073741824, outside the vocabulary"),
        (N_TOKENS, "<I", N_CTX + 1, "n_tokens is 65; the context holds 64"),
        (N_CONTEXT, "<I", 1 << 31, "n_context is 2147483648; the context holds 64"),
        (N_GROUPS, "<I", 2, "n_groups is 2; this model has 1 KV groups"),
        (LABEL_BYTES, "<I", 1 << 20, "label_bytes is 1048576; at most 255"),
        (LABEL_AT, "<B", 0xFF, "label is not UTF-8"),
        (GROUP_AT, "<I", 7, "group kv has n_layers=7"),
        (GROUP_AT + 12, "<I", 4, "group kv: first is 4; it keeps every position"),
        (N_TOKENS, "<I", 12, "group kv has n_layers=395"),  # every later field shifts
        (N_CONTEXT, "<I", 40, r"context\[18\] is -?\d+, outside the vocabulary"),
    ],
)
def test_forged_fields_are_refused_by_name(model, saved, tmp_path, offset, fmt, value, match):
    data, _ = saved
    refused(model, tmp_path, forge(data, offset, fmt, value), match)


def test_bytes_after_the_kv_and_fields_past_the_end_are_refused(model, saved, tmp_path):
    data, _ = saved
    refused(model, tmp_path, reseal(data[: -sf.DIGEST_BYTES] + bytes(8)), "8 unexpected bytes after the KV data")
    head = sf.PREFIX.pack(sf.MAGIC, sf.FORMAT_VERSION, model.fingerprint) + sf.COUNTS.pack(0, 0, 1, 0)
    refused(model, tmp_path, reseal(head + bytes(8)), "group kv runs past the end of the data")
    refused(model, tmp_path, reseal(sf.PREFIX.pack(sf.MAGIC, sf.FORMAT_VERSION, model.fingerprint)
                                    + sf.COUNTS.pack(3, 0, 1, 0) + bytes(4)), "tokens runs past the end")  # fmt: skip


def test_a_file_larger_than_any_snapshot_is_refused_before_it_is_read(model, tmp_path):
    path = tmp_path / "huge.llkv"
    layout = sf.Layout.of(fresh(model))
    with open(path, "wb") as f:
        f.truncate(layout.max_bytes + 1)  # sparse: nothing is written, and nothing should be read
    with pytest.raises(sf.SnapshotFileError, match="more than any snapshot of this model and context"):
        sf.read(path, layout, model.fingerprint)


def test_a_load_into_a_full_pool_gives_every_page_back(model, saved, tmp_path):
    data, _ = saved
    path = tmp_path / "kv.llkv"
    path.write_bytes(data)
    st = model.new_state(n_ctx=N_CTX, n_seq=2, page_size=4, n_pages=5)
    prefill(model, st, PROMPT[:9])  # 3 of the 5 pages; the snapshot needs 4
    with pytest.raises(OutOfPages):
        sf.load(st, path, model.fingerprint)
    assert st.kv.audit() == [] and not st.kv.sequences[1].active
    assert st.kv.groups[0].pages.n_free == 2


def test_writes_are_atomic(tmp_path, monkeypatch):
    path = tmp_path / "kv.llkv"
    sf.write(path, b"old")

    def no_disk(_fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_disk)
    with pytest.raises(OSError, match="No space left"):
        sf.write(path, b"new contents")
    assert path.read_bytes() == b"old"  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kv.llkv"]  # no .partial left behind


def test_a_sliding_window_round_trip(tmp_path):
    """Two KV groups, the window one with its early pages freed: `first` > 0 is saved, checked and honoured."""
    from tests.models.tiny import write_tiny

    write_tiny("gemma3", tmp_path / "g.gguf")
    with load_model(tmp_path / "g.gguf", "portable") as m:
        prompt = [1, *range(300, 330)]
        st = m.new_state(n_ctx=64, page_size=4, n_batch=8)
        prefill(m, st, prompt)
        path = tmp_path / "g.llkv"
        sf.save(st, st.kv.snapshot(0), path, m.fingerprint)
        assert sf.size(st, st.kv.snapshot(0), len(prompt)) == path.stat().st_size  # freed pages are not counted
        forward(m, st, [310], [0])  # the next position reads only the window: the freed pages are not needed
        want = greedy(m, st, 0, 6)
        got = sf.read(path, sf.Layout.of(st), m.fingerprint)
        assert got.groups[1][0] > 0  # the window group's first saved position
        other = m.new_state(n_ctx=64, page_size=4, n_batch=8)
        seq = sf.load(other, path, m.fingerprint, seq=0)
        forward(m, other, [310], [seq])
        assert greedy(m, other, seq, 6) == want
        data = path.read_bytes()
        n = len(prompt)
        window_group = (
            sf.HEADER_BYTES
            + 8 * n
            + sf.GROUP.size
            + 4 * n * (m.cfg.n_embd_k_gqa + m.cfg.n_embd_v_gqa) * (len(st.kv.groups[0].layers))
        )
        forged = forge(data, window_group + 12, "<I", n - 2)
        path.write_bytes(forged)
        with pytest.raises(sf.SnapshotFileError, match="group kv-swa: first is 29; the next position reads the last 8"):
            sf.read(path, sf.Layout.of(st), m.fingerprint)
