"""The limits on what one request may ask of the server, in one place (docs/server.md has the same table).

Each bounds work that grows with the request's content, so that no single request can hold the event loop,
a preparation thread or memory for long: the body's size (413), its JSON's nesting, the prompt's length in
characters before it is tokenized, the counts of messages, tools, prompts, logit biases and stop strings. The
schema-level counts are published in the OpenAPI description (pydantic `max_length`), the rest are checked
where the value is read; every refusal names the limit and, where there is one, the option that sets it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llamay.sampling.request import MAX_LOGIT_BIAS, MAX_STOP_CHARS, MAX_STOPS  # noqa: F401 (the core checks these)

MiB = 1 << 20

MAX_JSON_DEPTH = 128  # nesting of a request body (a JSON Schema's own limit is the constraint compiler's)
MAX_MESSAGES = 4096  # messages of one chat
MAX_TOOLS = 128  # tools of one chat
MAX_N = 16  # choices per prompt
MAX_BATCH = 64  # prompts (completions) or inputs (embeddings: MAX_EMBED_INPUTS) of one request
MAX_EMBED_INPUTS = 256
MAX_TOKENIZE_CHARS = 1 << 20  # /tokenize content (random words: ~5 s of a preparation thread)
# any list of token ids in a request (a prompt, /detokenize, Ollama's `context`): 128 Ki, the longest context a
# served model has, so the event loop's parse and check of one stays within milliseconds
MAX_TOKEN_IDS = 1 << 17
MAX_DETOKENIZE_TOKENS = MAX_TOKEN_IDS  # /detokenize tokens
MAX_CONTEXT_TOKENS = MAX_TOKEN_IDS  # Ollama's `context` (then the model's context bounds it)
PREPARE_THREADS = 4  # threads that render templates, tokenize and compile constraints (off the event loop)


@dataclass(frozen=True)
class Limits:
    """The limits a server runs with: those set by options, and those derived from the loaded model."""

    max_body_bytes: int = 8 * MiB  # --max-body-bytes
    max_prompt_chars: int | None = None  # derived: n_ctx x the longest token (None: not derivable)
    max_preparing: int = 64  # requests being prepared at once (= --queue); beyond, 429

    def describe(self) -> dict[str, Any]:
        return {"max_body_bytes": self.max_body_bytes, "max_prompt_chars": self.max_prompt_chars}


def longest_token_chars(tokenizer: Any) -> int | None:
    """The most characters of input one token can stand for, or None when the tokenizer may drop input
    characters (WordPiece and Unigram normalise and collapse whitespace, so no character count bounds them).
    BPE and SentencePiece keep every input character inside some token, whose vocabulary text has at least as
    many characters (byte-level BPE writes one character per byte, SentencePiece one per character, a byte
    token `<0xE4>` six for one byte, a special token its own text)."""
    if getattr(tokenizer.vocab, "kind", None) not in ("bpe", "spm"):
        return None
    return max(1, max(map(len, tokenizer.vocab.tokens), default=1))


def prompt_char_limit(tokenizer: Any, n_ctx: int) -> int | None:
    """Characters beyond which a text cannot fit in `n_ctx` tokens, whatever it says: a refusal before any
    tokenizing that never refuses a prompt that would have fit."""
    longest = longest_token_chars(tokenizer)
    return None if longest is None else n_ctx * longest
