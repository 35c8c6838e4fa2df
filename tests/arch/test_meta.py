"""Hyper-parameters: every key an architecture reads is typed and range-checked before use, and each refusal
names the file, the key, its GGUF type and value (`core/arch/meta.py`)."""

from __future__ import annotations

import math
import re

import pytest

from llamay.arch import bind_weights, load_config
from llamay.errors import LlamayError, ModelError, UnsupportedArchitectureError
from llamay.gguf import GGUFArray, GGUFFile, GGUFValueType
from llamay.model import Model
from tests import paths
from tests.gguf.helpers import edited, llamacpp_loads
from tests.models.tiny import build_tiny

V = GGUFValueType
STORIES = paths.stories("f32")  # llama: 5 layers, 64 wide, 8 heads of 8, 4 KV heads, 512 tokens


def refusal(data: bytes, error: type[LlamayError] = ModelError) -> str:
    f = GGUFFile.from_buffer(data, "edited.gguf")
    with pytest.raises(error) as e:
        load_config(f)
    msg = str(e.value)
    assert msg.startswith("edited.gguf: ")
    return msg


STORIES_CASES = [
    # (key, GGUF type, value, what the refusal says after "= TYPE value: ")
    ("llama.rope.freq_base", V.FLOAT32, 0.0, r"FLOAT32 0\.0: must be a finite number >= 1"),
    ("llama.rope.freq_base", V.FLOAT32, -10000.0, r"FLOAT32 -10000\.0: must be a finite number >= 1"),
    ("llama.rope.freq_base", V.FLOAT32, math.nan, r"FLOAT32 nan: must be a finite number"),
    ("llama.rope.freq_base", V.FLOAT32, math.inf, r"FLOAT32 inf: must be a finite number"),
    ("llama.rope.freq_base", V.STRING, "10000", r"STRING '10000': must be a float"),
    ("llama.rope.dimension_count", V.UINT32, 0, r"UINT32 0: must be at least 2 and at most the head size 8"),
    ("llama.rope.dimension_count", V.UINT32, 1 << 31, r"UINT32 2147483648: must be at least 2 and at most the head"),
    ("llama.rope.dimension_count", V.UINT32, 7, r"UINT32 7: must be even"),
    ("llama.rope.scaling.type", V.STRING, "dynamic", r"'dynamic': is not supported \(none, linear, yarn, longrope\)"),
    ("llama.rope.scaling.type", V.UINT32, 1, r"UINT32 1: must be a STRING"),
    ("llama.rope.scaling.factor", V.FLOAT32, -2.0, r"FLOAT32 -2\.0: must be 0 \(none\) or a finite number in"),
    ("llama.rope.scaling.factor", V.FLOAT32, 1e-30, r"must be 0 \(none\) or a finite number in"),
    ("llama.rope.scale_linear", V.FLOAT32, math.inf, r"FLOAT32 inf: must be 0 \(none\) or a finite number in"),
    ("llama.rope.scaling.attn_factor", V.FLOAT32, 0.0, r"FLOAT32 0\.0: must be a finite number in \(0, "),
    ("llama.rope.scaling.attn_factor", V.UINT32, 1, r"UINT32 1: must be a float"),
    ("llama.rope.scaling.original_context_length", V.FLOAT32, 4096.0, r"FLOAT32 4096\.0: must be an integer"),
    ("llama.rope.scaling.original_context_length", V.UINT64, 1 << 40, r"must be at least 0 and at most 16777216"),
    ("llama.vocab_size", V.FLOAT32, math.nan, r"FLOAT32 nan: must be an integer"),
    ("llama.vocab_size", V.UINT32, 300, r"UINT32 300: but the token list \(tokenizer\.ggml\.tokens\) has 512 tokens"),
    ("llama.block_count", V.FLOAT32, 5.0, r"FLOAT32 5\.0: must be an integer"),
    ("llama.block_count", V.STRING, "5", r"STRING '5': must be an integer"),
    ("llama.block_count", V.UINT32, 0, r"UINT32 0: must be at least 1"),
    ("llama.block_count", V.UINT64, 1 << 40, r"UINT64 1099511627776: must be at least 1 and at most 4096"),
    ("llama.embedding_length", V.UINT32, 0, r"UINT32 0: must be at least 1"),
    ("llama.embedding_length", V.INT32, -64, r"INT32 -64: must be at least 1"),
    ("llama.attention.head_count", V.UINT32, 0, r"UINT32 0: must be at least 1"),
    ("llama.attention.head_count", V.UINT32, 12, r"embedding_length' = UINT32 64: is not a multiple of head_count 12"),
    ("llama.attention.head_count_kv", V.UINT32, 3, r"UINT32 3: must divide head_count 8"),
    ("llama.attention.head_count_kv", V.UINT32, 16, r"UINT32 16: must be at least 1 and at most head_count 8"),
    ("llama.attention.head_count_kv", V.BOOL, True, r"BOOL True: must be an integer"),
    ("llama.attention.key_length", V.UINT32, 0, r"UINT32 0: must be at least 1"),
    ("llama.attention.value_length", V.FLOAT64, 8.0, r"FLOAT64 8\.0: must be an integer"),
    ("llama.feed_forward_length", V.UINT32, 0, r"UINT32 0: must be at least 1"),
    ("llama.context_length", V.UINT32, 0, r"UINT32 0: must be at least 1"),
    ("llama.context_length", V.UINT64, 1 << 40, r"UINT64 1099511627776: must be at least 1 and at most 16777216"),
    ("llama.attention.layer_norm_rms_epsilon", V.FLOAT32, 0.0, r"FLOAT32 0\.0: must be a finite number in \(0, 1\]"),
    ("llama.attention.layer_norm_rms_epsilon", V.FLOAT32, -1e-5, r"must be a finite number in \(0, 1\]"),
    ("llama.attention.layer_norm_rms_epsilon", V.FLOAT32, math.nan, r"FLOAT32 nan: must be a finite number"),
    ("llama.attention.layer_norm_rms_epsilon", V.FLOAT32, 2.0, r"FLOAT32 2\.0: must be a finite number in \(0, 1\]"),
    ("llama.attention.layer_norm_rms_epsilon", V.UINT32, 1, r"UINT32 1: must be a float"),
    ("general.architecture", V.UINT32, 7, r"'general\.architecture' = UINT32 7: must be a STRING"),
]


