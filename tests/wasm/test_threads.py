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
    img.data += bytes(ctl + 64 - HEAP_BASE - len(img.data))  # llamay_ctl_bytes: 36
    return bytes(img.data), scratch, ctl, lst, len(cmds)


def _decode_image(act_bytes) -> tuple[bytes, int, int, int, int, list[int], list[int]]:
    """A decode step's layer (one token) and, after it, commands that must take a barrier the layer does not: the
    image as _layer_image's, the commands a barrier comes before and those split over the parts (llamay_list_plan)."""
    rng = random.Random("decode")
    k, f, q8, q4 = 256, 96, int(GGMLType.Q8_0), int(GGMLType.Q4_0)
    img = Image()

    def floats(count: int, scale: float = 1.0) -> int:
        return img.put(array("f", (rng.uniform(-scale, scale) for _ in range(count))).tobytes())

    def weight(t: int, n_in: int, n_out: int) -> int:
        return img.put(quantize(GGMLType(t), array("f", (rng.uniform(-1, 1) for _ in range(n_in * n_out)))))

    x = floats(k, 2.0)
    h, q, a, o = (img.zeros(4 * k) for _ in range(4))
    kk, g, u, d, p, r, s, t = (img.zeros(4 * f) for _ in range(8))
    wq, wk, wo, wg, wu = (weight(q8, k, n_out) for n_out in (k, f, k, f, f))
    wd, wp, wr, ws, wt = weight(q4, f, k), weight(q4, k, f), weight(q4, k, f), weight(q4, f, f), weight(q4, k, f)
    kc, vc = floats(16 * 64), floats(16 * 64)
    pos, seq, pages, zero = (img.put(array("i", [v]).tobytes()) for v in (11, 0, 0, 0))
    share = (max(act_bytes(ty, 1, k) for ty in (q8, q4)) + 15) // 16 * 16
    scratch = HEAP_BASE + (1 << 20)
    mm, add, norm = OPS["llamay_matmul"], OPS["llamay_add"], OPS["llamay_rms_norm"]
    attention = (OPS["llamay_attention"], a, q, kc, vc, 0, 16, 1, pos, seq, pages, zero, zero, 16, 16, 4, 16, 16,
                 0.25, 1, 0, 0.0, 0.0, 0)  # fmt: skip
    scale = OPS["llamay_scale"]
    cmds = [  # (command, a barrier before it?, split?)
        ((norm, h, x, 0, 1, k, 1e-5), False, False),
        ((mm, q8, q, wq, h, 1, k, k, scratch), True, True),  # after a command part 0 runs alone
        ((mm, q8, kk, wk, h, 1, k, f, scratch), False, True),  # one input
        ((add, q, q, q, k), False, True),  # each part's own rows of q, as the matmul split them
        (attention, True, True),
        ((mm, q8, o, wo, a, 1, k, k, scratch), True, True),
        ((add, x, x, o, k), False, True),  # the residual add of the part's own rows
        ((norm, h, x, 0, 1, k, 1e-5), True, False),
        ((scale, h, 0.5, k), False, False),  # after a norm: whole, in part 0, as the norm
        ((mm, q8, g, wg, h, 1, k, f, scratch), True, True),
        ((mm, q8, u, wu, h, 1, k, f, scratch), False, True),
        ((OPS["llamay_swiglu"], g, g, u, f), False, True),  # gate and up of the part's rows
        ((mm, q4, d, wd, g, 1, f, k, scratch), True, True),  # reads all of g
        ((add, x, x, d, k), False, True),
        # past the layer: what must wait
        ((mm, q4, p, wp, x, 1, k, f, scratch), True, True),  # reads all of x, which the add wrote by parts
        ((mm, q4, r, wr, h, 1, k, f, scratch), False, True),
        ((mm, q4, s, ws, p, 1, f, f, scratch), True, True),  # reads the output of the matmul before the one before
        ((add, p, p, r, f), True, True),  # writes p, which the matmul before reads whole
        ((mm, q4, t, wt, h, 1, k, f, scratch), False, True),
        ((scale, t, 0.5, f // 2), True, True),  # half of t: its parts are not the matmul's
    ]
    addrs = [img.put(FORMATS[c[0]].pack(*c)) for c, _, _ in cmds]
    lst = img.put(array("i", addrs).tobytes())
    assert HEAP_BASE + len(img.data) <= scratch
    ctl = scratch + share * MAX_PARTS
    img.data += bytes(ctl + 64 - HEAP_BASE - len(img.data))
    barriers = [i for i, (_, b, _) in enumerate(cmds) if b]
    return bytes(img.data), scratch, ctl, lst, len(cmds), barriers, [i for i, (_, _, sp) in enumerate(cmds) if sp]


def _run_node(tmp_path: Path, image: bytes, end: int, ctl: int, lst: int, count: int) -> dict:
    (tmp_path / "image.bin").write_bytes(image)
    where = [str(a) for a in (tmp_path / "image.bin", HEAP_BASE, end, ctl, lst, count)]
    cmd = ["node", "--experimental-wasm-relaxed-simd", str(HERE / "threads_node.mjs"), str(MODULE), *where]
    r = subprocess.run([*cmd, "1", "2", "3", "4"], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


needs_node = pytest.mark.skipif(
    IS_PYODIDE or shutil.which("node") is None, reason="needs Node (worker_threads) natively"
)


@needs_node
@pytest.mark.parametrize("shape", ["layer", "decode"])
def test_threads_give_one_threads_heap(tmp_path: Path, shape: str) -> None:
    wasm = require_backend("wasm")
    build = _layer_image if shape == "layer" else _decode_image
    image, end, ctl, lst, count = build(wasm.fn["llamay_act_bytes"])[:5]
    out = _run_node(tmp_path, image, end, ctl, lst, count)
    runs = out["runs"]
    assert all(v["rc"] == 0 and v["again"] == 0 for v in runs.values()), runs
    assert len({v["sha256"] for v in runs.values()}) == 1, runs
    assert runs["1"]["sha256"] != hashlib.sha256(image[: end - HEAP_BASE]).hexdigest(), "the list wrote nothing"


@needs_node
def test_barriers_come_where_a_part_would_touch_another_parts_elements(tmp_path: Path) -> None:
    """Every part plans the list alone, the same way (wasm/src/threads.c place): no barrier between split commands
    whose parts touch only their own elements (Q and K of one input; a matmul and the element-wise op of its rows
    at n = 1), one wherever a part could read what another wrote or write what another reads; an element-wise op
    among commands part 0 runs alone runs whole there too."""
    wasm = require_backend("wasm")
    image, end, ctl, lst, count, barriers, split = _decode_image(wasm.fn["llamay_act_bytes"])
    plan = _run_node(tmp_path, image, end, ctl, lst, count)
    assert (plan["barriers"], plan["split"]) == (barriers, split)
