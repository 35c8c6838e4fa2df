"""A seeded mutation fuzzer for GGUF files: truncations and mutations of the header, the metadata (types, lengths,
values), the tensor index (types, dims, offsets) and the data of real fixture files.

Every case must end one of two ways: a clean refusal (a LlamayError whose message names the file), or a model that
loads (the strict load: hyper-parameters, layers, shapes, vocabulary, tensor values), passes the audit and runs a
short forward pass whose logits (or pooled embedding) are finite; a vocabulary-only file must tokenize and
detokenize instead. Anything else — another exception type, a token id out of range, non-finite logits from
finite, bounded weights — is a failure, reported with the seed that reproduces it.

The one way non-finite output may still come from a loaded model is from weights the mutation made huge (a
tensor's bytes read as another type of the same size, a block of random bytes): finite values far beyond what
the trained tensor held, which overflow the float16 or 8-bit activations the kernels use, as ggml's do. Those
runs are counted apart ("extreme weights") when a changed tensor holds a value more than `EXTREME` times the
largest of the fixture's own tensor, and are failures otherwise. A data mutation's finite values stay within
the tensor's own range, so they must always give finite output.

`tests/gguf/test_fuzz.py` runs a bounded number of cases; `scripts/fuzz_gguf.py` runs thousands.
"""

from __future__ import annotations

import math
import random
import struct
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from llamay.errors import LlamayError
from llamay.ggml_types import GGMLType, block_size
from llamay.gguf import GGUFArray, GGUFFile, GGUFValueType, GGUFWriter
from llamay.gguf.constants import SCALAR_FORMAT
from llamay.kernels import Backend, get_backend
from llamay.model.forward import forward
from llamay.model.model import Model
from llamay.model.tensor_check import check_tensor_data
from llamay.model_card import tensor_audit
from llamay.quants import BLOCKS, dequantize
from llamay.tokenizer import Tokenizer
from tests import paths
from tests.gguf.layout import Layout, Span, layout

V = GGUFValueType
TEXT = "Once upon a time, <s> a café ☃ 123 \n\t the END</s>"
N_TOKENS = 6  # tokens run through the model
EXTREME = 16.0  # a weight this many times the tensor's own largest may overflow the activations
SAMPLED_VALUES = 4096  # values of a tensor decoded to bound the data mutation's finite values
INTEGER_TYPES = [V.UINT8, V.INT8, V.UINT16, V.INT16, V.UINT32, V.INT32, V.UINT64, V.INT64]
RETYPES = [GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0,
           GGMLType.Q6_K, GGMLType.I16]  # fmt: skip
FLOAT_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, math.nan, math.inf, -math.inf, 1e-45, 1e-38, 1e-7, 1e10, 1e38, 3.4e38]


def fixture_files() -> dict[Path, float]:
    """The files the fuzzer mutates, with the weight of each in the draw: stories260K in every type (cheap to
    run), the vocabulary files and all-MiniLM (seconds per case: a tokenizer of 30,000-100,000 tokens to build)."""
    files = {paths.stories(t): 1.0 for t in paths.STORIES_TYPES}
    files.update((p, 0.1) for p in sorted(paths.VOCAB.glob("ggml-vocab-*.gguf")))
    files[paths.MINILM] = 0.3
    return {p: w for p, w in files.items() if p.exists()}


