"""Pre-tokenizers for byte-level BPE, keyed by `tokenizer.ggml.pre`.

A pre-tokenizer is a list of regexes applied in turn, as llama.cpp's `unicode_regex_split` does: each regex
splits every piece left by the previous one into its matches and the unmatched gaps between them. The regexes
are llama.cpp's (its "adapted" forms where it rewrote a Hugging Face regex), in Python syntax, with these macros:

- `\\p{L}`, `\\p{N}`, `\\p{P}`, `\\p{M}`, `\\p{S}` (and `\\p{Lu}` ... `\\p{Lo}`, which llama.cpp treats as `\\p{L}`):
  Python's `re` cannot test Unicode categories, so a regex that uses one runs on *collapsed* text (see
  `unicode.collapse`), where each non-ASCII code point is its category's stand-in character, and the macro
  expands to a class of that stand-in plus the ASCII members llama.cpp lists (its ASCII lists leave `~` out of
  both \\p{P} and \\p{S}; we keep that).
- a regex without a category macro runs on the text itself, with non-ASCII whitespace replaced by 0x0B.

All regexes compile with `re.ASCII`, so `\\s` is the six ASCII whitespace characters (plus 0x0B, the stand-in of
every other whitespace), as in C++'s std::regex. Collapsing keeps code-point offsets, so the pieces are slices of
the original text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import accumulate

from ..errors import ModelError
from .unicode import (
    COLLAPSED_LETTER,
    COLLAPSED_MARK,
    COLLAPSED_NUMBER,
    COLLAPSED_PUNCTUATION,
    COLLAPSED_SYMBOL,
    ascii_spaces,
    collapse,
)

# What each category macro stands for in collapsed text: its stand-in, then llama.cpp's ASCII members.
_CATEGORY_CLASS = {
    "N": COLLAPSED_NUMBER + "0-9",
    "L": COLLAPSED_LETTER + "A-Za-z",
    "P": COLLAPSED_PUNCTUATION + r"!-#%-*,-/:-;?-@\[-\]_\{\}",
    "M": COLLAPSED_MARK,
    "S": COLLAPSED_SYMBOL + r"\$\+<->\^`\|",
}
_CATEGORY_ALIASES = {"Lu": "L", "Ll": "L", "Lt": "L", "Lm": "L", "Lo": "L"}

_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

# The regex families (names follow llama.cpp's LLAMA_VOCAB_PRE_TYPE_*).
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_CASED_WORDS = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+{c}"
    r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*{c}"
)
_CASED_CATEGORY_WORDS = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+{c}"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*{c}"
)
_CJK = r"[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+"
_ASCII_PUNCT_WORD = r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"
_DEEPSEEK_LETTERS = (
    r"\s?[A-Za-z"
    "\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af"
    "\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5"
    "\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba"
    "\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45"
    "\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe"
    "\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc"
    "\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3"
    "\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06"
    "\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3"
    "\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df"
    "\U0001e900-\U0001e943"
    r"]+"
)
_PORO = r" ?[^(\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+"

FAMILIES: dict[str, tuple[str, ...]] = {
    "default": (r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"),
    "gpt2": (GPT2,),
    "llama3": (LLAMA3,),
    "jais2": (
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
        r"|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)"
        r"|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}",
    ),
    "deepseek-llm": (
        r"[\r\n]",
        _DEEPSEEK_LETTERS,
        r"\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
        r"\s+$",
        r"[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
        r"\p{N}+",
    ),
    "deepseek-v3": (
        r"\p{N}{1,3}",
        _CJK,
        _ASCII_PUNCT_WORD + r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "spark2_5": (
        r"\p{N}{1,3}",
        _CJK,
        _ASCII_PUNCT_WORD + r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+",
        r"\p{N}",
    ),
    "youtu": (
        r"[\uAC00-\uD7A3\u3131-\u318E]+|[\uFF01\u2026\u201C\u201D\u2018\u2019\u2014\uFF1A\uFF1B\uFF0C\u3001-\u303F\uFE30-\uFE4F]+|[\u3105-\u312F]+|[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
        _CASED_CATEGORY_WORDS.replace("{c}", _CONTRACTIONS + "?")
        + r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "deepseek-coder": (r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", r"\p{N}"),
    "falcon": (r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"),
    "starcoder": (r"\p{N}", GPT2),
    "qwen2": (QWEN2,),
    "qwen35": (
        _CONTRACTIONS
        + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "poro": (_PORO,),
    "viking": (_PORO, r"\p{N}"),
    "tekken": (_CASED_WORDS.replace("{c}", "") + r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",),
    "chameleon": (
        r"<sentinel:[0-9]+>",
        r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
        r"([\t\n]|    |  )",
        r"\p{N}",
        r"[\p{P}!-/:-@\[-`{-~]",
        GPT2,
    ),
    "gpt-4o": (
        _CASED_WORDS.replace("{c}", _CONTRACTIONS + "?")
        + r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "granite-embed-multi": (
        _CASED_WORDS.replace("[\\p{L}]", "[\\p{L}\\p{M}]").replace("{c}", _CONTRACTIONS + "?")
        + r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "tiny-aya": (
        r"\d{1,3}(?=(?:\d{3})*\b)",
        _CASED_CATEGORY_WORDS.replace("{c}", _CONTRACTIONS + "?")
        + r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "bailingmoe": (
        r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]|\s+(?!\S)|\s+",
    ),
    "seed-coder": (
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "ufakzeka": (r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",),
    "laguna": (r"[^\n]+|[\n]+", QWEN2),
    "exaone-moe": (
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?"
        r"|\s*[\r\n]|\s+(?!\S)|\s+",
    ),
    "minicpm5": (
        r"\p{N}{1,3}",
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "lines": (r"[^\n]+|[\n]+",),
}


@dataclass(frozen=True)
class PreTokenizer:
    """What a `tokenizer.ggml.pre` value means: its regex family and the vocabulary flags llama.cpp ties to it."""

    family: str
    ignore_merges: bool = False  # a piece that is itself a token is taken whole
    clean_spaces: bool = True  # detokenizer clean-up of " ," " 's" ... (off by default in our decode)
    add_bos: bool | None = None  # default before the GGUF's own add_bos_token
    add_sep: bool = False
    no_bos: bool = False  # the model has no BOS token (chatglm)
    byte_encode: bool = True  # GPT-2 byte characters; False: raw UTF-8 with <0xXX> byte tokens
    escape_whitespaces: bool = False  # spaces become U+2581 before the split (SentencePiece-style BPE)

    @property
    def patterns(self) -> tuple[str, ...]:
        return FAMILIES[self.family]


_BASE = PreTokenizer("gpt2")
_KEEP_SPACES = {"clean_spaces": False}


def _table() -> dict[str, PreTokenizer]:
    rows: list[tuple[str, PreTokenizer]] = []

    def add(names: str, family: str, **flags: object) -> None:
        for name in names.split():
            rows.append((name, replace(_BASE, family=family, **flags)))  # type: ignore[arg-type]

    add("default", "default")
    add("llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano", "llama3",
        ignore_merges=True, add_bos=True)  # fmt: skip
    add("dbrx smaug-bpe", "llama3")
    add("glm4 chatglm-bpe", "llama3", no_bos=True)
    add("jais-2", "jais2")
    add("deepseek-llm", "deepseek-llm", **_KEEP_SPACES)
    add("deepseek-coder", "deepseek-coder", **_KEEP_SPACES)
    add("deepseek-v3 hunyuan-dense hy_v4 joyai-llm", "deepseek-v3", **_KEEP_SPACES)
    add("spark2_5", "spark2_5", **_KEEP_SPACES)
    add("youtu", "youtu", ignore_merges=True, **_KEEP_SPACES)
    add("falcon", "falcon")
    add("gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert mpt olmo jais exaone4",
        "gpt2")  # fmt: skip
    add("jina-v1-en jina-v2-code roberta-bpe", "gpt2", add_sep=True)
    add("trillion granite-docling", "gpt2", **_KEEP_SPACES)
    add("starcoder refact codeshell exaone minerva-7b mellum2", "starcoder")
    add("command-r smollm", "starcoder", **_KEEP_SPACES)
    add("qwen2 deepseek-r1-qwen kormo f2llmv2 hunyuan solar-open grok-2", "qwen2", **_KEEP_SPACES)
    add("stablelm2 megrez", "qwen2")
    add("qwen35", "qwen35", **_KEEP_SPACES)
    add("poro-chat", "poro", **_KEEP_SPACES)
    add("bloom gpt3-finnish", "poro")
    add("viking", "viking", **_KEEP_SPACES)
    add("tekken", "tekken", ignore_merges=True, add_bos=True, **_KEEP_SPACES)
    add("chameleon", "chameleon", add_bos=True, **_KEEP_SPACES)
    add("gpt-4o llama4 kanana2 talkie minimax-m2", "gpt-4o", **_KEEP_SPACES)
    add("granite-embed-multi-97m", "granite-embed-multi", ignore_merges=True, **_KEEP_SPACES)
    add("tiny_aya cohere2moe", "tiny-aya", **_KEEP_SPACES)
    add("bailingmoe bailingmoe2 llada-moe", "bailingmoe", **_KEEP_SPACES)
    add("seed-coder", "seed-coder", **_KEEP_SPACES)
    add("ufakzeka", "ufakzeka", **_KEEP_SPACES)
    add("laguna", "laguna", **_KEEP_SPACES)
    add("exaone-moe", "exaone-moe")
    add("minicpm5", "minicpm5", ignore_merges=True)
    add("gemma4 granite-embed-multi-311m", "lines", byte_encode=False, escape_whitespaces=True)
    add("sarvam-moe", "lines", byte_encode=False, escape_whitespaces=True, **_KEEP_SPACES)
    return dict(rows)


# `tokenizer.ggml.pre` value -> its pre-tokenizer (names and aliases as llama.cpp accepts them)
PRE_TOKENIZERS: dict[str, PreTokenizer] = _table()


def pre_tokenizer(name: str | None) -> PreTokenizer:
    """The pre-tokenizer for a `tokenizer.ggml.pre` value (llama.cpp falls back to `default` when it is absent)."""
    if not name:
        return PRE_TOKENIZERS["default"]
    try:
        return PRE_TOKENIZERS[name]
    except KeyError:
        known = ", ".join(sorted(PRE_TOKENIZERS))
        raise ModelError(f"unknown pre-tokenizer tokenizer.ggml.pre = {name!r}; known: {known}") from None


def translate_pattern(pattern: str) -> tuple[str, bool]:
    """Rewrite one pre-tokenizer regex for Python's `re`: expand category macros for collapsed text, make groups
    non-capturing (so `findall` returns whole matches), and anchor `$` at the true end (`\\Z`).

    Returns the Python regex and whether it must run on collapsed text (it uses a category)."""
    out: list[str] = []
    in_class = False
    uses_categories = False
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and pattern.startswith("\\p{", i):
            end = pattern.index("}", i)
            name = pattern[i + 3 : end]
            members = _CATEGORY_CLASS[_CATEGORY_ALIASES.get(name, name)]
            out.append(members if in_class else f"[{members}]")
            uses_categories = True
            i = end + 1
            continue
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern.startswith("[^]", i) or pattern.startswith("[]", i):
                raise ValueError(f"pattern {pattern!r}: a class starting with ']' is not supported")
        elif c == "(" and not pattern.startswith("(?", i):
            out.append("(?:")
            i += 1
            continue
        elif c == "$":
            c = r"\Z"
        out.append(c)
        i += 1
    return "".join(out), uses_categories


class Splitter:
    """Splits text into pre-tokens with one pre-tokenizer's regex list."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self._steps = []
        for pattern in patterns:
            source, on_collapsed = translate_pattern(pattern)
            self._steps.append((re.compile(source, re.ASCII), on_collapsed))

    def split(self, text: str) -> list[str]:
        if not text:
            return []
        if len(self._steps) == 1:
            rx, on_collapsed = self._steps[0]
            view = collapse(text) if on_collapsed else ascii_spaces(text)
            pieces = rx.findall(view)
            # the usual case: the regex matches every character, so no gaps to fill in
            if sum(map(len, pieces)) == len(text):
                if view is text:
                    return pieces
                ends = list(accumulate(map(len, pieces)))
                return [text[e - len(p) : e] for p, e in zip(pieces, ends, strict=True)]
        return [text[a:b] for a, b in self.spans(text)]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The pre-tokens as (start, end) code-point offsets: matches and the gaps between them, regex by regex."""
        spans = [(0, len(text))]
        views: dict[bool, str] = {}
        for rx, on_collapsed in self._steps:
            view = views.get(on_collapsed)
            if view is None:
                view = views[on_collapsed] = collapse(text) if on_collapsed else ascii_spaces(text)
            out: list[tuple[int, int]] = []
            for start, end in spans:
                pos = start
                for m in rx.finditer(view, start, end):
                    a, b = m.span()
                    if a > pos:
                        out.append((pos, a))
                    if b > a:
                        out.append((a, b))
                    pos = b
                if pos < end:
                    out.append((pos, end))
            spans = out
        return spans
