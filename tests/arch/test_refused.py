"""Architectures refused at load: each by name, with why and what does work, before any tensor is bound."""

from __future__ import annotations

import pytest

from llamay.arch import ARCHITECTURES, supported
from llamay.arch.refused import REFUSED
from llamay.errors import UnsupportedArchitectureError
from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFValueType, GGUFWriter
from llamay.model import load_model

V = GGUFValueType
ISSUE_REFUSALS = ("mamba", "mamba2", "rwkv6", "rwkv7", "jamba", "falcon-h1", "granitehybrid", "deepseek2", "t5",
                  "clip")  # fmt: skip


def tiny_file(arch: str, path) -> None:
    """A small file of `arch` as its converter names it: the usual keys and a few tensors."""
    w = GGUFWriter()
    w.add("general.architecture", arch)
    w.add("general.name", f"tiny {arch}")
    for key, value in (("block_count", 1), ("embedding_length", 8), ("context_length", 16)):
        w.add(f"{arch}.{key}", value, V.UINT32)
    w.add("tokenizer.ggml.model", "llama")
    w.add("tokenizer.ggml.tokens", ["<unk>", "a", "b"], V.ARRAY)
    w.add_tensor("token_embd.weight", GGMLType.F32, (8, 3), bytes(4 * 24))
    w.add_tensor("blk.0.ssm_in.weight", GGMLType.F32, (8, 8), bytes(4 * 64))
    w.write(path)


def test_the_issue_refusals_are_all_known():
    assert set(ISSUE_REFUSALS) <= set(REFUSED)
    assert not set(REFUSED) & set(ARCHITECTURES)


@pytest.mark.parametrize("arch", sorted(REFUSED))
def test_a_refused_architecture_is_refused_at_load_by_name(arch, tmp_path):
    path = tmp_path / f"tiny-{arch}.gguf"
    tiny_file(arch, path)
    with pytest.raises(UnsupportedArchitectureError) as e:
        load_model(path, "portable")
    msg = str(e.value)
    assert f"tiny-{arch}.gguf: architecture {arch!r} is {REFUSED[arch]}" in msg
    assert "refused, not half-loaded" in msg
    assert "Supported: " + ", ".join(supported()) in msg  # what does work


def test_a_negative_olmo_clamp_is_refused_by_its_key(tmp_path):
    """A clamp runs (tests/model: tiny olmo-clamp against llama.cpp); a negative one is no clamp, and refused."""
    from llamay.errors import ModelError
    from llamay.gguf import GGUFFile
    from tests.models.tiny import build_tiny

    src = GGUFFile.from_buffer(build_tiny("olmo").to_bytes(), "src.gguf")
    w = GGUFWriter()
    for fld in src.fields.values():
        w.add(fld.key, fld.value, fld.type)
    w.add("olmo.attention.clamp_kqv", -8.0, V.FLOAT32)
    for t in sorted(src.tensors.values(), key=lambda t: t.index):
        w.add_tensor(t.name, t.type, t.shape, bytes(src.tensor_data(t)))
    w.write(tmp_path / "clamped.gguf")
    with pytest.raises(ModelError, match=r"'olmo\.attention\.clamp_kqv' = FLOAT32 -8\.0: must be 0 \(none\) or"):
        load_model(tmp_path / "clamped.gguf", "portable")
