"""llamay.load: a name from the stores with its layers applied (a fake Ollama store in Ollama's layout), bytes read
like the mapped file, and sources it cannot open refused by name."""

from __future__ import annotations

import pytest

import llamay
from tests import paths


@pytest.mark.native_only
def test_a_name_loads_from_the_stores_with_its_layers(tmp_path, monkeypatch):
    from tests.native.test_store_ollama import PARAMS, SYSTEM, fake_ollama

    monkeypatch.setenv("LLAMAY_MODELS", str(tmp_path / "store"))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    fake_ollama(tmp_path / "ollama", "fake")
    with llamay.load("fake", backend="portable", pull=False) as model:
        assert model.name == "fake:latest"
        assert model.defaults.sampling == {"temp": 0} and model.defaults.max_tokens == PARAMS["num_predict"]
        prompt = model.apply_chat_template([{"role": "user", "content": "hi"}])
        assert prompt.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>")
        with llamay.load(paths.stories("f32"), backend="portable") as plain:
            want = plain.complete("Once upon a time", PARAMS["num_predict"], temperature=0)
        assert model.complete("Once upon a time") == want  # the PARAMETERs are the defaults
    with pytest.raises(llamay.LlamayError, match="no model named 'nothing-here'"):
        llamay.load("nothing-here", pull=False)


def test_sources_that_cannot_be_opened():
    with pytest.raises(llamay.ModelSourceError, match="does not download"):
        llamay.load("https://example.com/m.gguf")
    with pytest.raises(llamay.LlamayError, match="no such model file"):
        llamay.load(str(paths.STORIES / "missing.gguf"))
    with pytest.raises(llamay.ModelSourceError, match="a path, a model name or the bytes"):
        llamay.load(42)
    with pytest.raises(llamay.LlamayError, match="<bytes>: offset 0: bad magic"):
        llamay.load(b"definitely not a gguf file at all, padded to some length")
    data = paths.stories("q8_0").read_bytes()
    with llamay.load(bytearray(data), backend="portable") as model, llamay.load(paths.stories("q8_0")) as mapped:
        assert model.complete("Once", 8, temperature=0) == mapped.complete("Once", 8, temperature=0)
