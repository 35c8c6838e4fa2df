"""The tiny random-weight models: they bind with nothing left unread, are reproducible, and llama.cpp runs them."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from llamay.arch import bind_weights
from llamay.arch.config import Pooling
from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFFile
from tests import paths
from tests.models.tiny import ARCHES, SPECS, build_tiny, write_tiny

GOLDENS = paths.REPO / "tests" / "goldens"


def written(arch: str, tmp_path, **kw) -> GGUFFile:
    path = tmp_path / f"tiny-{arch}.gguf"
    write_tiny(arch, path, **kw)
    return GGUFFile.open(path)


@pytest.mark.parametrize("arch", ARCHES)
def test_binds_with_nothing_unread(arch, tmp_path):
    with written(arch, tmp_path) as f:
        cfg, weights, binder = bind_weights(f)
        assert [t.name for t in binder.unread()] == []
        spec = SPECS[arch]
        assert (cfg.arch, cfg.n_layer, cfg.n_embd, cfg.head_dim) == (
            spec.arch,
            spec.n_layer,
            spec.n_embd,
            spec.head_dim,
        )
        assert cfg.n_vocab == (30522 if spec.encoder else 512)
        assert (weights.output is not None) == spec.untied_output


def test_each_architecture_has_its_distinguishing_pieces(tmp_path):
    cfgs = {}
    for arch in ARCHES:
        with written(arch, tmp_path) as f:
            cfgs[arch] = bind_weights(f)[0]
    assert cfgs["llama"].tied_output and cfgs["llama"].n_head_kv < cfgs["llama"].n_head
    assert cfgs["qwen2"].qkv_bias and not cfgs["qwen2"].tied_output
    qwen3 = cfgs["qwen3"]
    assert qwen3.qk_norm and qwen3.n_head * qwen3.head_dim != qwen3.n_embd
    gemma = cfgs["gemma3"]
    assert gemma.head_dim == 2 * gemma.n_embd // gemma.n_head
    assert gemma.sliding_window == 8 and True in gemma.swa_layers and False in gemma.swa_layers
    bert = cfgs["bert"]
    assert bert.pooling == Pooling.MEAN and not bert.causal and bert.qkv_bias


def test_is_reproducible_and_seeded():
    assert build_tiny("llama").to_bytes() == build_tiny("llama").to_bytes()
    assert build_tiny("llama", seed=1).to_bytes() != build_tiny("llama").to_bytes()


@pytest.mark.parametrize("arch", ARCHES)
def test_matches_the_file_the_golden_was_made_from(arch, tmp_path):
    golden = json.loads((GOLDENS / f"tiny-{arch}.json").read_text())
    path = tmp_path / f"tiny-{arch}.gguf"
    write_tiny(arch, path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == golden["model"]["sha256"]


def test_a_quantised_variant_binds(tmp_path):
    pytest.importorskip("llamay.quants")
    with written("qwen3", tmp_path, ggml_type=GGMLType.Q8_0) as f:
        types = {t.name: t.type for t in f.tensors.values()}
        assert types["blk.0.attn_q.weight"] == GGMLType.Q8_0
        assert types["blk.0.ffn_down.weight"] == GGMLType.Q8_0  # rows of 96 = 3 blocks
        assert types["blk.0.attn_q_norm.weight"] == GGMLType.F32
        assert bind_weights(f)[2].unread() == []


def test_unknown_architecture_is_refused():
    with pytest.raises(ValueError, match=r"no tiny model for architecture 'mamba'; known: llama"):
        build_tiny("mamba")


@pytest.mark.native_only
@pytest.mark.parametrize("arch", ARCHES)
def test_llama_cpp_runs_it(arch, tmp_path):
    xlc = pytest.importorskip("xllamacpp")
    path = tmp_path / f"tiny-{arch}.gguf"
    write_tiny(arch, path)
    p = xlc.CommonParams()
    p.model.path = str(path)
    p.n_ctx = SPECS[arch].n_ctx
    p.n_parallel = 1
    p.cpuparams.n_threads = 1
    p.cpuparams_batch.n_threads = 1
    p.warmup = False
    p.verbosity = -1
    p.embedding = SPECS[arch].encoder
    server = xlc.Server(p)
    try:
        if SPECS[arch].encoder:
            (e,) = [d["embedding"] for d in server.handle_embeddings({"input": ["a man is eating food."]})["data"]]
            assert len(e) == SPECS[arch].n_embd
            assert math.isclose(math.fsum(x * x for x in e), 1.0, rel_tol=1e-5)
        else:
            r = server.handle_completions(
                {"prompt": [1, 403, 407, 261, 378], "max_tokens": 2, "temperature": 0, "n_probs": 5}
            )
            assert r["usage"]["completion_tokens"] == 2
            # the server leaves out the probabilities of a token that ends inside a UTF-8 sequence
            for step in (r["choices"][0]["logprobs"] or {}).get("content") or []:
                assert all(math.isfinite(t["logprob"]) and t["logprob"] <= 0 for t in step["top_logprobs"])
    finally:
        del server