@dataclass
class Base:
    """One fixture file, read once: its bytes, its field spans and what its tensors are."""

    path: Path
    data: bytes
    layout: Layout
    tensors: dict[str, tuple[GGMLType, tuple[int, ...], int]]  # name: (type, shape, data_start)
    keys: list[str]
    _largest: dict[tuple[str, bool], float] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> Base:
        data = path.read_bytes()
        with GGUFFile.from_buffer(data, path.name) as f:
            tensors = {t.name: (t.type, t.shape, t.data_start) for t in f.tensors.values()}
            keys = list(f.fields)
        return cls(path, data, layout(data), tensors, keys)

    def largest(self, name: str, *, sample: bool) -> float:
        """The largest |value| of the fixture's tensor: of a sample of its blocks, or of all of it."""
        key = (name, sample)
        if key not in self._largest:
            with GGUFFile.from_buffer(self.data, self.path.name) as f:
                t = f.tensors[name]
                data = f.tensor_data(t)
                n_blocks = t.n_elements // block_size(t.type)
                size = len(data) // n_blocks
                step = max(1, n_blocks * block_size(t.type) // SAMPLED_VALUES) if sample else 1
                raw = b"".join(bytes(data[i * size : (i + 1) * size]) for i in range(0, n_blocks, step))
                values = dequantize(t.type, raw, len(raw) // size * block_size(t.type))
                self._largest[key] = max(map(abs, values), default=0.0)
        return self._largest[key]

    def writer(self) -> GGUFWriter:
        with GGUFFile.from_buffer(self.data, self.path.name) as f:
            w = GGUFWriter.from_file(f)
            w.tensors = [(n, t, s, bytes(d)) for n, t, s, d in w.tensors]  # own copies: the file closes here
        return w


@dataclass
class Mutant:
    data: bytes
    what: str  # the mutation, for the report
    touched: set[str] = field(default_factory=set)  # tensors whose data bytes changed


@dataclass
class Outcome:
    kind: str  # "refused", "ran", "tokenized", "extreme weights"
    stage: str = ""  # where a refusal came from
    message: str = ""


class FuzzFailure(AssertionError):
    pass


# -- values ---------------------------------------------------------------------------------------------------


def _int_value(rng: random.Random, old: int, bits: int) -> int:
    """An interesting unsigned value of `bits` bits: bounds, powers of two, neighbours of the old value."""
    top = (1 << bits) - 1
    pick = rng.choice(
        [0, 1, 2, 3, 7, 8, 31, 32, 64, 255, 256, 4095, 65535, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32,
         1 << 62, (1 << 63) - 1, 1 << 63, top, old + 1, old - 1, old * 2, old // 2, old + 32, old - 32,
         rng.getrandbits(bits), rng.randrange(0, 1 + max(old, 1) * 4)]
    )  # fmt: skip
    return pick & top


def _float_value(rng: random.Random, old: float) -> float:
    if rng.random() < 0.6:
        return rng.choice(FLOAT_SPECIALS)
    return rng.choice([-old, old * 2, old / 2, old * 1e6, rng.uniform(-1e6, 1e6)])


def _pack_into(buf: bytearray, span: Span, value: int) -> None:
    buf[span.start : span.start + span.size] = (value & ((1 << 8 * span.size) - 1)).to_bytes(span.size, "little")


def _value_of_type(rng: random.Random, vtype: GGUFValueType, old: object) -> object:
    """A value to store as `vtype` (the fuzzer's re-typed or re-valued metadata)."""
    if vtype in (V.FLOAT32, V.FLOAT64):
        base = float(old) if isinstance(old, (int, float)) and not isinstance(old, bool) else 1.0
        v = _float_value(rng, base)
        return v if vtype == V.FLOAT64 or not math.isfinite(v) or abs(v) < 3.4e38 else math.inf
    if vtype == V.BOOL:
        return rng.random() < 0.5
    if vtype == V.STRING:
        return rng.choice(["", "none", "linear", "yarn", "llama", "gpt2", "bert", "\udcff", str(old), "x" * 300])
    if vtype == V.ARRAY:
        item = rng.choice([V.UINT32, V.INT32, V.FLOAT32, V.STRING])
        return GGUFArray(item, [_value_of_type(rng, item, old) for _ in range(rng.randrange(0, 6))])
    bits = struct.calcsize("<" + SCALAR_FORMAT[vtype]) * 8
    signed = SCALAR_FORMAT[vtype].islower()
    base = old if isinstance(old, int) and not isinstance(old, bool) else 1
    v = _int_value(rng, max(base, 0), bits)
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


# -- mutations ------------------------------------------------------------------------------------------------


def m_truncate(rng: random.Random, b: Base) -> Mutant:
    if rng.random() < 0.5:
        s = rng.choice(b.layout.spans)
        cut = (
            s.start + rng.choice([0, 1, s.size - 1, s.size])
            if s.kind != "data"
            else rng.randrange(s.start, len(b.data))
        )
    else:
        cut = rng.randrange(0, len(b.data))
    cut = max(0, min(cut, len(b.data) - 1))
    return Mutant(b.data[:cut], f"truncate at {cut} of {len(b.data)}")


_INT_KINDS = ("version", "n_tensors", "n_kv", "str_len", "vtype", "arr_type", "arr_count", "n_dims", "dim",
              "ggml_type", "offset")  # fmt: skip


def m_int_field(rng: random.Random, b: Base) -> Mutant:
    s = rng.choice(b.layout.of(*_INT_KINDS))
    old = int.from_bytes(b.data[s.start : s.start + s.size], "little")
    new = old
    while new == old:  # a mutation that changes nothing tests nothing
        if s.kind in ("vtype", "arr_type"):
            new = rng.choice([*range(13), 13, 99, (1 << 32) - 1])
        elif s.kind == "ggml_type":
            new = rng.choice([*map(int, GGMLType), 4, 31, 99])
        else:
            new = _int_value(rng, old, 8 * s.size)
    buf = bytearray(b.data)
    _pack_into(buf, s, new)
    return Mutant(bytes(buf), f"{s.kind} of {s.label!r} at {s.start}: {old} -> {new}")


def m_scalar_value(rng: random.Random, b: Base) -> Mutant:
    s = rng.choice(b.layout.of("scalar"))
    fmt = "<" + SCALAR_FORMAT[s.vtype]
    (old,) = struct.unpack_from(fmt, b.data, s.start)
    buf = bytearray(b.data)
    if s.vtype in (V.FLOAT32, V.FLOAT64):
        new = _float_value(rng, old)
        try:
            struct.pack_into(fmt, buf, s.start, new)
        except OverflowError:
            struct.pack_into(fmt, buf, s.start, math.inf)
    else:
        new = _int_value(rng, int(old), 8 * s.size)
        _pack_into(buf, s, new)
    return Mutant(bytes(buf), f"value of {s.label!r} ({s.vtype.name}) at {s.start}: {old!r} -> {new!r}")


def m_bytes(rng: random.Random, b: Base) -> Mutant:
    buf = bytearray(b.data)
    end = b.layout.data_start if b.tensors else len(buf)
    edits = [(rng.randrange(0, end), rng.randrange(256)) for _ in range(rng.randint(1, 8))]
    for pos, v in edits:
        buf[pos] = v
    return Mutant(bytes(buf), f"header bytes {edits}")


def m_string(rng: random.Random, b: Base) -> Mutant:
    spans = [s for s in b.layout.of("str") if s.size]
    s = rng.choice(spans)
    buf = bytearray(b.data)
    edits = [(s.start + rng.randrange(s.size), rng.choice([0x00, 0x20, 0x2E, 0x80, 0xC3, 0xFF, rng.randrange(256)]))
             for _ in range(rng.randint(1, 3))]  # fmt: skip
    for pos, v in edits:
        buf[pos] = v
    return Mutant(bytes(buf), f"string bytes of {s.label!r}: {edits}")


def m_metadata(rng: random.Random, b: Base) -> Mutant:
    """Re-type, re-value, drop, shorten or grow one metadata entry, rewritten with a valid layout."""
    w = b.writer()
    keys = [k for k in w.fields if k.split(".")[0] != "general" or k == "general.architecture"] or list(w.fields)
    key = rng.choice(keys)
    vtype, value = w.fields[key]
    action = rng.choice(["retype", "revalue", "revalue", "drop", "resize"] if vtype == V.ARRAY else
                        ["retype", "revalue", "revalue", "revalue", "drop"])  # fmt: skip
    if action == "drop":
        del w.fields[key]
        return Mutant(w.to_bytes(), f"drop {key!r}")
    if action == "resize":
        items = list(value)
        k = rng.choice([1, 2, 7, len(items) // 2, len(items) - 1]) if items else 1
        if rng.random() < 0.6 and items:
            new = GGUFArray(value.item_type, items[: max(0, len(items) - k)])
        else:
            extra = items[-1:] * k if items else [_value_of_type(rng, value.item_type, 0) for _ in range(k)]
            new = GGUFArray(value.item_type, items + extra)
        w.fields[key] = (vtype, new)
        return Mutant(w.to_bytes(), f"{key!r}: {len(items)} -> {len(new)} items")
    if action == "revalue" and vtype == V.ARRAY:
        items = list(value)
        if not items:
            return m_metadata(rng, b)
        i = rng.randrange(len(items))
        items[i] = _value_of_type(rng, value.item_type, items[i])
        w.fields[key] = (vtype, GGUFArray(value.item_type, items))
        return Mutant(w.to_bytes(), f"{key!r}[{i}] = {items[i]!r}")
    new_type = vtype if action == "revalue" else rng.choice([t for t in V if t != vtype])
    new = _value_of_type(rng, new_type, value)
    w.fields[key] = (new_type, new)
    shown = repr(new)[:60]
    return Mutant(w.to_bytes(), f"{key!r}: {vtype.name} {repr(value)[:40]} -> {new_type.name} {shown}")


def m_tensor_index(rng: random.Random, b: Base) -> Mutant:
    """A tensor's type, shape or name changed (its data kept), or a tensor dropped, duplicated or added."""
    w = b.writer()
    i = rng.randrange(len(w.tensors))
    name, t, shape, data = w.tensors[i]
    action = rng.choice(["type", "type", "shape", "drop", "extra-layer", "rename"])
    # the tensor list is edited in place, past `add_tensor`'s checks: offsets follow each tensor's actual bytes
    if action == "type":  # same bytes read as another type: the region no longer fits, unless sizes agree
        new_t = rng.choice([x for x in RETYPES if x != t])
        w.tensors[i] = (name, new_t, shape, data)
        return Mutant(w.to_bytes(), f"tensor {name!r}: type {t.name} -> {new_t.name}", {name})
    if action == "shape":
        dims = list(shape)
        while dims == list(shape):
            choice = rng.random()
            if choice < 0.3 and len(dims) > 1:
                dims.reverse()
            elif choice < 0.5:
                dims.append(1)  # a trailing 1 changes nothing ggml computes: this one may load
            else:
                d = rng.randrange(len(dims))
                dims[d] = rng.choice([1, dims[d] * 2, max(1, dims[d] // 2), dims[d] + block_size(t)])
        w.tensors[i] = (name, t, tuple(dims), data)
        return Mutant(w.to_bytes(), f"tensor {name!r}: shape {list(shape)} -> {dims}", {name})
    if action == "drop":
        del w.tensors[i]
        return Mutant(w.to_bytes(), f"drop tensor {name!r}")
    if action == "extra-layer":
        layer = [x for x in w.tensors if x[0].startswith("blk.0.")]
        n = 1 + max((int(x[0].split(".")[1]) for x in w.tensors if x[0].startswith("blk.")), default=-1)
        w.tensors += [(x[0].replace("blk.0.", f"blk.{n}.", 1), *x[1:]) for x in layer] or [
            (f"blk.{n}.x", t, shape, data)
        ]
        return Mutant(w.to_bytes(), f"extra layer blk.{n} ({len(layer)} tensors)")
    new_name = rng.choice([name + ".x", name.replace("blk.", "blk.0", 1), "blk.99." + name, name[:-1], "output.weight"])
    if any(x[0] == new_name for x in w.tensors):
        return m_tensor_index(rng, b)
    w.tensors[i] = (new_name, t, shape, data)
    return Mutant(w.to_bytes(), f"rename tensor {name!r} -> {new_name!r}")


def m_offset(rng: random.Random, b: Base) -> Mutant:
    s = rng.choice(b.layout.of("offset"))
    old = int.from_bytes(b.data[s.start : s.start + s.size], "little")
    a = b.layout.alignment
    new = rng.choice([x for x in (old + a, old - a, 0, old + 2 * a, old * 2 + a, len(b.data)) if x >= 0 and x != old])
    buf = bytearray(b.data)
    _pack_into(buf, s, new)
    return Mutant(bytes(buf), f"offset of {s.label!r}: {old} -> {new}")


def m_data(rng: random.Random, b: Base) -> Mutant:
    """One value of one tensor rewritten: a bounded finite value, or NaN/infinity (a float, or a block's scale)."""
    name = rng.choice(list(b.tensors))
    t, shape, start = b.tensors[name]
    buf = bytearray(b.data)
    top = b.largest(name, sample=True)  # finite values within the tensor's own range
    value = rng.choice([math.nan, math.inf, -math.inf, rng.uniform(-top, top), 0.0])
    n = 1
    for d in shape:
        n *= d
    block = BLOCKS.get(t)
    if t in (GGMLType.F32, GGMLType.F16):
        fmt = "<f" if t == GGMLType.F32 else "<e"
        at = start + rng.randrange(n) * struct.calcsize(fmt)
        struct.pack_into(fmt, buf, at, value)
        what = f"element at {at}"
    elif t == GGMLType.BF16:
        at = start + 2 * rng.randrange(n)
        buf[at : at + 2] = struct.pack("<f", value)[2:]
        what = f"element at {at}"
    elif block is not None:
        at = start + rng.randrange(n // block.elements) * block.size
        scales = [f for f, code in block.fields.items() if code == "e"]
        if scales and rng.random() < 0.7:
            fld = rng.choice(scales)
            struct.pack_into("<e", buf, at + block.offset[fld], value)
            what = f"block at {at}, {fld}"
        else:
            buf[at : at + block.size] = bytes(rng.randrange(256) for _ in range(block.size))
            value = "random block"
            what = f"block at {at}"
    else:
        return m_truncate(rng, b)
    return Mutant(bytes(buf), f"data of {name!r} ({t.name}), {what}: {value!r}", {name})


MUTATIONS: dict[str, tuple[float, Callable[[random.Random, Base], Mutant]]] = {
    "truncate": (1.0, m_truncate),
    "int-field": (2.0, m_int_field),
    "scalar-value": (2.0, m_scalar_value),
    "bytes": (1.0, m_bytes),
    "string": (1.0, m_string),
    "metadata": (3.0, m_metadata),
    "tensor-index": (2.0, m_tensor_index),
    "offset": (1.0, m_offset),
    "data": (2.0, m_data),
}


def mutate(rng: random.Random, b: Base) -> tuple[str, Mutant]:
    kinds = [k for k in MUTATIONS if b.tensors or k not in ("tensor-index", "offset", "data")]
    kind = rng.choices(kinds, [MUTATIONS[k][0] for k in kinds])[0]
    return kind, MUTATIONS[kind][1](rng, b)


# -- the oracle -----------------------------------------------------------------------------------------------


def _refused(stage: str, e: LlamayError, name: str) -> Outcome:
    msg = str(e)
    if name not in msg:
        raise FuzzFailure(f"a refusal at {stage} does not name the file: {type(e).__name__}: {msg}")
    return Outcome("refused", stage, msg)


def _changed(f: GGUFFile, b: Base, touched: set[str]) -> list[str]:
    """Tensors whose bytes or meaning differ from the fixture's: their values are checked."""
    return [n for n, t in f.tensors.items() if n in touched or b.tensors.get(n) != (t.type, t.shape, t.data_start)]


def _extreme(f: GGUFFile, b: Base, names: Iterable[str]) -> str:
    """The first changed tensor holding a value beyond EXTREME times its fixture's largest, described, or ""."""
    for n in names:
        t = f.tensors[n]
        try:
            values = dequantize(t.type, f.tensor_data(t), t.n_elements)
        except LlamayError:
            return f"{n} ({t.type.name}: no reference decoder to bound it)"
        big = max(map(abs, values), default=0.0)
        own = b.largest(n, sample=False) if n in b.tensors else 0.0
        if not big <= EXTREME * own:
            return f"{n} holds |w| = {big:.3g}, more than {EXTREME:g} times its own largest {own:.3g}"
    return ""


def _tokenize(tok: Tokenizer, n_vocab: int) -> list[int]:
    ids = tok.encode(TEXT)
    bad = [i for i in ids if not 0 <= i < n_vocab]
    if bad:
        raise FuzzFailure(f"the tokenizer gave ids {bad[:5]} outside the vocabulary of {n_vocab}")
    tok.decode(ids)
    return ids


def run_case(data: bytes, name: str, b: Base, touched: set[str], backend: Backend) -> Outcome:
    """One file through parse, load, audit, tokenizer and a forward pass; a FuzzFailure on a wrong ending."""
    try:
        f = GGUFFile.from_buffer(data, name)
    except LlamayError as e:
        return _refused("parse", e, name)
    stage = "load"
    try:
        if not f.tensors:
            stage = "tokenizer"
            _tokenize(Tokenizer.from_gguf(f), 1 << 62)
            return Outcome("tokenized")
        model = Model(f, backend)
        stage = "check tensors"
        changed = _changed(f, b, touched)
        check_tensor_data(f, changed)
        audit = tensor_audit(f)
        if audit["status"] != "clean":
            raise FuzzFailure(f"the model loaded but the audit says {audit['status']}: {audit['message']}")
        stage = "tokenizer"
        ids = _tokenize(model.tokenizer, model.cfg.n_vocab)[:N_TOKENS] or [0]
        stage = "forward"
        out = _forward(model, ids)
        bad = [v for v in out if not math.isfinite(v)]
        if bad:
            extreme = _extreme(f, b, changed)
            if extreme:
                return Outcome("extreme weights", message=f"{len(bad)} non-finite outputs: {extreme}")
            raise FuzzFailure(f"{len(bad)} of {len(out)} outputs are not finite (changed tensors: {changed[:4]})")
        return Outcome("ran")
    except LlamayError as e:
        return _refused(stage, e, name)
    finally:
        f.close()


def _forward(model: Model, ids: list[int]) -> list[float]:
    st = model.new_state(n_ctx=len(ids) + 2, n_batch=len(ids), page_size=4)
    be = model.backend
    if model.cfg.causal:
        forward(model, st, ids)
        return be.read_f32(st.logits, 0, model.cfg.n_vocab)
    forward(model, st, ids, outputs=())
    return be.read_f32(st.pooled, 0, model.cfg.n_embd)


# -- the driver -----------------------------------------------------------------------------------------------


@dataclass
class Summary:
    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)  # (mutation kind, outcome kind)
    stages: Counter = field(default_factory=Counter)  # refusal stage
    failures: list[str] = field(default_factory=list)
    extreme: list[str] = field(default_factory=list)  # runs with non-finite output from extreme weights
    slowest: tuple[float, str] = (0.0, "")
    seconds: float = 0.0

    def report(self) -> str:
        lines = [f"{self.cases} cases in {self.seconds:.1f} s, {len(self.failures)} failures"]
        kinds = sorted({k for k, _ in self.outcomes})
        for k in kinds:
            parts = ", ".join(f"{o} {n}" for (kk, o), n in sorted(self.outcomes.items()) if kk == k)
            lines.append(f"  {k:<13} {parts}")
        lines.append("  refused at   " + ", ".join(f"{s} {n}" for s, n in self.stages.most_common()))
        lines.append(f"  slowest case {self.slowest[0]:.2f} s: {self.slowest[1]}")
        lines += [f"  extreme weights: {x}" for x in self.extreme[:5]]
        lines += [f"  FAIL {x}" for x in self.failures[:20]]
        return "\n".join(lines)


def fuzz(
    seed: int,
    count: int,
    files: dict[Path, float] | None = None,
    backend: Backend | None = None,
    on_case: Callable[[int, str], None] | None = None,
    start: int = 0,
) -> Summary:
    """Cases start..start+count of `seed`; case i is reproducible alone from (seed, i) (its own random stream)."""
    files = files or fixture_files()
    backend = backend or get_backend()
    bases: dict[Path, Base] = {}
    summary = Summary()
    t_all = time.perf_counter()
    for i in range(start, start + count):
        rng = random.Random(f"{seed}:{i}")
        (path,) = rng.choices(list(files), list(files.values()))
        b = bases.get(path) or bases.setdefault(path, Base.read(path))
        kind, m = mutate(rng, b)
        label = f"seed {seed} case {i} {path.name}: {kind}: {m.what}"
        if on_case:
            on_case(i, label)
        t0 = time.perf_counter()
        try:
            outcome = run_case(m.data, path.name, b, m.touched, backend)
        except FuzzFailure as e:
            summary.failures.append(f"{label}: {e}")
            outcome = Outcome("FAILED")
        except Exception as e:  # any other exception type is what the fuzzer looks for
            tb = traceback.format_exception(e)[-3:]
            summary.failures.append(f"{label}: {type(e).__name__}: {e} | {''.join(tb).strip()}")
            outcome = Outcome("FAILED")
        dt = time.perf_counter() - t0
        if dt > summary.slowest[0]:
            summary.slowest = (dt, label)
        summary.cases += 1
        summary.outcomes[(kind, outcome.kind)] += 1
        if outcome.kind == "refused":
            summary.stages[outcome.stage] += 1
        elif outcome.kind == "extreme weights":
            summary.extreme.append(f"{label}: {outcome.message}")
    summary.seconds = time.perf_counter() - t_all
    return summary
