"""The vocabulary of a GGUF model: token texts, scores, types and the special-token rules, read the way
llama.cpp's `llama_vocab::impl::load` reads them (defaults per `tokenizer.ggml.model`, then the GGUF's own keys,
then the end-of-generation and attribute fix-ups it applies by token text)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import Any

from ..errors import ModelError
from ..gguf import GGUFValueType as V
from .pretokenize import PreTokenizer, pre_tokenizer


class TokenType(IntEnum):
    """`tokenizer.ggml.token_type` values."""

    UNDEFINED = 0
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


class TokenAttr(IntFlag):
    """Per-token attributes (llama.cpp's `llama_token_attr`)."""

    UNDEFINED = 0
    UNKNOWN = 1 << 0
    UNUSED = 1 << 1
    NORMAL = 1 << 2
    CONTROL = 1 << 3
    USER_DEFINED = 1 << 4
    BYTE = 1 << 5
    LSTRIP = 1 << 7
    RSTRIP = 1 << 8


_ATTR_OF_TYPE = {
    TokenType.NORMAL: TokenAttr.NORMAL,
    TokenType.UNKNOWN: TokenAttr.UNKNOWN,
    TokenType.CONTROL: TokenAttr.CONTROL,
    TokenType.USER_DEFINED: TokenAttr.USER_DEFINED,
    TokenType.UNUSED: TokenAttr.UNUSED,
    TokenType.BYTE: TokenAttr.BYTE,
}
SPECIAL_ATTRS = TokenAttr.CONTROL | TokenAttr.USER_DEFINED | TokenAttr.UNKNOWN

# Tokens that end a turn or a generation, recognised by their text (llama.cpp's lists).
_DEEPSEEK_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"  # <｜end▁of▁sentence｜>
EOT_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
             "_<EOT>", "[EOT]", _DEEPSEEK_EOS, "<end_of_utterance>")  # fmt: skip
EOG_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
             "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
             "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", _DEEPSEEK_EOS, "[e~[")  # fmt: skip
FIM_TEXTS = {
    "fim_pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\uff5cfim\u2581begin\uff5c>", "<PRE>",
                "\u2581<PRE>", "<|code_prefix|>", "<|prefix|>"),
    "fim_suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\uff5cfim\u2581hole\uff5c>", "<SUF>",
                "\u2581<SUF>", "<|code_suffix|>", "<|suffix|>"),
    "fim_mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\uff5cfim\u2581end\uff5c>", "<MID>",
                "\u2581<MID>", "<|code_middle|>", "<|middle|>"),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}  # fmt: skip
ALWAYS_RENDERED = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")  # gpt-oss: user-defined

# GGUF key suffix (after "tokenizer.ggml.") of each special id
_ID_KEYS = {
    "bos": "bos_token_id",
    "eos": "eos_token_id",
    "eot": "eot_token_id",
    "eom": "eom_token_id",
    "unk": "unknown_token_id",
    "sep": "seperator_token_id",  # sic: the GGUF spelling
    "pad": "padding_token_id",
    "mask": "mask_token_id",
    "fim_pre": "fim_pre_token_id",
    "fim_suf": "fim_suf_token_id",
    "fim_mid": "fim_mid_token_id",
    "fim_pad": "fim_pad_token_id",
    "fim_rep": "fim_rep_token_id",
    "fim_sep": "fim_sep_token_id",
}
_DEPRECATED_ID_KEYS = {"fim_pre": "prefix_token_id", "fim_suf": "suffix_token_id", "fim_mid": "middle_token_id"}
_CHECKED_ID_KEYS = (*_ID_KEYS.values(), *_DEPRECATED_ID_KEYS.values(), "cls_token_id")
# "no such token", as converters write it (llama.cpp warns and keeps its default id)
_NO_TOKEN = {V.UINT32: (1 << 32) - 1, V.UINT64: (1 << 64) - 1}
_BOOL_KEYS = ("add_bos_token", "add_eos_token", "add_sep_token", "add_space_prefix", "remove_extra_whitespaces",
              "normalizer.lowercase", "normalizer.strip_accents")  # fmt: skip
_STRING_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.chat_template", "general.name",
                "general.architecture")  # fmt: skip
_INTEGERS = frozenset({V.UINT8, V.INT8, V.UINT16, V.INT16, V.UINT32, V.INT32, V.UINT64, V.INT64})
_ARRAYS = {  # key suffix: (item types, what they are)
    "tokens": ({V.STRING}, "STRING"),
    "scores": ({V.FLOAT32, V.FLOAT64}, "FLOAT32"),
    "token_type": (_INTEGERS, "INT32"),
    "merges": ({V.STRING}, "STRING"),
    "precompiled_charsmap": ({V.UINT8, V.INT8}, "UINT8"),
}


