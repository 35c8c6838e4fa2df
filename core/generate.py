"""The generation loop, split as prefill / decode step / loop: a prompt is prefilled in chunks of n_batch,
then one token at a time is sampled and fed back until max_tokens or an end-of-generation token."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .errors import LlamayError
from .model import Model, State, forward
from .sampling import Sampler


def prefill(model: Model, st: State, tokens: Sequence[int], seq: int = 0) -> None:
    """Run the prompt through the model; the last chunk leaves the last token's logits in row 0."""
    if not tokens:
        raise LlamayError("the prompt is empty")
    for i in range(0, len(tokens), st.n_batch):
        chunk = tokens[i : i + st.n_batch]
        forward(model, st, chunk, [seq] * len(chunk))


def decode_step(model: Model, st: State, token: int, seq: int = 0) -> None:
    forward(model, st, (token,), (seq,))


def generate(
    model: Model,
    st: State,
    prompt: Sequence[int],
    max_tokens: int,
    sampler: Sampler,
    seq: int = 0,
    stop_at_eog: bool = True,
) -> Iterator[int]:
    """Yield sampled token ids one at a time (the end-of-generation token, if reached, is not yielded)."""
    prefill(model, st, prompt, seq)
    n_vocab = model.cfg.n_vocab
    tok_is_eog = model.tokenizer.is_eog if stop_at_eog else (lambda _t: False)
    for i in range(max_tokens):
        tok = sampler.sample(model.backend, st.logits, 0, n_vocab)
        if tok_is_eog(tok):
            return
        yield tok
        if i + 1 < max_tokens:
            if st.kv.sequences[seq].n_past >= st.n_ctx:
                return
            decode_step(model, st, tok, seq)
