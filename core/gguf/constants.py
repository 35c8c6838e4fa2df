"""Constants of the GGUF container: magic, versions, value types and the metadata keys llamay reads."""

from __future__ import annotations

from enum import IntEnum

GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS_READ = (2, 3)  # version 1 used 32-bit counts and is long gone
GGUF_VERSION_WRITTEN = 3
GGUF_DEFAULT_ALIGNMENT = 32
GGML_MAX_DIMS = 4
GGML_MAX_NAME = 64  # ggml keeps tensor names in a char[64] with its terminating zero
GGML_MAX_ELEMENTS = 1 << 63  # ggml counts elements and bytes in int64


class GGUFValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# struct format (little-endian) of each fixed-size value type; also its array.array typecode
SCALAR_FORMAT: dict[GGUFValueType, str] = {
    GGUFValueType.UINT8: "B",
    GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H",
    GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I",
    GGUFValueType.INT32: "i",
    GGUFValueType.FLOAT32: "f",
    GGUFValueType.BOOL: "?",
    GGUFValueType.UINT64: "Q",
    GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT64: "d",
}


class Keys:
    """Metadata keys, spelt as in gguf-py's `constants.py`; `{arch}` is `general.architecture`."""

    ARCHITECTURE = "general.architecture"
    ALIGNMENT = "general.alignment"
    NAME = "general.name"
    FILE_TYPE = "general.file_type"
    QUANTIZATION_VERSION = "general.quantization_version"

    SPLIT_NO = "split.no"  # llama.cpp's gguf-split: this shard's number, from 0
    SPLIT_COUNT = "split.count"
    SPLIT_TENSORS_COUNT = "split.tensors.count"  # the tensors of all shards

    CONTEXT_LENGTH = "{arch}.context_length"
    EMBEDDING_LENGTH = "{arch}.embedding_length"
    BLOCK_COUNT = "{arch}.block_count"
    FEED_FORWARD_LENGTH = "{arch}.feed_forward_length"
    VOCAB_SIZE = "{arch}.vocab_size"
    HEAD_COUNT = "{arch}.attention.head_count"
    HEAD_COUNT_KV = "{arch}.attention.head_count_kv"
    KEY_LENGTH = "{arch}.attention.key_length"
    VALUE_LENGTH = "{arch}.attention.value_length"
    LAYERNORM_EPS = "{arch}.attention.layer_norm_epsilon"
    LAYERNORM_RMS_EPS = "{arch}.attention.layer_norm_rms_epsilon"
    SLIDING_WINDOW = "{arch}.attention.sliding_window"
    CAUSAL = "{arch}.attention.causal"
    ROPE_DIMENSION_COUNT = "{arch}.rope.dimension_count"
    ROPE_FREQ_BASE = "{arch}.rope.freq_base"
    ROPE_SCALING_TYPE = "{arch}.rope.scaling.type"
    ROPE_SCALING_FACTOR = "{arch}.rope.scaling.factor"
    ROPE_SCALE_LINEAR = "{arch}.rope.scale_linear"  # the factor's older key, which llama.cpp still reads
    ROPE_SCALING_ATTN_FACTOR = "{arch}.rope.scaling.attn_factor"
    ROPE_SCALING_ORIG_CTX = "{arch}.rope.scaling.original_context_length"
    POOLING_TYPE = "{arch}.pooling_type"

    TOKENIZER_MODEL = "tokenizer.ggml.model"
    TOKENIZER_PRE = "tokenizer.ggml.pre"
    TOKENS = "tokenizer.ggml.tokens"
    SCORES = "tokenizer.ggml.scores"
    TOKEN_TYPE = "tokenizer.ggml.token_type"
    MERGES = "tokenizer.ggml.merges"
    BOS_ID = "tokenizer.ggml.bos_token_id"
    EOS_ID = "tokenizer.ggml.eos_token_id"
    CHAT_TEMPLATE = "tokenizer.chat_template"


# llama.cpp's `llama_ftype` (general.file_type): what most of a file's weights are, by the name the type of those
# weights has ("MOSTLY_" dropped, as llama.cpp and Ollama show it). 4-6 are retired; 1024 marks a guessed value.
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS",
    20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
    28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
    39: "NVFP4", 40: "Q1_0",
}  # fmt: skip
FILE_TYPE_GUESSED = 1024
