"""Hugging Face `tokenizers` equivalents of GGUF vocabularies (test and benchmark reference, never used by llamay).

- `hf_splitter(patterns)`: a pre-tokenizer running regexes the way llama.cpp chains them (each regex splits the
  pieces of the previous one into matches and gaps: `Split(..., behavior="isolated")`), on the Oniguruma engine,
  which has real Unicode categories: the reference for our collapsed-text emulation of `\\p{L}` and friends.
- `hf_byte_level_bpe(vocab)`: the byte-level BPE of a `gpt2` vocabulary with its `tokenizer.ggml.pre` regexes.
- `hf_sentencepiece_bpe(vocab)`: a `llama` (SentencePiece BPE) vocabulary as HF's LlamaConverter builds it:
  merges recovered from the scores, byte fallback, "▁" for spaces and a "▁" prefix.
"""

from __future__ import annotations

from typing import Any

from llamay.tokenizer import TokenAttr, Vocab
from llamay.tokenizer.bpe import parse_merges


def hf_splitter(patterns: tuple[str, ...]) -> Any:
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(p), behavior="isolated") for p in patterns])


def hf_split(splitter: Any, text: str) -> list[str]:
    return [piece for piece, _ in splitter.pre_tokenize_str(text)]


def hf_byte_level_bpe(vocab: Vocab) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    ranks = parse_merges(vocab.merges)
    merges = sorted(ranks, key=ranks.__getitem__)
    model = models.BPE(vocab=dict(vocab.token_to_id), merges=merges, ignore_merges=vocab.pre.ignore_merges)
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [hf_splitter(vocab.pre.patterns), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()
    _add_user_defined(tok, vocab)
    return tok


def _add_user_defined(tok: Any, vocab: Vocab) -> None:
    """User-defined tokens are cut out of the text before pre-tokenizing (HF: added tokens)."""
    from tokenizers import AddedToken

    user = [
        t
        for t, a in zip(vocab.tokens, vocab.attrs, strict=True)
        if a & TokenAttr.USER_DEFINED and not a & TokenAttr.CONTROL
    ]
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in user])


def sentencepiece_merges(vocab: Vocab) -> list[tuple[str, str]]:
    """Merges implied by a SentencePiece BPE vocabulary: every split of a token into two tokens, ordered by the
    merged token's score (best first), then by the ids of the parts (HF's SentencePieceExtractor)."""
    ids = vocab.token_to_id
    normal = [i for i, a in enumerate(vocab.attrs) if a & TokenAttr.NORMAL]
    found = []
    for i in normal:
        t = vocab.tokens[i]
        local = [(t[:k], t[k:]) for k in range(1, len(t)) if t[:k] in ids and t[k:] in ids]
        local.sort(key=lambda p: (ids[p[0]], ids[p[1]]))
        found += [(vocab.scores[i], n, pair) for n, pair in enumerate(local)]
    found.sort(key=lambda x: -x[0])  # stable: keeps the per-token order of equal scores
    return [pair for _, _, pair in found]


def hf_sentencepiece_bpe(vocab: Vocab) -> Any:
    from tokenizers import Tokenizer, models, normalizers

    unk = vocab.tokens[vocab.ids["unk"]] if vocab.ids["unk"] is not None else None
    model = models.BPE(
        vocab=dict(vocab.token_to_id), merges=sentencepiece_merges(vocab), unk_token=unk, byte_fallback=True,
        fuse_unk=True,
    )  # fmt: skip
    tok = Tokenizer(model)
    steps = [normalizers.Replace(" ", "\u2581")]
    if vocab.add_space_prefix:
        steps.insert(0, normalizers.Prepend("\u2581"))
    tok.normalizer = normalizers.Sequence(steps)
    _add_user_defined(tok, vocab)
    return tok
