"""`Tokenizer`: text to ids and back for one GGUF vocabulary, plus its chat template.

Encoding follows llama.cpp's `llama_vocab::impl::tokenize`: cut special tokens out of the text, hand every text
fragment to the vocabulary's tokenizer (byte-level BPE, SentencePiece BPE, WordPiece or unigram) and add BOS/EOS
(or CLS/SEP for BERT) when asked. Decoding renders each id as bytes (GPT-2 byte characters undone, "▁" as a
space, `<0xXX>` as its byte), joins them and decodes UTF-8 once.
"""

from __future__ import annotations

from typing import Any

from ..errors import LlamayError
from .bpe import BPEModel
from .special import SpecialSplitter
from .spm import SPACE, SPMModel
from .stream import StreamDecoder
from .unicode import CHAR_TO_BYTE
from .unigram import UnigramModel
from .vocab import TokenAttr, Vocab
from .wordpiece import WordPieceModel

_SPECIAL = TokenAttr.CONTROL | TokenAttr.UNKNOWN


class Tokenizer:
    def __init__(self, vocab: Vocab, chat_template: str | None = None) -> None:
        self.vocab = vocab
        kind = vocab.kind
        if kind == "bpe":
            self._model: Any = BPEModel(vocab, vocab.merges, vocab.pre)
        elif kind == "spm":
            self._model = SPMModel(vocab)
        elif kind == "wpm":
            self._model = WordPieceModel(vocab)
        else:
            self._model = UnigramModel(vocab)
        self._special = SpecialSplitter(vocab)
        self.chat_template_source = chat_template
        self.chat_template_name = "tokenizer.chat_template"
        self.chat_preset: Any = None  # a ChatPreset (system prompt, messages) a stored model adds
        self._chat: Any = None
        self._pieces: list[bytes | None] = [None] * len(vocab.tokens)  # rendered on first use
        # SentencePiece's dummy prefix (and WordPiece's phantom space) is not part of the text
        self.strips_leading_space = (kind in ("spm", "ugm") and vocab.add_space_prefix) or kind == "wpm"

    @classmethod
    def from_gguf(cls, gguf: Any) -> Tokenizer:
        return cls(Vocab.from_gguf(gguf), gguf.get("tokenizer.chat_template"))

    # --- vocabulary facts -------------------------------------------------------------------------------------

    @property
    def n_vocab(self) -> int:
        return len(self.vocab.tokens)

    @property
    def bos_id(self) -> int | None:
        return self.vocab.ids["bos"]

    @property
    def eos_id(self) -> int | None:
        return self.vocab.ids["eos"]

    @property
    def eos_ids(self) -> frozenset[int]:
        """Every id that ends a generation: EOS plus end-of-turn tokens (`<|im_end|>`, `<end_of_turn>`, ...)."""
        return self.vocab.eog_ids

    def is_eog(self, token_id: int) -> bool:
        return token_id in self.vocab.eog_ids

    def is_control(self, token_id: int) -> bool:
        return bool(self.vocab.attrs[token_id] & TokenAttr.CONTROL)

    def token_text(self, token_id: int) -> str:
        """The token as the vocabulary spells it (GPT-2 byte characters, "▁" and all)."""
        return self.vocab.tokens[token_id]

    def token_id(self, text: str) -> int | None:
        return self.vocab.token_to_id.get(text)

    # --- encoding ---------------------------------------------------------------------------------------------

    def encode(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        """Ids of `text`. `add_special`: add BOS/EOS as the model asks (CLS/SEP for BERT); `parse_special`: turn
        the text of control tokens (`<|im_start|>`) into those tokens (user-defined tokens always are)."""
        vocab = self.vocab
        ids = vocab.ids
        if not text.isascii():
            text = _valid_unicode(text)
        fragments = self._special.split(text, parse_special)
        kind = vocab.kind
        out: list[int] = []
        if add_special and (vocab.add_bos or kind == "wpm") and ids["bos"] is not None:
            out.append(ids["bos"])
        if kind == "spm":
            self._encode_spm(fragments, out)
        else:
            encode = self._model.encode
            for frag in fragments:
                if isinstance(frag, str):
                    out += encode(frag)
                else:
                    out.append(frag)
        if add_special:
            if kind == "wpm":
                if ids["sep"] is not None:
                    out.append(ids["sep"])
            elif vocab.add_eos and ids["eos"] is not None:
                out.append(ids["eos"])
        return out

    def _encode_spm(self, fragments: list[str | int], out: list[int]) -> None:
        prefix = self.vocab.add_space_prefix
        prev_special = True  # the first text fragment gets the dummy prefix too
        for frag in fragments:
            if isinstance(frag, str):
                text = " " + frag if prefix and prev_special else frag
                out += self._model.encode(text.replace(" ", SPACE))
                prev_special = False
            else:
                out.append(frag)
                prev_special = True

    def encode_batch(self, texts: list[str], add_special: bool = True, parse_special: bool = True) -> list[list[int]]:
        return [self.encode(t, add_special, parse_special) for t in texts]

    # --- decoding ---------------------------------------------------------------------------------------------

    def token_bytes(self, token_id: int, special: bool = True) -> bytes:
        """The bytes a token stands for. Control and unknown tokens give their text when `special`, else b""."""
        if not 0 <= token_id < len(self.vocab.tokens):
            raise LlamayError(f"token id {token_id} is out of range (vocabulary of {len(self.vocab.tokens)})")
        if not special and self.vocab.attrs[token_id] & _SPECIAL:
            return b""
        piece = self._pieces[token_id]
        if piece is None:
            piece = self._pieces[token_id] = self._render(token_id)
        return piece

    def _render(self, token_id: int) -> bytes:
        text = self.vocab.tokens[token_id]
        attr = self.vocab.attrs[token_id]
        if attr & (_SPECIAL | TokenAttr.USER_DEFINED):
            return text.encode("utf-8")
        if attr & TokenAttr.BYTE:
            return bytes([int(text[3:5], 16)]) if text.startswith("<0x") else text.encode("utf-8")
        if not attr & TokenAttr.NORMAL:
            return b""
        if self.vocab.kind == "bpe" and not self.vocab.escape_whitespaces:
            byte_of = CHAR_TO_BYTE.get
            return b"".join(bytes([b]) if (b := byte_of(c)) is not None else c.encode("utf-8") for c in text)
        return text.replace(SPACE, " ").encode("utf-8")

    def decode(self, ids: list[int], special: bool = False, clean_spaces: bool = False) -> str:
        """Text of `ids`. `special`: render control tokens (`<|im_end|>`); `clean_spaces`: apply the model's
        clean-up of tokenization spaces (" ," -> ",") where the vocabulary asks for it, as llama.cpp does."""
        data = b"".join(self.token_bytes(i, special) for i in ids)
        if self.strips_leading_space and data[:1] == b" ":
            data = data[1:]
        text = data.decode("utf-8", "replace")
        if clean_spaces and self.vocab.clean_spaces:
            text = clean_up_spaces(text)
        return text

    def detokenizer(self, special: bool = False, strip_leading_space: bool = False) -> StreamDecoder:
        """A streaming decoder: `push(id) -> str` never splits a UTF-8 character; `flush() -> str` at the end.
        `strip_leading_space`: drop the dummy-prefix space at the start (for decoding a whole prompt)."""
        return StreamDecoder(
            lambda i: self.token_bytes(i, special),
            strip_leading_space=strip_leading_space and self.strips_leading_space,
        )

    # --- chat -------------------------------------------------------------------------------------------------

    def use_chat_template(self, source: str | None, name: str, preset: Any = None) -> None:
        """Render chats with `source` (Jinja) instead of the GGUF's template, and add `preset` (a ChatPreset) to
        every conversation: what a stored model's TEMPLATE, SYSTEM and MESSAGE layers ask for."""
        if source is not None:
            self.chat_template_source, self.chat_template_name = source, name
        self.chat_preset = preset
        self._chat = None

    def apply_chat_template(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True,
                            tools: list[dict[str, Any]] | None = None, **kw: Any) -> str:  # fmt: skip
        """Render the model's chat template (ChatML when the GGUF has none) for `messages`."""
        if self._chat is None:
            from .chat import CHATML, ChatTemplate

            names = {"bos_token": "bos", "eos_token": "eos", "unk_token": "unk", "pad_token": "pad",
                     "sep_token": "sep", "mask_token": "mask"}  # fmt: skip
            specials = {k: self.vocab.tokens[i] for k, n in names.items() if (i := self.vocab.ids[n]) is not None}
            source = self.chat_template_source
            name = self.chat_template_name if source else "fallback ChatML template"
            self._chat = ChatTemplate(source or CHATML, special_tokens=specials, name=name)
        if self.chat_preset is not None:
            messages = self.chat_preset.apply(messages)
        return self._chat.render(messages, add_generation_prompt=add_generation_prompt, tools=tools, **kw)


def _valid_unicode(text: str) -> str:
    """`text` with lone surrogates (which no UTF-8 byte string decodes to) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def clean_up_spaces(text: str) -> str:
    """llama.cpp's detokenizer clean-up: drop the space before ? ! . , and before 's 'm 're 've, and the spaces
    around a lone apostrophe (' ' ' -> ')."""
    for p in "?!.,":
        text = text.replace(" " + p, p)
    text = text.replace(" ' ", "'")
    for c in ("'s", "'m", "'re", "'ve"):
        text = text.replace(" " + c, c)
    return text
