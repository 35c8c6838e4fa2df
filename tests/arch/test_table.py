"""The README's table of architectures is the registry's (`llamay.arch.table`), and a model whose
architecture field names only its block says what it identifies itself as."""

from __future__ import annotations

from llamay.arch import ALIASES, ARCHITECTURES
from llamay.arch.refused import REFUSED
from llamay.arch.table import BEGIN, END, markdown
from llamay.gguf import GGUFFile, GGUFWriter
from llamay.model_card import describe, identity
from tests import paths
from tests.models.tiny import build_tiny


def test_the_readme_table_is_generated_from_the_registry():
    text = (paths.REPO / "README.md").read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    assert text[start:end] == markdown(), "run scripts/gen_readme_architectures.py"


def test_the_table_names_every_architecture_alias_and_refusal():
    table = markdown()
    for name in (*ARCHITECTURES, *ALIASES, *REFUSED):
        assert f"`{name}`" in table, name


def _renamed(arch: str, **general: str) -> GGUFFile:
    src = GGUFFile.from_buffer(build_tiny(arch).to_bytes(), "src.gguf")
    w = GGUFWriter()
    for fld in src.fields.values():
        if fld.key not in ("general.name", "general.basename"):
            w.add(fld.key, fld.value, fld.type)
    for key, value in general.items():
        w.add(f"general.{key}", value)
    for t in sorted(src.tensors.values(), key=lambda t: t.index):
        w.add_tensor(t.name, t.type, t.shape, bytes(src.tensor_data(t)))
    return GGUFFile.from_buffer(w.to_bytes(), f"{arch}.gguf")


def test_a_vehicle_architecture_says_what_the_model_is():
    f = _renamed("llama", name="Mistral 7B Instruct v0.3", basename="Mistral")
    assert identity(f) == {"identifies_as": "Mistral", "identified_by": "general.basename"}
    assert describe(f)["architecture"]["identifies_as"] == "Mistral"
    f = _renamed("llama", name="TinyLlama 1.1B Chat")
    assert identity(f) == {"identifies_as": "TinyLlama 1.1B Chat", "identified_by": "general.name"}


def test_a_model_named_after_its_architecture_needs_no_identity():
    assert identity(_renamed("qwen2", name="Qwen2.5 0.5B Instruct")) == {}
    assert identity(_renamed("llama")) == {}
