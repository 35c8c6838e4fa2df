"""Tokenizers and chat templates, pure Python (they run under Pyodide too).

    from llamay.gguf import open_gguf
    from llamay.tokenizer import load_tokenizer

    tok = load_tokenizer(open_gguf(path))
    ids = tok.encode("Hello")                     # BOS/EOS as the model asks, special tokens parsed
    text = tok.decode(ids)
    prompt = tok.apply_chat_template([{"role": "user", "content": "Hi"}])

Which tokenizer runs is decided by `tokenizer.ggml.model` (see docs/tokenizers.md); byte-level BPE picks its
pre-tokenizer by `tokenizer.ggml.pre` (`pretokenize.PRE_TOKENIZERS`).
"""

from typing import Any

from .chat import ChatPreset, ChatTemplate, ChatTemplateError
from .pretokenize import PRE_TOKENIZERS, PreTokenizer, Splitter, pre_tokenizer
from .stream import StreamDecoder
from .tokenizer import Tokenizer
from .vocab import TokenAttr, TokenType, Vocab


def load_tokenizer(gguf_file: Any) -> Tokenizer:
    """The tokenizer (and chat template) stored in an open GGUF file."""
    return Tokenizer.from_gguf(gguf_file)


__all__ = [
    "PRE_TOKENIZERS",
    "ChatPreset",
    "ChatTemplate",
    "ChatTemplateError",
    "PreTokenizer",
    "Splitter",
    "StreamDecoder",
    "TokenAttr",
    "TokenType",
    "Tokenizer",
    "Vocab",
    "load_tokenizer",
    "pre_tokenizer",
]
