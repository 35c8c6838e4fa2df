"""The threads build (wasm/src/threads.c) under Node: a command list shaped like a layer (a norm, matmuls that
share an input, attention, one matmul that reads another's output, element-wise ops between) run by 1, 2, 3 and 4
kernel threads over one shared memory leaves the heap bit for bit as one thread does, and as llamay_exec run
command by command (nparts 1 is that loop: every command whole, in part 0)."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
from array import array
from pathlib import Path

import pytest

from llamay.ggml_types import GGMLType
from llamay.platform import IS_PYODIDE
from llamay.quants import quantize
from llamay.wasm.backend import FORMATS
from llamay.wasm.runtime import OPS
from tests.backends import require_backend

HERE = Path(__file__).resolve().parent
MODULE = HERE.parents[1] / "wasm" / "llamay_kernels_threads.wasm"
HEAP_BASE = 8 << 20  # above the instances' static data and stacks (threads_node.mjs: 1 MiB each from 64 KiB)
MAX_PARTS = 4


class Image:
    """Bytes to place at HEAP_BASE, allocated 16-aligned; addresses are absolute."""

    def __init__(self) -> None:
        self.data = bytearray()

    def put(self, raw: bytes) -> int:
        self.data += bytes(-len(self.data) % 16)
        addr = HEAP_BASE + len(self.data)
        self.data += raw
        return addr

    def zeros(self, nbytes: int) -> int:
        return self.put(bytes(nbytes))


def _layer_image(act_bytes) -> tuple[bytes, int, int, int, int]:
    rng = random.Random("threads")
    n, k, m = 3, 256, 96
    img = Image()

    def floats(count: int, scale: float = 1.0) -> array:
        return array("f", (rng.uniform(-scale, scale) for _ in range(count)))

    def weight(t: GGMLType, n_in: int, n_out: int) -> int:
        return img.put(quantize(t, floats(n_in * n_out)))

    x = img.put(floats(n * k, 2.0).tobytes())
    h, q, kk, s, o, d = (img.zeros(4 * n * dim) for dim in (k, m, m, m, k, m))
    wq, wk = weight(GGMLType.Q4_0, k, m), weight(GGMLType.Q8_0, k, m)
    wo, wd = weight(GGMLType.Q4_1, k, k), weight(GGMLType.Q5_1, k, m)
    a, kc, vc = img.zeros(4 * n * m), img.put(floats(16 * 32).tobytes()), img.put(floats(16 * 32).tobytes())
    pos, seq = img.put(array("i", [9, 10, 11]).tobytes()), img.put(array("i", [0, 0, 0]).tobytes())
    pages, zero, seq_len = img.put(array("i", [0]).tobytes()), img.put(bytes(4)), img.put(array("i", [12]).tobytes())
    types = (GGMLType.Q4_0, GGMLType.Q8_0, GGMLType.Q4_1, GGMLType.Q5_1)
    share = (max(act_bytes(int(t), n, k) for t in types) + 15) // 16 * 16
    scratch = HEAP_BASE + (1 << 20)  # past the rest of the image, which is hashed up to here
    mm = OPS["llamay_matmul"]
    cmds = [
        (OPS["llamay_rms_norm"], h, x, 0, n, k, 1e-5),
        (mm, int(GGMLType.Q4_0), q, wq, h, n, k, m, scratch),  # q and k: one input, no barrier between
        (mm, int(GGMLType.Q8_0), kk, wk, h, n, k, m, scratch),
        (OPS["llamay_add"], s, q, kk, n * m),
        (OPS["llamay_scale"], s, 0.25, n * m),
        # attention (split by token and KV head) of q over a cache, then added to s by part 0 alone
        (
            OPS["llamay_attention"],
            a,
            q,
            kc,
            vc,
            0,
            16,
            n,
            pos,
            seq,
            pages,
            zero,
            seq_len,
            16,
            6,
            2,
            16,
            16,
            0.25,
            1,
            0,
            0.0,
            0.0,
            0,
        ),
        (OPS["llamay_add"], s, s, a, n * m),
    ]
    cmds += [  # o reads h, d reads o: a matmul reading the one before it (a barrier between them)
        (mm, int(GGMLType.Q4_1), o, wo, h, n, k, k, scratch),
        (mm, int(GGMLType.Q5_1), d, wd, o, n, k, m, scratch),
        (OPS["llamay_add"], d, d, s, n * m),
    ]
    addrs = [img.put(FORMATS[c[0]].pack(*c)) for c in cmds]
    lst = img.put(array("i", addrs).tobytes())
    assert HEAP_BASE + len(img.data) <= scratch
    ctl = scratch + share * MAX_PARTS  # the control block too: its counters differ by thread count
    img.data += bytes(ctl + 32 - HEAP_BASE - len(img.data))
    return bytes(img.data), scratch, ctl, lst, len(cmds)


@pytest.mark.skipif(IS_PYODIDE or shutil.which("node") is None, reason="needs Node (worker_threads) natively")
def test_threads_give_one_threads_heap(tmp_path: Path) -> None:
    wasm = require_backend("wasm")
    image, end, ctl, lst, count = _layer_image(wasm.fn["llamay_act_bytes"])
    (tmp_path / "image.bin").write_bytes(image)
    where = [str(a) for a in (tmp_path / "image.bin", HEAP_BASE, end, ctl, lst, count)]
    cmd = [
        "node",
        "--experimental-wasm-relaxed-simd",
        str(HERE / "threads_node.mjs"),
        str(MODULE),
        *where,
        "1",
        "2",
        "3",
        "4",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    runs = json.loads(r.stdout)
    assert all(v["rc"] == 0 and v["again"] == 0 for v in runs.values()), runs
    assert len({v["sha256"] for v in runs.values()}) == 1, runs
    assert runs["1"]["sha256"] != hashlib.sha256(image[: end - HEAP_BASE]).hexdigest(), "the list wrote nothing"
