"""Blobs and garbage collection of llamay's store (llamay.native.store.blobs, manifests).

A writer SIGKILLed at each point of writing a blob or a manifest (the store's own test hook) leaves no blob
under a name that is not its digest and no manifest naming a missing blob; its temporary files go with the
next run. Garbage collection keeps every blob a manifest names, removes the rest, and waits for writers.
`llamay list` flags a truncated blob, `--verify` a damaged one.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from llamay.native.cli import main
from llamay.native.store import ModelNotFound, llamay_store
from llamay.native.store.blobs import KILL_AT, BlobError, BlobWriter, remove_stale
from llamay.native.store.manifests import MODEL as MODEL_MEDIA
from tests import paths

pytestmark = pytest.mark.native_only

MODEL = paths.stories("f32")
MODEL_HEX = hashlib.sha256(MODEL.read_bytes()).hexdigest()
POINTS = ("blob-opened", "blob-writing", "blob-written", "blob-synced", "blob-installed", "manifest-written")


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict[str, str]:
    values = {"LLAMAY_MODELS": str(tmp_path / "store"), "OLLAMA_MODELS": str(tmp_path / "ollama"),
              "LLAMAY_MODELS_DIR": str(tmp_path / "legacy")}  # fmt: skip
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return {**os.environ, **values}


def blobs_are_their_digests(root: Path) -> list[str]:
    """Blobs whose bytes are not the digest they are named by (none may be)."""
    bad = []
    for p in (root / "blobs").glob("sha256-*"):
        if hashlib.sha256(p.read_bytes()).hexdigest() != p.name.removeprefix("sha256-"):
            bad.append(p.name)
    return bad


def temps(root: Path) -> list[Path]:
    return [p for p in root.rglob(".partial-*")]


def run_import(env: dict, name: str, kill_at: str | None = None) -> subprocess.CompletedProcess:
    code = f"import sys; from llamay.native.cli import main; sys.exit(main(['import', {str(MODEL)!r}, {name!r}]))"
    extra = {KILL_AT: kill_at} if kill_at else {}
    return subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


@pytest.mark.parametrize("point", POINTS)
def test_a_writer_killed_anywhere_installs_nothing_half_written(env, point):
    root = Path(env["LLAMAY_MODELS"])
    r = run_import(env, "m", kill_at=point)
    assert r.returncode == -signal.SIGKILL, r.stderr
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / "m" / "latest"
    assert not manifest.exists()  # the manifest is the last thing written, whole or not at all
    assert blobs_are_their_digests(root) == []
    model_blob = root / "blobs" / f"sha256-{MODEL_HEX}"
    assert model_blob.exists() == (point in ("blob-installed", "manifest-written"))
    if point != "blob-installed":
        assert temps(root), "the kill left no temporary file: it did not happen mid-write"
    r = run_import(env, "m")  # the next run
    assert r.returncode == 0, r.stderr
    assert temps(root) == []
    assert manifest.exists() and model_blob.read_bytes() == MODEL.read_bytes()
    assert blobs_are_their_digests(root) == []


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_writer_stopped_by_a_signal_removes_its_temporary_file(env, sig):
    root = Path(env["LLAMAY_MODELS"])
    r = run_import(env, "m", kill_at=f"blob-writing:{sig}")
    assert r.returncode in (128 + getattr(signal, sig), 130), r.stderr
    assert "Traceback" not in r.stderr
    assert temps(root) == [] and not (root / "blobs" / f"sha256-{MODEL_HEX}").exists()


def test_a_temp_file_held_by_a_writer_is_not_stale(env, tmp_path):
    blobs = Path(env["LLAMAY_MODELS"]) / "blobs"
    with BlobWriter(blobs) as w:
        w.write(b"in progress")
        assert remove_stale(blobs) == []
        assert w.temp.exists()
    assert temps(blobs) == []  # left without finish(): removed by the writer itself


def test_a_blob_of_other_bytes_than_expected_is_never_installed(env):
    blobs = Path(env["LLAMAY_MODELS"]) / "blobs"
    with pytest.raises(BlobError, match="not the expected"), BlobWriter(blobs, expect="0" * 64) as w:
        w.write(b"something else")
        w.finish()
    assert list(blobs.iterdir()) == []


def write_modelfile(tmp_path: Path, system: str) -> Path:
    p = tmp_path / f"Modelfile-{abs(hash(system))}"
    p.write_text(f"FROM {MODEL}\nSYSTEM {system}\n")
    return p


def system_blob(root: Path, text: str) -> Path:
    return root / "blobs" / f"sha256-{hashlib.sha256(text.encode()).hexdigest()}"


def test_gc_keeps_referenced_blobs_and_removes_the_rest(env, tmp_path, capsys):
    root = Path(env["LLAMAY_MODELS"])
    assert main(["create", "a", "-f", str(write_modelfile(tmp_path, "You are A."))]) == 0
    assert main(["create", "b", "-f", str(write_modelfile(tmp_path, "You are B."))]) == 0
    orphan = root / "blobs" / f"sha256-{hashlib.sha256(b'orphan').hexdigest()}"
    orphan.write_bytes(b"orphan")  # what a writer killed after installing a blob leaves
    assert main(["prune"]) == 0
    assert not orphan.exists()
    shared = root / "blobs" / f"sha256-{MODEL_HEX}"
    assert shared.exists() and system_blob(root, "You are A.").exists() and system_blob(root, "You are B.").exists()
    assert main(["rm", "a"]) == 0
    assert shared.exists(), "b still names the model blob"
    assert not system_blob(root, "You are A.").exists() and system_blob(root, "You are B.").exists()
    assert main(["rm", "b"]) == 0
    assert list((root / "blobs").iterdir()) == []
    assert not (root / "manifests" / "registry.ollama.ai").exists()  # empty folders go too


def test_gc_waits_for_writers(env, tmp_path, capsys):
    root = Path(env["LLAMAY_MODELS"])
    assert main(["import", str(MODEL), "a"]) == 0
    orphan = root / "blobs" / f"sha256-{hashlib.sha256(b'orphan').hexdigest()}"
    orphan.write_bytes(b"orphan")
    with llamay_store().lock():  # a writer between its first blob and its manifest
        assert main(["prune"]) == 0
        assert orphan.exists()
        assert "another llamay is writing to the store or loading" in capsys.readouterr().err
    assert main(["prune"]) == 0 and not orphan.exists()


def test_a_model_being_loaded_keeps_its_blob_through_rm(env):
    """`rm` while another process opens the model (held: what run, chat and serve do while loading) frees the
    name at once and the blob only once the load is done."""
    from llamay.native.store import resolve

    root = Path(env["LLAMAY_MODELS"])
    assert main(["import", str(MODEL), "a"]) == 0
    blob = root / "blobs" / f"sha256-{MODEL_HEX}"
    r = resolve("a", pull=False)
    with r.held() as path:
        assert path == blob
        assert main(["rm", "a"]) == 0
        assert blob.read_bytes() == MODEL.read_bytes()
    assert main(["prune"]) == 0 and not blob.exists()
    with pytest.raises(ModelNotFound, match="removed meanwhile"), r.held():
        pass


def test_list_flags_damaged_blobs(env, capsys):
    root = Path(env["LLAMAY_MODELS"])
    assert main(["import", str(MODEL), "a"]) == 0
    assert main(["list"]) == 0
    blob = root / "blobs" / f"sha256-{MODEL_HEX}"
    data = bytearray(blob.read_bytes())
    data[-1] ^= 1
    blob.write_bytes(bytes(data))
    assert main(["list"]) == 0  # the size is right: only the digest tells
    assert main(["list", "--verify"]) == 1
    assert f"sha256-{MODEL_HEX} ({MODEL_MEDIA}): SHA-256" in capsys.readouterr().out
    os.truncate(blob, 100)
    assert main(["list"]) == 1
    assert f"100 bytes where there should be {MODEL.stat().st_size:,}" in capsys.readouterr().out


def test_a_clean_up_while_a_file_is_linked_in_leaves_the_link(tmp_path, monkeypatch):
    """`llamay import` links the user's file in under a temporary name first; a clean-up running meanwhile
    (create, copy and pull start with one) must not take that name for a dead writer's leftover."""
    from llamay.native.store import blobs as b

    src = tmp_path / "model.gguf"
    src.write_bytes(MODEL.read_bytes())
    store = tmp_path / "blobs"
    removed: list = []
    real = os.link

    def link_then_clean(a, b_, *args, **kw):  # a clean-up in the moment after the link is made
        real(a, b_, *args, **kw)
        removed.extend(remove_stale(store))

    monkeypatch.setattr(os, "link", link_then_clean)
    assert b.link_in(store, src, MODEL_HEX)
    assert removed == [] and (store / f"sha256-{MODEL_HEX}").read_bytes() == src.read_bytes()
    assert not list(b.iter_temps(store))


def test_manifests_are_readable_by_others_as_blobs_are(env, tmp_path):
    from llamay.native.store.blobs import write_atomic, write_bytes

    write_atomic(tmp_path / "manifest", b"{}")
    digest = write_bytes(tmp_path / "blobs", b"bytes")
    assert (tmp_path / "manifest").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "blobs" / f"sha256-{digest}").stat().st_mode & 0o777 == 0o644
