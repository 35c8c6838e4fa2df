"""The audit at load: a file whose tensors disagree with its metadata — layers beyond or short of the block
count, tensors no part of the architecture reads, embedding rows that are not the token list — is refused by
`Model` (and `llamay info` shows why), naming the key or tensor and the value. llama.cpp refuses each of these
files too."""

from __future__ import annotations

import re

import pytest

from llamay.arch import bind_weights
from llamay.errors import ModelError
from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFArray, GGUFFile, GGUFValueType
from llamay.model import Model
from llamay.model_card import tensor_audit
from tests import paths
from tests.gguf.helpers import edited, llamacpp_loads
from tests.models.tiny import build_tiny

V = GGUFValueType
STORIES = paths.stories("f32")  # 5 layers, 512 tokens, tied embeddings


def _shorter_token_list(n: int, *, keep_vocab_size: bool = False) -> dict:
    with GGUFFile.open(STORIES) as f:
        keys = ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type")
        fields = {k: (GGUFArray(f.fields[k].value.item_type, f.fields[k].value[:n]), V.ARRAY) for k in keys}
    return fields if keep_vocab_size else {**fields, "llama.vocab_size": None}


def _extra_tensor(ts: list) -> list:
    return [*ts, ("mystery.weight", GGMLType.F32, (4,), bytes(16))]


CASES = {
    "fewer-blocks": (
        {"llama.block_count": (4, V.UINT32)},
        None,
        r"key 'llama\.block_count' = 4, but the file has tensors of layer 4 \(such as 'blk\.4\.attn_norm\.weight'\)",
    ),
    "more-blocks": (
        {"llama.block_count": (6, V.UINT32)},
        None,
        r"key 'llama\.block_count' = 6, but the file has no tensors for layer\(s\) 5 \(no 'blk\.5\.\*'\)",
    ),
    "short-token-list": (
        _shorter_token_list(300),
        None,
        r"tensor 'token_embd\.weight' has 512 rows \(one per token\), but the vocabulary has 300 tokens",
    ),
    # the file still says 512 tokens (and has 512 embedding rows): this one loaded before and ran as garbage
    "short-token-list-vocab-size-kept": (
        _shorter_token_list(300, keep_vocab_size=True),
        None,
        r"key 'llama\.vocab_size' = UINT32 512: but the token list \(tokenizer\.ggml\.tokens\) has 300 tokens",
    ),
    "unread-tensor": (
        None,
        _extra_tensor,
        r"1 of 48 tensors are not used by architecture 'llama': 'mystery\.weight'",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_file_whose_tensors_disagree_with_its_metadata_is_refused_at_load(case):
    fields, tensors, says = CASES[case]
    f = GGUFFile.from_buffer(edited(STORIES, fields, tensors), "edited.gguf")
    with pytest.raises(ModelError, match="^edited\\.gguf: " + says):
        Model(f, "portable")
    audit = tensor_audit(f)
    if case == "unread-tensor":  # the audit lists it; a load refuses it
        assert audit["status"] == "unread-tensors" and audit["unread"] == ["mystery.weight"]
    else:
        assert audit["status"] == "refused"
        assert re.search(says, audit["message"])


def test_the_untied_lm_head_has_one_row_per_token():
    w = build_tiny("qwen2")
    w.tensors = [
        (n, t, (s[0], 300), bytes(d)[: s[0] * 300 * 4]) if n == "output.weight" else (n, t, s, d)
        for n, t, s, d in w.tensors
    ]
    f = GGUFFile.from_buffer(w.to_bytes(), "qwen2.gguf")
    with pytest.raises(ModelError, match=r"tensor 'output\.weight' has 300 rows \(one per token\), but the vocabulary"):
        bind_weights(f)


@pytest.mark.native_only
@pytest.mark.parametrize("case", CASES)
def test_llama_cpp_refuses_them_too(case, tmp_path):
    pytest.importorskip("xllamacpp")
    fields, tensors, says = CASES[case]
    data = edited(STORIES, fields, tensors)
    assert not llamacpp_loads(data, tmp_path / "edited.gguf")
    with pytest.raises(ModelError, match=says):
        Model(GGUFFile.from_buffer(data, "edited.gguf"), "portable")
