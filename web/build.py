"""Build what the browser runtime loads from disk, into web/dist/ (git-ignored; no CDN is ever asked):

    dist/wheels/     the llamay wheel (pure, built from this checkout) and the pinned pure-Python wheels of
                     web/requirements-pyodide.txt (jinja2, markupsafe: engine; pytest, hypothesis, ...: tests)
    dist/wasm/       the kernel modules (wasm/llamay_kernels*.wasm) when they have been built
    dist/pyodide/    the Pyodide runtime files of the pinned npm package (web/node_modules/pyodide, `npm ci`)
    dist/manifest.json  which wheel belongs to which group, the wasm modules, the Pyodide version

markupsafe has no pure wheel on PyPI: it is built from its sdist with the C compiler set to `false`, so its
optional speedups fail to build and setuptools makes a `py3-none-any` wheel (markupsafe then uses its own
pure-Python `_native` module, as it does on PyPy).

    python web/build.py            # build or refresh dist/ (downloads only wheels not already there)
    python web/build.py --clean    # start from an empty dist/
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WEB = Path(__file__).resolve().parent
REPO = WEB.parent
DIST = WEB / "dist"
REQUIREMENTS = WEB / "requirements-pyodide.txt"
PYODIDE_NPM = WEB / "node_modules" / "pyodide"
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
PYTHON_VERSION = "3.14"  # the Python inside Pyodide 314
# what the llamay wheel is built from (pyproject's package-dir): copied to a temporary folder first, so the
# build never writes build/ or *.egg-info into the checkout that other people work in
WHEEL_SOURCES = ("pyproject.toml", "README.md", "core", "native", "wasm")
REQ_LINE = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s#]+)\s*#\s*group:\s*(\w+)(,\s*sdist)?")


def parse_requirements(path: Path = REQUIREMENTS) -> list[dict]:
    """[{name, version, group, sdist}] from lines like `markupsafe==3.0.3  # group: engine, sdist`."""
    reqs = []
    for line in path.read_text().splitlines():
        m = REQ_LINE.match(line.strip())
        if m:
            reqs.append({"name": m[1], "version": m[2], "group": m[3], "sdist": bool(m[4])})
    return reqs


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def find_wheel(folder: Path, name: str, version: str) -> Path | None:
    for p in folder.glob("*.whl"):
        dist, ver = p.name.split("-")[:2]
        if normalized(dist) == normalized(name) and ver == version:
            return p
    return None


def pip(*args: str, env: dict | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit(f"failed: {' '.join(cmd)}")


def fetch_wheel(req: dict, wheels: Path) -> Path:
    """The pinned pure wheel of `req` in `wheels`, downloaded (or built from its sdist) when missing."""
    have = find_wheel(wheels, req["name"], req["version"])
    if have:
        return have
    spec = f"{req['name']}=={req['version']}"
    if req["sdist"]:
        env = dict(os.environ, CC="false", CXX="false")  # the optional C speedups fail: a pure wheel
        pip("wheel", "-q", "--no-deps", "--no-cache-dir", "--no-binary", req["name"], spec, "-w", str(wheels),
            env=env)  # fmt: skip
    else:
        pip("download", "-q", "--no-deps", "--only-binary=:all:", "--platform", "any", "--implementation", "py",
            "--abi", "none", "--python-version", PYTHON_VERSION, spec, "-d", str(wheels))  # fmt: skip
    got = find_wheel(wheels, req["name"], req["version"])
    if got is None or not got.name.endswith("-none-any.whl"):
        raise SystemExit(f"{spec}: no pure-Python wheel came out ({got.name if got else 'nothing'})")
    return got


def build_llamay_wheel(wheels: Path) -> Path:
    for old in wheels.glob("llamay-*.whl"):
        old.unlink()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc", "*.egg-info", "build")
    with tempfile.TemporaryDirectory(prefix="llamay-wheel-") as tmp:
        for name in WHEEL_SOURCES:
            src = REPO / name
            if src.is_dir():
                shutil.copytree(src, Path(tmp) / name, ignore=ignore)
            else:
                shutil.copy2(src, Path(tmp) / name)
        pip("wheel", "-q", "--no-deps", tmp, "-w", str(wheels))
    (wheel,) = wheels.glob("llamay-*.whl")
    if not wheel.name.endswith("-py3-none-any.whl"):
        raise SystemExit(f"the llamay wheel is not pure: {wheel.name}")
    return wheel


def copy_pyodide(out: Path) -> str:
    if not (PYODIDE_NPM / "package.json").exists():
        raise SystemExit(f"{PYODIDE_NPM} is missing: run `npm ci` in web/")
    out.mkdir(parents=True, exist_ok=True)
    for name in PYODIDE_FILES:
        src, dst = PYODIDE_NPM / name, out / name
        if not dst.exists() or dst.stat().st_mtime < src.stat().st_mtime or dst.stat().st_size != src.stat().st_size:
            shutil.copy2(src, dst)
    return json.loads((PYODIDE_NPM / "package.json").read_text())["version"]


def copy_wasm(out: Path) -> list[str]:
    if out.exists():
        shutil.rmtree(out)
    modules = sorted((REPO / "wasm").glob("*.wasm"))
    if modules:
        out.mkdir(parents=True)
        for m in modules:
            shutil.copy2(m, out / m.name)
    return [m.name for m in modules]


def build(clean: bool = False) -> dict:
    if clean and DIST.exists():
        shutil.rmtree(DIST)
    wheels = DIST / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[str]] = {"llamay": [build_llamay_wheel(wheels).name]}
    for req in parse_requirements():
        groups.setdefault(req["group"], []).append(fetch_wheel(req, wheels).name)
    keep = {n for names in groups.values() for n in names}
    for stale in wheels.glob("*.whl"):
        if stale.name not in keep:
            stale.unlink()
    manifest = {
        "pyodide": copy_pyodide(DIST / "pyodide"),
        "wheels": groups,
        "wasm": copy_wasm(DIST / "wasm"),
    }
    (DIST / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clean", action="store_true", help="empty web/dist first")
    args = ap.parse_args(argv)
    manifest = build(args.clean)
    n = sum(len(v) for v in manifest["wheels"].values())
    print(f"web/dist: Pyodide {manifest['pyodide']}, {n} wheels, wasm modules: {', '.join(manifest['wasm']) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
