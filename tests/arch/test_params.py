"""Each architecture's own hyper-parameters are declared as data (`core/arch/params.py`): every declared key is
read from the file and checked by Meta, so a value of the wrong GGUF type is refused naming that key."""

from __future__ import annotations

import dataclasses
import re

import pytest

from llamay.arch import ARCHITECTURES, load_config
from llamay.arch.params import keys_of
from llamay.errors import ModelError
from llamay.gguf import GGUFFile, GGUFValueType
from tests.gguf.helpers import edited
from tests.models.tiny import ARCHES, SPECS, build_tiny

V = GGUFValueType
WRONG = {"int": ("8", V.STRING), "float": ("1", V.STRING), "eps": ("1", V.STRING), "bool": (1, V.UINT8),
         "str": (1, V.UINT32)}  # fmt: skip


def _declared() -> list[tuple[str, str, str]]:
    """(arch, field, kind) of every keyed field of a tiny-modelled architecture."""
    out = []
    for arch in ARCHES:
        with GGUFFile.from_buffer(build_tiny(arch).to_bytes(), f"{arch}.gguf") as f:
            params = load_config(f)[1].params
        out += [(arch, name, k.kind) for name, k in keys_of(type(params)).items()]
    return out


def test_every_architecture_has_its_params():
    for arch in ARCHES:
        with GGUFFile.from_buffer(build_tiny(arch).to_bytes(), f"{arch}.gguf") as f:
            cfg = load_config(f)[1]
        assert dataclasses.is_dataclass(cfg.params), arch
        for name in (f.name for f in dataclasses.fields(cfg.params)):  # reachable as cfg.<name> too
            assert getattr(cfg, name) == getattr(cfg.params, name)
    assert {SPECS[a].arch for a in ARCHES} == set(ARCHITECTURES)


@pytest.mark.parametrize(("arch", "name", "kind"), _declared())
def test_a_declared_key_of_the_wrong_type_is_refused_by_name(arch, name, kind, tmp_path):
    with GGUFFile.from_buffer(build_tiny(arch).to_bytes(), f"{arch}.gguf") as f:
        k = keys_of(type(load_config(f)[1].params))[name]
    full = k.template.format(arch=SPECS[arch].arch)  # mixtral: a llama file
    value, vtype = WRONG[kind]
    path = tmp_path / f"{arch}.gguf"
    path.write_bytes(build_tiny(arch).to_bytes())
    data = edited(path, {full: (value, vtype)})
    with pytest.raises(ModelError, match=rf"^edited\.gguf: key {re.escape(repr(full))} = {vtype.name} "):
        load_config(GGUFFile.from_buffer(data, "edited.gguf"))


def test_an_unknown_hyper_parameter_names_the_architecture():
    with GGUFFile.from_buffer(build_tiny("llama").to_bytes(), "llama.gguf") as f:
        cfg = load_config(f)[1]
    with pytest.raises(AttributeError, match=r"'llama' has no hyper-parameter 'pooling'"):
        _ = cfg.pooling
