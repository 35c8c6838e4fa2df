"""Build the kernel modules: `wasm/llamay_kernels.wasm` (SIMD128) and `wasm/llamay_kernels_relaxed.wasm` (relaxed
SIMD), from `wasm/src/*.c`, with the compiler pinned in pyproject's `dev` extra (`ziglang`, i.e. `zig cc`: clang
and wasm-ld for wasm32, no system toolchain).

The C side of the Python declarations (the type ids, the types the kernels run, the kernel ops and their exports)
is generated first, into headers next to the objects (wasm/codegen.py; `--headers` prints them).

Each module is an Emscripten-style side module (position independent, a `dylink.0` section, memory, stack pointer
and bases imported), freestanding (no libc import). A custom section `llamay.build` at its end records the compiler,
the flags and a hash of the sources, so a module can be checked against the sources without a compiler
(tests/wasm/test_build.py). The build is reproducible: same compiler, same sources, same bytes.

    python wasm/build.py            # build both modules next to this file
    python wasm/build.py --check    # rebuild into a temporary folder, fail if a shipped module differs
    python wasm/build.py --out DIR  # build into DIR
    python wasm/build.py --headers  # print the generated headers
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from llamay.wasm import codegen  # the package installed (pip install -e .): the declarations live in it

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
ZIG_VERSION = "0.17.0"  # pinned in pyproject.toml's dev extra
BUILD_SECTION = "llamay.build"

SOURCES = ("activations.c", "matmul.c", "matmul_float.c", "matmul_legacy.c", "matmul_kquants.c", "elementwise.c",
           "attention.c", "moe.c", "exec.c", "threads.c", "pda.c")  # fmt: skip
FLAGS = (
    "--target=wasm32-freestanding",
    "-O3",
    "-msimd128",
    "-mbulk-memory",
    "-mnontrapping-fptoint",
    "-msign-ext",
    "-mmutable-globals",
    "-fPIC",
    "-shared",
    "-nostdlib",
    "-fvisibility=hidden",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-g0",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wl,--strip-debug",
    "-Wl,--no-entry",
)
# the threads build (wasm/src/threads.c): relaxed SIMD (every engine with wasm threads here validates it), atomics,
# and a shared memory import, so several instances (one per kernel thread) run on one memory
THREADS_FLAGS = ("-mrelaxed-simd", "-matomics", "-DLLAMAY_THREADS=1", "-Wl,--shared-memory",
                 "-Wl,--max-memory=4294901760")  # fmt: skip
VARIANTS = {
    "llamay_kernels.wasm": (),
    "llamay_kernels_relaxed.wasm": ("-mrelaxed-simd",),
    "llamay_kernels_threads.wasm": THREADS_FLAGS,
}


def zig(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ziglang", *args], capture_output=True, text=True, check=False)


def compiler_version() -> str:
    """`ziglang X (clang Y)`, or an error naming how to install the pinned compiler."""
    try:
        zv = zig("version")
    except OSError as e:  # pragma: no cover - no Python to run
        raise SystemExit(f"cannot run the compiler: {e}") from e
    if zv.returncode != 0:
        raise SystemExit(f"ziglang is not installed: pip install 'ziglang=={ZIG_VERSION}' (or '.[dev]')\n{zv.stderr}")
    cv = zig("cc", "--version").stdout.splitlines()[0].strip()
    return f"ziglang {zv.stdout.strip()} ({cv})"


def sources_hash() -> str:
    """sha256 over the names and bytes of every file in wasm/src and of the generated headers, in name order."""
    files = {p.name: p.read_bytes() for p in SRC.iterdir() if p.is_file()}
    files.update((name, text.encode()) for name, text in codegen.headers().items())
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    return h.hexdigest()


def _leb(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def custom_section(name: str, payload: bytes) -> bytes:
    body = _leb(len(name)) + name.encode() + payload
    return b"\x00" + _leb(len(body)) + body


def build_info(variant_flags: tuple[str, ...], compiler: str) -> dict:
    return {"compiler": compiler, "flags": [*FLAGS, *variant_flags], "sources_sha256": sources_hash()}


def build(out_dir: Path, verbose: bool = True) -> dict[str, Path]:
    compiler = compiler_version()
    if f"ziglang {ZIG_VERSION} " not in compiler + " ":
        raise SystemExit(f"expected ziglang {ZIG_VERSION}, found {compiler}: pip install 'ziglang=={ZIG_VERSION}'")
    out_dir.mkdir(parents=True, exist_ok=True)
    built = {}
    for name, extra in VARIANTS.items():
        target = out_dir / name
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / name
            for header, text in codegen.headers().items():
                (Path(tmp) / header).write_text(text)
            # the include folder is not a flag of the build info: the module does not depend on where it was
            cmd = ["cc", *FLAGS, *extra, f"-I{tmp}", "-o", str(raw), *(str(SRC / s) for s in SOURCES)]
            r = zig(*cmd)
            errors = [ln for ln in r.stderr.splitlines() if "creating shared libraries" not in ln]
            if r.returncode != 0 or errors:
                raise SystemExit(f"build of {name} failed:\n{r.stderr}")
            module = raw.read_bytes()
        info = json.dumps(build_info(extra, compiler), sort_keys=True).encode()
        target.write_bytes(module + custom_section(BUILD_SECTION, info))
        built[name] = target
        if verbose:
            print(f"{target} ({target.stat().st_size} bytes) with {compiler}")
    return built


def check() -> int:
    """Rebuild into a temporary folder and compare with the shipped modules."""
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in build(Path(tmp), verbose=False).items():
            shipped = HERE / name
            if not shipped.exists() or shipped.read_bytes() != path.read_bytes():
                stale.append(name)
    if stale:
        print(f"stale or missing: {', '.join(stale)}; run python wasm/build.py", file=sys.stderr)
        return 1
    print("shipped modules match a fresh build")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if the shipped modules differ from a fresh build")
    ap.add_argument("--out", type=Path, default=HERE, help="output folder (default: next to this script)")
    ap.add_argument("--headers", action="store_true", help="print the headers generated from the Python side")
    args = ap.parse_args(argv)
    if args.headers:
        for name, text in codegen.headers().items():
            print(f"/* ---- {name} */\n{text}")
        return 0
    if args.check:
        return check()
    build(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
