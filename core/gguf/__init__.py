"""The GGUF container: read (zero-copy) and write."""

from .constants import GGUF_DEFAULT_ALIGNMENT, GGUFValueType, Keys
from .reader import GGUFArray, GGUFFile, MetadataField, TensorInfo, open_gguf
from .writer import GGUFWriter

__all__ = [
    "GGUF_DEFAULT_ALIGNMENT",
    "GGUFArray",
    "GGUFFile",
    "GGUFValueType",
    "GGUFWriter",
    "Keys",
    "MetadataField",
    "TensorInfo",
    "open_gguf",
]
