"""The tokenizer keys checked before use (`vocab.check_vocab`): their types, token arrays as long as the token
list, merges of two parts, special ids within the token list; a model load runs the check, so a bad vocabulary
is refused at load, not at the first request. Each refusal names the file, the key, its type and value."""

from __future__ import annotations

import math
import re

import pytest

from llamay.errors import ModelError
from llamay.gguf import GGUFArray, GGUFFile, GGUFValueType
from llamay.model import Model
from llamay.tokenizer import Vocab
from tests import paths
from tests.gguf.helpers import edited, llamacpp_loads

V = GGUFValueType
STORIES = paths.stories("f32")  # SentencePiece, 512 tokens
GPT2 = paths.VOCAB / "ggml-vocab-gpt-2.gguf"
BERT = paths.VOCAB / "ggml-vocab-bert-bge.gguf"


def _with_item(path, key: str, i: int, value) -> dict:
    with GGUFFile.open(path) as f:
        items = list(f.fields[key].value)
        item_type = f.fields[key].value.item_type
    items[i] = value
    return {key: (GGUFArray(item_type, items), V.ARRAY)}


def _resized(key: str, n: int, item=None) -> dict:
    with GGUFFile.open(STORIES) as f:
        items = list(f.fields[key].value)
        item_type = f.fields[key].value.item_type if item is None else item
    items = (items + items)[:n]
    return {key: (GGUFArray(item_type, [float(x) if item == V.FLOAT32 else x for x in items]), V.ARRAY)}


CASES = [
    # (file, fields, what the refusal says)
    (STORIES, {"tokenizer.ggml.bos_token_id": (math.nan, V.FLOAT32)},
     r"'tokenizer\.ggml\.bos_token_id' = FLOAT32 nan: must be an integer token id"),
    (STORIES, {"tokenizer.ggml.bos_token_id": (9999, V.UINT32)},
     r"'tokenizer\.ggml\.bos_token_id' = UINT32 9999: is not a token id: the token list has 512 tokens \(ids 0 to"),
    (STORIES, {"tokenizer.ggml.eos_token_id": (-5, V.INT32)}, r"'tokenizer\.ggml\.eos_token_id' = INT32 -5: is not a"),
    (STORIES, {"tokenizer.ggml.padding_token_id": ("0", V.STRING)}, r"= STRING '0': must be an integer token id"),
    (STORIES, {"tokenizer.ggml.prefix_token_id": (512, V.UINT32)}, r"'tokenizer\.ggml\.prefix_token_id' = UINT32 512"),
    (BERT, {"tokenizer.ggml.cls_token_id": (30522, V.UINT32)}, r"'tokenizer\.ggml\.cls_token_id' = UINT32 30522: is"),
    (STORIES, _resized("tokenizer.ggml.scores", 513),
     r"'tokenizer\.ggml\.scores' = ARRAY of 513 FLOAT32 \[.*\]: must have one item per token: the token list has 512"),
    (STORIES, _resized("tokenizer.ggml.token_type", 300), r"'tokenizer\.ggml\.token_type' = ARRAY of 300 INT32 "),
    (STORIES, _resized("tokenizer.ggml.token_type", 512, V.FLOAT32), r"token_type' = .*: must be an ARRAY of INT32"),
    (STORIES, {"tokenizer.ggml.tokens": (GGUFArray(V.INT32, list(range(512))), V.ARRAY)},
     r"'tokenizer\.ggml\.tokens' = ARRAY of 512 INT32 \[0, 1, 2, .*: must be an ARRAY of STRING"),
    (STORIES, _with_item(STORIES, "tokenizer.ggml.tokens", 300, "caf\udcc3"),
     r"'tokenizer\.ggml\.tokens' item 300 = 'caf\\udcc3': not valid UTF-8"),
    (STORIES, {"tokenizer.ggml.add_bos_token": (1, V.UINT8)}, r"'tokenizer\.ggml\.add_bos_token' = UINT8 1: must be a"),
    (STORIES, {"tokenizer.ggml.model": (1, V.UINT32)}, r"'tokenizer\.ggml\.model' = UINT32 1: must be a STRING"),
    (STORIES, {"tokenizer.chat_template": (GGUFArray(V.STRING, ["{{x}}"]), V.ARRAY)}, r"chat_template' = .*: must be"),
    (STORIES, {"general.name": (7, V.INT32)}, r"'general\.name' = INT32 7: must be a STRING"),
    (GPT2, _with_item(GPT2, "tokenizer.ggml.merges", 10, "abc"),
     r"'tokenizer\.ggml\.merges' item 10 = 'abc': not two parts and a space"),
    (GPT2, _with_item(GPT2, "tokenizer.ggml.merges", 11, "ab "), r"merges' item 11 = 'ab ': not two parts"),
    (GPT2, {"tokenizer.ggml.pre": ("no-such-pre", V.STRING)}, r"unknown pre-tokenizer tokenizer\.ggml\.pre = 'no-such"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "fields", "says"), CASES, ids=lambda x: getattr(x, "name", None))
def test_a_bad_tokenizer_key_is_refused_by_name(path, fields, says):
    f = GGUFFile.from_buffer(edited(path, fields), "edited.gguf")
    with pytest.raises(ModelError) as e:
        Vocab.from_gguf(f)
    assert str(e.value).startswith("edited.gguf: ")
    assert re.search(says, str(e.value)), str(e.value)


def test_an_id_past_the_list_is_refused_but_no_token_is_absent():
    """Converters write 2^32-1 (or -1) for an absent token; llama.cpp keeps its default id then, and so do we.
    Any other id past the token list is refused (llama.cpp warns and keeps its default)."""
    bad = GGUFFile.from_buffer(edited(STORIES, {"tokenizer.ggml.seperator_token_id": (512, V.UINT32)}), "edited.gguf")
    with pytest.raises(ModelError, match=r"seperator_token_id' = UINT32 512: is not a token id"):
        Vocab.from_gguf(bad)
    for value, vtype in ((4294967295, V.UINT32), (-1, V.INT32)):
        fields = {"tokenizer.ggml.seperator_token_id": (value, vtype), "tokenizer.ggml.eos_token_id": (value, vtype)}
        vocab = Vocab.from_gguf(GGUFFile.from_buffer(edited(STORIES, fields), "edited.gguf"))
        assert vocab.ids["sep"] is None and vocab.ids["eos"] == 2  # the SentencePiece default


def test_the_model_load_checks_the_vocabulary():
    f = GGUFFile.from_buffer(edited(STORIES, {"tokenizer.ggml.bos_token_id": (math.nan, V.FLOAT32)}), "edited.gguf")
    with pytest.raises(ModelError, match=r"bos_token_id' = FLOAT32 nan"):
        Model(f, "portable")  # before any tokenizer is built


@pytest.mark.native_only
def test_llama_cpp_refuses_a_float_token_id_too(tmp_path):
    pytest.importorskip("xllamacpp")
    data = edited(STORIES, {"tokenizer.ggml.bos_token_id": (math.nan, V.FLOAT32)})
    assert not llamacpp_loads(data, tmp_path / "edited.gguf")
    with pytest.raises(ModelError, match="must be an integer token id"):
        Model(GGUFFile.from_buffer(data, "edited.gguf"), "portable")