def is_no_token(field: Any) -> bool:
    """A special id stored as -1 or the largest unsigned value: the token is absent."""
    return field.value == _NO_TOKEN.get(field.type, -1)


def _refusal(where: str, fld: Any, why: str) -> ModelError:
    return ModelError(f"{where}: key {fld.key!r} = {fld.shown()}: {why}")


def check_vocab(gguf: Any) -> None:
    """Check the tokenizer keys of an open GGUF file before anything reads them: their types, the token arrays
    all as long as the token list, merges of two parts, and every special id within the token list. Cheap (no
    tokenizer is built), so a model load runs it; each refusal names the file, the key, its type and value."""
    fields, where = gguf.fields, getattr(gguf, "name", "<gguf>")
    _check_types(fields, where)
    tokens = fields.get("tokenizer.ggml.tokens")
    n = len(tokens.value) if tokens is not None else 0
    for key in ("scores", "token_type"):
        fld = fields.get(f"tokenizer.ggml.{key}")
        if fld is not None and len(fld.value) != n:
            raise _refusal(where, fld, f"must have one item per token: the token list has {n}")
    for i, text in enumerate(tokens.value if tokens is not None else ()):
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # the reader keeps odd bytes as surrogates
                raise ModelError(f"{where}: key 'tokenizer.ggml.tokens' item {i} = {text!r}: not valid UTF-8") from None
    merges = fields.get("tokenizer.ggml.merges")
    for i, merge in enumerate(merges.value if merges is not None else ()):
        cut = merge.find(" ", 1)  # the first part may itself start with a space (llama.cpp splits the same way)
        if cut < 0 or cut == len(merge) - 1:
            raise ModelError(f"{where}: key 'tokenizer.ggml.merges' item {i} = {merge!r}: not two parts and a space")
    for key in _CHECKED_ID_KEYS:
        fld = fields.get(f"tokenizer.ggml.{key}")
        if fld is not None and not is_no_token(fld) and not 0 <= fld.value < n:
            raise _refusal(where, fld, f"is not a token id: the token list has {n} tokens (ids 0 to {n - 1})")


def _check_types(fields: dict[str, Any], where: str) -> None:
    for key in _STRING_KEYS:
        if key in fields and fields[key].type != V.STRING:
            raise _refusal(where, fields[key], "must be a STRING")
    for key in _BOOL_KEYS:
        fld = fields.get(f"tokenizer.ggml.{key}")
        if fld is not None and fld.type != V.BOOL:
            raise _refusal(where, fld, "must be a BOOL")
    for key, (types, name) in _ARRAYS.items():
        fld = fields.get(f"tokenizer.ggml.{key}")
        if fld is not None and (fld.type != V.ARRAY or fld.value.item_type not in types):
            raise _refusal(where, fld, f"must be an ARRAY of {name}")
    for key in _CHECKED_ID_KEYS:
        fld = fields.get(f"tokenizer.ggml.{key}")
        if fld is not None and fld.type not in _INTEGERS:
            raise _refusal(where, fld, "must be an integer token id")


# defaults per tokenizer.ggml.model: special ids, then flags
_MODEL_DEFAULTS: dict[str, tuple[dict[str, int | None], dict[str, bool]]] = {
    "llama": ({"bos": 1, "eos": 2, "unk": 0}, {"add_space_prefix": True, "add_bos": True, "clean_spaces": False}),
    "bert": (
        {"bos": 101, "unk": 100, "sep": 102, "pad": 0, "mask": 103},
        {"add_bos": True, "add_sep": True, "clean_spaces": True},
    ),
    "gpt2": ({"bos": 11, "eos": 11}, {"escape_whitespaces": False, "clean_spaces": True}),
    "gemma4": ({}, {"clean_spaces": True}),
    "t5": ({"eos": 1, "unk": 2, "pad": 0}, {"add_eos": True}),
}
MODEL_KINDS = {"llama": "spm", "bert": "wpm", "gpt2": "bpe", "gemma4": "bpe", "t5": "ugm"}


