"""The GGUF container: read (zero-copy) and write."""

from .constants import GGUF_DEFAULT_ALIGNMENT, GGUFValueType, Keys
from .reader import GGUFArray, GGUFFile, MetadataField, TensorInfo, open_gguf
from .split import SplitGGUF, from_buffers, split_count, split_path, split_prefix
from .writer import GGUFWriter

__all__ = [
    "GGUF_DEFAULT_ALIGNMENT",
    "GGUFArray",
    "GGUFFile",
    "GGUFValueType",
    "GGUFWriter",
    "Keys",
    "MetadataField",
    "SplitGGUF",
    "TensorInfo",
    "from_buffers",
    "open_gguf",
    "split_count",
    "split_path",
    "split_prefix",
]