@pytest.mark.parametrize(("key", "vtype", "value", "says"), STORIES_CASES)
def test_a_bad_hyperparameter_is_refused_by_key_type_and_value(key, vtype, value, says):
    # the architecture name is refused before its config is read: not a ModelError but its sibling
    error = UnsupportedArchitectureError if key == "general.architecture" else ModelError
    msg = refusal(edited(STORIES, {key: (value, vtype)}), error)
    assert f"'{key}'" in msg or "embedding_length" in msg
    assert re.search(says, msg), msg


def test_per_layer_arrays_have_one_value_per_layer():
    heads = GGUFArray(V.UINT32, [8, 8, 8])  # 5 layers
    msg = refusal(edited(STORIES, {"llama.attention.head_count": (heads, V.ARRAY)}))
    assert "'llama.attention.head_count' = ARRAY of 3 UINT32 [8, 8, 8]: a per-layer array must have one value " in msg
    floats = GGUFArray(V.FLOAT32, [8.0] * 5)
    msg = refusal(edited(STORIES, {"llama.attention.head_count": (floats, V.ARRAY)}))
    assert "must be an integer (or an array of integers, one per layer)" in msg
    same = GGUFArray(V.UINT32, [8] * 5)
    f = GGUFFile.from_buffer(edited(STORIES, {"llama.attention.head_count": (same, V.ARRAY)}), "edited.gguf")
    assert load_config(f)[1].n_head == 8  # one equal value per layer is the scalar


def test_a_huge_rope_dimension_is_refused_before_anything_is_allocated():
    """2^31 rotary dimensions once sized a 16 GB table in the numba backend; now the load refuses the key."""
    f = GGUFFile.from_buffer(edited(STORIES, {"llama.rope.dimension_count": (1 << 31, V.UINT32)}), "edited.gguf")
    with pytest.raises(ModelError, match=r"'llama\.rope\.dimension_count' = UINT32 2147483648"):
        Model(f, "portable")


def _tiny(arch: str) -> bytes:
    return build_tiny(arch).to_bytes()


@pytest.fixture(scope="module")
def tiny_gemma3(tmp_path_factory) -> object:
    path = tmp_path_factory.mktemp("tiny") / "gemma3.gguf"
    path.write_bytes(_tiny("gemma3"))
    return path


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> object:
    path = tmp_path_factory.mktemp("tiny") / "bert.gguf"
    path.write_bytes(_tiny("bert"))
    return path


@pytest.mark.parametrize(
    ("key", "vtype", "value", "says"),
    [
        ("gemma3.attention.sliding_window", V.FLOAT32, 8.0, r"FLOAT32 8\.0: must be an integer"),
        ("gemma3.attention.sliding_window", V.UINT64, 1 << 40, r"must be at least 0 and at most 16777216"),
        ("gemma3.attention.key_length", V.UINT32, 33, r"rope\.dimension_count' is absent and defaults to 33, which "),
    ],
)
def test_gemma3_keys(tiny_gemma3, key, vtype, value, says):
    data = edited(tiny_gemma3, {key: (value, vtype), "gemma3.attention.value_length": None})
    assert re.search(says, refusal(data))


@pytest.mark.parametrize(
    ("key", "vtype", "value", "says"),
    [
        ("bert.pooling_type", V.UINT32, 7, r"UINT32 7: must be at least 0 and at most 4"),
        ("bert.attention.causal", V.UINT8, 0, r"UINT8 0: must be a BOOL"),
        ("bert.attention.layer_norm_epsilon", V.FLOAT32, math.inf, r"FLOAT32 inf: must be a finite number"),
    ],
)
def test_bert_keys(tiny_bert, key, vtype, value, says):
    assert re.search(says, refusal(edited(tiny_bert, {key: (value, vtype)})))


def test_bert_token_type_count_is_typed(tiny_bert):
    data = edited(tiny_bert, {"tokenizer.ggml.token_type_count": (math.nan, V.FLOAT32)})
    with pytest.raises(ModelError, match=r"'tokenizer\.ggml\.token_type_count' = FLOAT32 nan: must be an integer"):
        bind_weights(GGUFFile.from_buffer(data, "edited.gguf"))


@pytest.mark.native_only
@pytest.mark.parametrize(
    ("key", "vtype", "value"),
    [
        ("llama.rope.dimension_count", V.UINT32, 0),
        ("llama.rope.dimension_count", V.UINT32, 1 << 31),
        ("llama.vocab_size", V.FLOAT32, math.nan),
    ],
)
def test_llama_cpp_refuses_these_too(key, vtype, value, tmp_path):
    pytest.importorskip("xllamacpp")
    data = edited(STORIES, {key: (value, vtype)})
    assert not llamacpp_loads(data, tmp_path / "edited.gguf")
    refusal(data)