@dataclass
class Vocab:
    model: str  # tokenizer.ggml.model
    pre_name: str
    pre: PreTokenizer
    tokens: list[str]
    scores: list[float]
    attrs: list[int]  # TokenAttr bits per id
    merges: list[str] = field(default_factory=list)
    precompiled_charsmap: bytes = b""
    ids: dict[str, int | None] = field(default_factory=dict)  # bos, eos, eot, unk, sep, pad, ... (None: absent)
    add_bos: bool = False
    add_eos: bool = False
    add_sep: bool = False
    add_space_prefix: bool = False
    remove_extra_whitespaces: bool = False
    escape_whitespaces: bool = True
    clean_spaces: bool = False
    lowercase: bool = True  # WordPiece normaliser
    strip_accents: bool = True
    token_to_id: dict[str, int] = field(default_factory=dict)
    eog_ids: frozenset[int] = frozenset()
    special_ids: list[int] = field(default_factory=list)  # control/user-defined/unknown, longest text first

    @property
    def kind(self) -> str:
        """Which tokenizer runs this vocabulary: "bpe", "spm", "wpm" or "ugm"."""
        return MODEL_KINDS[self.model]

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def from_gguf(cls, gguf: Any) -> Vocab:
        """Read the tokenizer keys of an open GGUF file (`llamay.gguf.open_gguf`), checked by `check_vocab`."""
        check_vocab(gguf)
        return _load(gguf.get, getattr(gguf, "name", "<gguf>"))


