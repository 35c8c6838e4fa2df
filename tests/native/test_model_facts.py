"""What `/models/index.json` says each model is (`llamay.native.model_facts`, `llamay.model_card.summary`),
checked against gguf-py's reading of the same files: architecture, parameter count, the quantisation holding the
most bytes, the context, chat / text / embedding; a file that is no GGUF is listed with why, naming it as
served (never by its path on this machine)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests import paths

pytest.importorskip("starlette")  # the native server's extra (absent under Pyodide)
gguf = pytest.importorskip("gguf")  # gguf-py: the reference reader

from llamay.native.model_facts import model_facts  # noqa: E402
from llamay.native.static_site import model_index  # noqa: E402
from tests.browser.server import place  # noqa: E402

pytestmark = pytest.mark.native_only


def reference(path) -> dict:
    """The same facts as gguf-py reads them."""
    r = gguf.GGUFReader(path)

    def field(key):
        f = r.fields.get(key)
        return None if f is None else f.contents()

    arch = field("general.architecture")
    by_bytes: Counter[str] = Counter()
    for t in r.tensors:
        by_bytes[t.tensor_type.name] += int(t.n_bytes)
    file_type = field("general.file_type")
    quant = by_bytes.most_common(1)[0][0]
    if file_type is not None:
        quant = gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    return {
        "architecture": arch,
        "parameters": sum(int(t.n_elements) for t in r.tensors),
        "quantization": quant,
        "context_length": field(f"{arch}.context_length"),
        "chat_template": field("tokenizer.chat_template") is not None,
        "title": field("general.name"),
    }


MODELS = {"stories": (paths.stories("q8_0"), "text"), "minilm": (paths.MINILM, "embedding")}


@pytest.mark.parametrize("which", sorted(MODELS))
def test_facts_agree_with_gguf_py(which):
    path, kind = MODELS[which]
    facts, ref = model_facts(path, path.name), reference(path)
    assert facts["kind"] == kind and facts["supported"] is True
    for key in ("architecture", "parameters", "quantization", "context_length", "title"):
        assert facts[key] == ref[key], key
    assert (facts["kind"] == "chat") == ref["chat_template"]


def test_a_chat_model_is_chat():
    path = paths.registry_model(paths.SMOLLM2)  # skipped locally when absent
    facts, ref = model_facts(path, path.name), reference(path)
    assert ref["chat_template"] and facts["kind"] == "chat"
    assert facts["parameters"] == ref["parameters"] and facts["parameter_size"] == "134.5M"
    assert facts["quantization"] == ref["quantization"] == "Q4_1"


def test_the_index_lists_what_each_model_is_and_why_one_cannot_be_used(tmp_path):
    from tests.browser.conftest import write_unsupported_architecture

    place(paths.stories("f32"), tmp_path)
    (tmp_path / "notes.gguf").write_bytes(b"These are notes, not a model.\n")
    write_unsupported_architecture(paths.stories("q8_0"), tmp_path / "mamba.gguf")
    index = {m["name"]: m for m in json.loads(json.dumps(model_index(tmp_path)))}  # as JSON, as served
    assert sorted(index) == ["mamba.gguf", "notes.gguf", "stories260K-f32.gguf"]
    stories = index["stories260K-f32.gguf"]
    assert stories["size"] == paths.stories("f32").stat().st_size
    assert (stories["kind"], stories["quantization"], stories["parameter_size"]) == ("text", "F32", "260K")
    notes = index["notes.gguf"]
    assert set(notes) == {"name", "url", "size", "error"}
    assert "not a GGUF file" in notes["error"] and notes["error"].startswith("notes.gguf")
    assert str(tmp_path) not in json.dumps(index)  # no path of this machine reaches the page
    mamba = index["mamba.gguf"]
    assert mamba["supported"] is False and "architecture 'mamba' is a state-space model" in mamba["error"]
    assert mamba["architecture"] == "mamba" and mamba["parameters"] == reference(tmp_path / "mamba.gguf")["parameters"]


def test_facts_are_read_again_when_the_file_changes(tmp_path):
    f = place(paths.stories("q8_0"), tmp_path, "m.gguf")
    assert model_facts(f, "m.gguf")["quantization"] == "Q8_0"
    f.unlink()
    place(paths.stories("f32"), tmp_path, "m.gguf")
    assert model_facts(f, "m.gguf")["quantization"] == "F32"


def test_file_type_names_are_gguf_py_s():
    from llamay.gguf.constants import FILE_TYPE_GUESSED, FILE_TYPES

    ref = {m.value: m.name.removeprefix("MOSTLY_").removeprefix("ALL_") for m in gguf.LlamaFileType}
    assert ref.pop(FILE_TYPE_GUESSED) == "GUESSED"
    assert {k: v for k, v in FILE_TYPES.items() if k in ref} == ref
