"""Architecture recognition, binding and the tensor audit."""

from __future__ import annotations

import pytest

from llamay.arch import ALIASES, ARCHITECTURES, bind_weights, get_architecture
from llamay.errors import ModelError, UnsupportedArchitectureError, UnsupportedTypeError
from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFFile, GGUFValueType, GGUFWriter, open_gguf
from llamay.model_card import tensor_audit
from tests import paths


def rewritten(path, *, arch=None, drop=(), extra=(), reshape=None) -> GGUFFile:
    """The file at `path` rewritten in memory with a changed architecture or tensor list."""
    with open_gguf(path) as f:
        w = GGUFWriter()
        for fld in f.fields.values():
            value = fld.value
            if fld.key == "general.architecture" and arch:
                value = arch
            key = fld.key.replace("llama.", f"{arch}.", 1) if arch and fld.key.startswith("llama.") else fld.key
            w.add(key, value, fld.type)
        for t in sorted(f.tensors.values(), key=lambda t: t.index):
            if t.name in drop:
                continue
            shape = t.shape
            if reshape and t.name == reshape[0]:
                shape = reshape[1]
            w.add_tensor(t.name, t.type, shape, bytes(f.tensor_data(t)))
        for name in extra:
            w.add_tensor(name, GGMLType.F32, (4,), bytes(16))
        return GGUFFile.from_buffer(w.to_bytes(), "edited.gguf")


def test_unknown_architecture_is_refused_with_the_list():
    with pytest.raises(UnsupportedArchitectureError, match=r"architecture 'mamba9' is not supported; supported: bert"):
        get_architecture("mamba9")
    with pytest.raises(UnsupportedArchitectureError, match=r"'general\.architecture' is missing"):
        get_architecture(None)


def test_aliases_resolve():
    for alias, target in ALIASES.items():
        assert get_architecture(alias) is ARCHITECTURES[target]


def test_unknown_architecture_in_a_file():
    f = rewritten(paths.stories("f32"), arch="rwkv99")
    with pytest.raises(UnsupportedArchitectureError, match=r"edited\.gguf: architecture 'rwkv99'"):
        bind_weights(f)
    assert tensor_audit(f)["status"] == "refused"


def test_missing_tensor_is_named():
    f = rewritten(paths.stories("f32"), drop=("blk.3.ffn_up.weight",))
    with pytest.raises(ModelError, match=r"needs tensor 'blk\.3\.ffn_up\.weight', which is missing"):
        bind_weights(f)


def test_wrong_shape_is_named():
    f = rewritten(paths.stories("f32"), reshape=("blk.1.attn_k.weight", (32, 64)))
    with pytest.raises(ModelError, match=r"'blk\.1\.attn_k\.weight' has shape \[32, 64\], expected \[64, 32\]"):
        bind_weights(f)


def test_audit_reports_unread_tensors():
    f = rewritten(paths.stories("f32"), extra=("blk.0.attn_sinks.weight", "mystery.bias"))
    audit = tensor_audit(f)
    assert audit["status"] == "unread-tensors"
    assert audit["unread"] == ["blk.0.attn_sinks.weight", "mystery.bias"]


def test_unrunnable_type_is_refused_by_name():
    with (
        open_gguf(paths.stories("q4_0")) as f,
        pytest.raises(UnsupportedTypeError, match=r"is Q4_0, which this engine"),
    ):
        bind_weights(f, runnable_types=frozenset({GGMLType.F32}))


def test_missing_hyperparameter_is_named():
    with open_gguf(paths.stories("f32")) as src:
        w = GGUFWriter()
        for fld in src.fields.values():
            if fld.key != "llama.block_count":
                w.add(fld.key, fld.value, fld.type)
    f = GGUFFile.from_buffer(w.to_bytes(), "nokey.gguf")
    with pytest.raises(ModelError, match=r"needs metadata key 'llama\.block_count'"):
        bind_weights(f)


@pytest.mark.parametrize("type_name", paths.STORIES_TYPES)
def test_stories_audit_is_clean(type_name):
    with open_gguf(paths.stories(type_name)) as f:
        cfg, weights, binder = bind_weights(f)
        assert binder.unread() == []
        assert (cfg.n_layer, cfg.n_head, cfg.n_head_kv, cfg.head_dim) == (5, 8, 4, 8)
        assert cfg.tied_output and weights.lm_head is weights.token_embd


def test_minilm_binds_as_bert():
    with open_gguf(paths.MINILM) as f:
        cfg, _w, binder = bind_weights(f)
        assert cfg.arch == "bert" and cfg.pooling.value == "mean" and not cfg.causal
        assert binder.unread() == []


def test_gemma3_config():
    with open_gguf(paths.registry_model(paths.GEMMA3)) as f:
        cfg, _w, binder = bind_weights(f)
    assert binder.unread() == []
    assert cfg.sliding_window == 512 and cfg.rope.base_swa == 10000.0
    assert [i for i, swa in enumerate(cfg.swa_layers) if not swa] == [5, 11, 17]
    assert cfg.head_dim == 256 and cfg.n_head_kv == 1


def test_smollm2_config():
    with open_gguf(paths.registry_model(paths.SMOLLM2)) as f:
        cfg, _w, binder = bind_weights(f)
    assert binder.unread() == []
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.n_head_kv, cfg.n_vocab) == (30, 576, 9, 3, 49152)


def test_per_layer_head_counts_must_agree():
    with open_gguf(paths.stories("f32")) as src:
        w = GGUFWriter()
        for fld in src.fields.values():
            if fld.key == "llama.attention.head_count_kv":
                from llamay.gguf import GGUFArray

                w.add(fld.key, GGUFArray(GGUFValueType.UINT32, [4, 4, 2, 4, 4]))
            else:
                w.add(fld.key, fld.value, fld.type)
    with pytest.raises(ModelError, match="varies per layer"):
        bind_weights(GGUFFile.from_buffer(w.to_bytes(), "x.gguf"))