def _load(get: Any, where: str) -> Vocab:
    model = get("tokenizer.ggml.model")
    if model not in MODEL_KINDS:
        known = ", ".join(MODEL_KINDS)
        raise ModelError(f"{where}: tokenizer.ggml.model = {model!r} is not supported (supported: {known})")
    tokens = get("tokenizer.ggml.tokens")
    if not tokens:
        raise ModelError(f"{where}: no tokenizer.ggml.tokens")
    tokens = [t if t else f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
    n = len(tokens)
    scores = list(get("tokenizer.ggml.scores") or [0.0] * n)
    types = get("tokenizer.ggml.token_type") or [TokenType.NORMAL] * n
    attrs = [int(_ATTR_OF_TYPE.get(t, TokenAttr.UNDEFINED)) for t in types]
    token_to_id: dict[str, int] = {}
    for i, t in enumerate(tokens):
        if token_to_id.setdefault(t, i) != i:
            raise ModelError(f"{where}: duplicate token {t!r} at ids {token_to_id[t]} and {i}")

    pre_name = get("tokenizer.ggml.pre") or ""
    if model == "gemma4":
        pre_name = "gemma4"
    merges = list(get("tokenizer.ggml.merges") or [])
    if MODEL_KINDS[model] == "bpe" and not merges:
        raise ModelError(f"{where}: byte-level BPE vocabulary without tokenizer.ggml.merges")
    default_ids, flags = _MODEL_DEFAULTS[model]
    ids: dict[str, int | None] = dict.fromkeys(_ID_KEYS)
    ids.update(default_ids)
    vocab = Vocab(model, pre_name, pre_tokenizer(None), tokens, scores, attrs, merges=merges, **flags)
    vocab.token_to_id = token_to_id
    charsmap = get("tokenizer.ggml.precompiled_charsmap")
    if charsmap:
        vocab.precompiled_charsmap = bytes(b & 0xFF for b in charsmap)
    if vocab.kind == "bpe":
        try:
            pre = vocab.pre = pre_tokenizer(pre_name)
        except ModelError as e:
            raise ModelError(f"{where}: {e}") from None
        vocab.add_space_prefix = False
        vocab.escape_whitespaces = pre.escape_whitespaces
        vocab.clean_spaces = pre.clean_spaces
        if pre.add_bos is not None:
            vocab.add_bos = pre.add_bos
        vocab.add_sep = vocab.add_sep or pre.add_sep
        if pre.no_bos:
            ids["bos"] = None
    _read_flags(vocab, get)
    _read_ids(vocab, ids, get, where)
    _fix_attributes(vocab, get)
    return vocab


def _read_flags(vocab: Vocab, get: Any) -> None:
    for attr, key in (
        ("add_space_prefix", "add_space_prefix"),
        ("remove_extra_whitespaces", "remove_extra_whitespaces"),
    ):
        value = get(f"tokenizer.ggml.{key}")
        if value is not None:
            setattr(vocab, attr, bool(value))
    lowercase = get("tokenizer.ggml.normalizer.lowercase")
    if lowercase is not None:
        vocab.lowercase = bool(lowercase)
    vocab.strip_accents = vocab.lowercase
    strip = get("tokenizer.ggml.normalizer.strip_accents")
    if strip is not None:
        vocab.strip_accents = bool(strip)


def _read_ids(vocab: Vocab, ids: dict[str, int | None], get: Any, where: str) -> None:
    n = len(vocab.tokens)
    for name, key in _ID_KEYS.items():
        value = ids.get(name)
        if value is not None and value >= n:
            ids[name] = None  # a default that does not fit this vocabulary
        for k in (key, _DEPRECATED_ID_KEYS.get(name)):
            new = get(f"tokenizer.ggml.{k}") if k else None
            if new is not None and 0 <= new < n:  # in range unless it says "no token" (`check_vocab`)
                ids[name] = new
    for flag in ("add_bos", "add_eos", "add_sep"):
        value = get(f"tokenizer.ggml.{flag}_token")
        if value is not None:
            setattr(vocab, flag, bool(value))
    if vocab.pre_name == "gemma4":
        vocab.add_bos = True
    for flag, name in (("add_bos", "bos"), ("add_eos", "eos"), ("add_sep", "sep")):
        if getattr(vocab, flag) and ids[name] is None:
            raise ModelError(f"{where}: tokenizer.ggml.{flag}_token is true but the model has no {name} token")
    vocab.ids = ids


def _mark_control(vocab: Vocab, tid: int) -> None:
    vocab.attrs[tid] |= TokenAttr.CONTROL


def _fix_attributes(vocab: Vocab, get: Any) -> None:
    """llama.cpp's fix-ups by token text, in its order."""
    _find_by_text(vocab)
    for i, t in enumerate(vocab.tokens):  # control tokens named "unused" are unused
        if vocab.attrs[i] & TokenAttr.CONTROL and "unused" in t:
            vocab.attrs[i] |= TokenAttr.UNUSED
    vocab.eog_ids = frozenset(_end_of_generation(vocab))
    special = [i for i, a in enumerate(vocab.attrs) if a & SPECIAL_ATTRS]
    special.sort(key=lambda i: -len(vocab.tokens[i].encode("utf-8")))
    vocab.special_ids = special
    _strip_attributes(vocab, (get("general.name") or "").lower(), get("general.architecture") or "")


def _find_by_text(vocab: Vocab) -> None:
    """End-of-turn, end-of-message and FIM ids the GGUF does not give, found by token text (made control)."""
    ids, find = vocab.ids, vocab.token_to_id.get
    for name, texts in (("eot", EOT_TEXTS), ("eom", ("<|eom_id|>",)), *FIM_TEXTS.items()):
        if ids[name] is None:
            ids[name] = next((t for t in map(find, texts) if t is not None), None)
            if ids[name] is not None:
                _mark_control(vocab, ids[name])


def _end_of_generation(vocab: Vocab) -> set[int]:
    ids, attrs, find = vocab.ids, vocab.attrs, vocab.token_to_id.get
    eog = {ids[name] for name in ("fim_pad", "fim_rep", "fim_sep") if ids[name] is not None}
    for tid in [t for t in map(find, EOG_TEXTS) if t is not None]:
        eog.add(tid)
        _mark_control(vocab, tid)
    for tid in [t for t in map(find, ALWAYS_RENDERED) if t is not None]:
        attrs[tid] = int(TokenAttr.USER_DEFINED)
    eog.update(ids[name] for name in ("eos", "eot", "eom") if ids[name] is not None)
    texts = {vocab.tokens[t]: t for t in eog}
    # o200k_harmony / solar-open: "<|end|>" ends a message, not the generation
    has_call = "<|call|>" in texts or "<|calls|>" in texts
    if "<|end|>" in texts and has_call and ("<|return|>" in texts or "<|flush|>" in texts):
        eog.discard(texts["<|end|>"])
        attrs[texts["<|end|>"]] = int(TokenAttr.USER_DEFINED)
    if "<|tool_response>" in texts and "</s>" in texts:  # gemma4, paddleocr
        eog.discard(texts["</s>"])
        attrs[texts["</s>"]] = int(TokenAttr.NORMAL)
    return eog


def _strip_attributes(vocab: Vocab, name: str, arch: str) -> None:
    """Special tokens that eat the whitespace beside them, per model (llama.cpp keys these by name)."""
    if any(s in vocab.pre_name for s in ("jina-v2-de", "jina-v2-es", "jina-v2-code")) or any(
        s in arch for s in ("nomic-bert-moe", "jina-bert-v3")
    ):
        _set_strip(vocab, "<mask>", TokenAttr.LSTRIP, True)
    elif "phi-3" in name or "phi3" in name:
        for i in vocab.special_ids:
            vocab.attrs[i] |= TokenAttr.RSTRIP
        _set_strip(vocab, "</s>", TokenAttr.RSTRIP, True)
        for text in ("<unk>", "<s>", "<|endoftext|>"):
            _set_strip(vocab, text, TokenAttr.RSTRIP, False)
    elif "modern-bert" in name:
        _set_strip(vocab, "[MASK]", TokenAttr.LSTRIP, True)


def _set_strip(vocab: Vocab, text: str, flag: TokenAttr, on: bool) -> None:
    tid = vocab.token_to_id.get(text)
    if tid is None:
        return
    if on:
        vocab.attrs[tid] |= flag
    else:
        vocab.attrs[tid] &= ~flag
