"""One tensor declaration per architecture (`core/arch/tensors.py`) is what the binder reads and what the tiny
models hold: every tensor bound is declared, every declared required tensor is in the files with the declared
shape, every slot lands in the weight structures, and a tensor declared for some layers only is bound there."""

from __future__ import annotations

import dataclasses
import re

import pytest

from llamay.arch import ARCHITECTURES, bind_weights, load_config
from llamay.arch.binder import Binder
from llamay.arch.names import T, weight
from llamay.arch.tensors import instances
from llamay.arch.weights import bind_declared
from llamay.errors import ModelError
from llamay.gguf import GGUFFile
from tests import paths
from tests.models.tiny import ARCHES, build_tiny


def _files() -> dict[str, bytes]:
    files = {arch: build_tiny(arch).to_bytes() for arch in ARCHES}
    files["stories"] = paths.stories("f32").read_bytes()
    return files


FILES = _files()


@pytest.mark.parametrize("name", FILES)
def test_what_the_binder_reads_is_declared_and_what_is_required_is_there(name):
    f = GGUFFile.from_buffer(FILES[name], f"{name}.gguf")
    arch, cfg = load_config(f)
    declared = {n: (d, cfg) for d, _bid, n in instances(arch.tensors, cfg)}
    _cfg, _weights, binder = bind_weights(f)
    assert set(binder.read) <= set(declared)
    for n, (d, _) in declared.items():
        if d.required:
            assert n in f.tensors, n
        if n in f.tensors:
            assert tuple(f.tensors[n].shape) == d.dims(cfg), n
    assert binder.unread() == []


@pytest.mark.parametrize("arch", ARCHES)
def test_a_missing_required_tensor_is_refused_by_name(arch):
    data = FILES[arch]
    f = GGUFFile.from_buffer(data, f"{arch}.gguf")
    a, cfg = load_config(f)
    for d, _bid, name in instances(a.tensors, cfg):
        if not d.required or (d.per_layer and not name.startswith("blk.0.")):
            continue
        g = GGUFFile.from_buffer(data, "edited.gguf")
        del g.tensors[name]
        with pytest.raises(ModelError, match=rf"needs tensor {re.escape(repr(name))}, which is missing"):
            bind_weights(g)


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_every_slot_is_a_field_of_the_weight_structures(arch):
    from llamay.arch.weights import LayerWeights, ModelWeights, _hints, _structure

    for d in ARCHITECTURES[arch].tensors:
        cls = LayerWeights if d.per_layer else ModelWeights
        for slot in d.slots:  # a fused tensor fills one slot per piece
            owner = cls
            *path, last = slot.split(".")
            for part in path:
                owner = _structure(owner, part, _hints(owner)[part])
            assert last in {fl.name for fl in dataclasses.fields(owner)}, slot


def test_a_tensor_declared_for_some_layers_only_is_bound_there_only():
    f = GGUFFile.from_buffer(FILES["llama"], "llama.gguf")
    arch, cfg = load_config(f)
    gate = weight(T.FFN_GATE)
    decls = tuple(
        dataclasses.replace(d, layers=lambda _cfg, bid: bid == 0) if d.name == gate else d for d in arch.tensors
    )
    b = Binder(f)
    w = bind_declared(b, decls, cfg)
    assert w.layers[0].ffn.gate is not None and w.layers[1].ffn.gate is None
    assert [t.name for t in b.unread()] == ["blk.1.ffn_gate.weight"]
