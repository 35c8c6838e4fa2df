"""`llamay.Sampler`: llama.cpp's sampler chain (`llamay.sampling.Sampler`) picking from a context's logits.

    sampler = llamay.Sampler(temperature=0.7, top_k=40, seed=1, constraint=llamay.constraints.json_object())
    tok = sampler.sample(ctx)          # chooses and accepts (penalties remember it, the constraint advances)

Parameters take llama.cpp's names and defaults (`SamplerConfig`); a bad value is a `SamplerConfigError`
naming it. The chain is built on first use, for that context's model (the constraint is compiled for its
vocabulary then); a sampler keeps one history, so make one per sequence being generated.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..constraints.spec import compiled
from ..errors import LlamayError
from ..sampling import Sampler as ChainSampler
from ..sampling import SamplerConfig, SamplerConfigError, SampleResult

if TYPE_CHECKING:
    from .context import Context

FIELDS = frozenset(f.name for f in dataclasses.fields(SamplerConfig)) | {"temperature"}


def sampler_config(params: dict[str, Any], base: dict[str, Any] | None = None) -> SamplerConfig:
    """A SamplerConfig of `params` over `base`; an unknown name is a SamplerConfigError naming it."""
    for name in params:
        if name not in FIELDS:
            raise SamplerConfigError(name, f"not a sampling parameter (known: {', '.join(sorted(FIELDS))})")
    merged = dict(base or {})
    if "temperature" in params:
        merged.pop("temp", None)
    merged.update(params)
    return SamplerConfig(**merged)


class Sampler:
    def __init__(
        self,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        min_p: float | None = None,
        seed: int | None = None,
        *,
        constraint: Any = None,
        **params: Any,
    ) -> None:
        """None leaves a parameter at llama.cpp's default; `params` are the other SamplerConfig fields
        (repeat_penalty, presence_penalty, dry_multiplier, mirostat, logit_bias, n_probs, ...)."""
        given = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p, "seed": seed}
        self.config = sampler_config({**{k: v for k, v in given.items() if v is not None}, **params})
        self.constraint = constraint
        self._chain: ChainSampler | None = None
        self._core: Any = None  # the core model the chain was built for
        self._pending: list[int] = []  # tokens accepted before the chain was built

    def _bound(self, model: Any) -> ChainSampler:
        core = model.core
        if self._chain is None:
            tok = core.tokenizer
            self._chain = ChainSampler(self.config, compiled(self.constraint, tok), tok, core.cfg.n_vocab)
            self._core = core
            self._chain.accept_prompt(self._pending)
            self._pending = []
        elif self._core is not core:
            raise LlamayError(f"this sampler was first used with {self._core.name}; make one per model")
        return self._chain

    def sample(self, ctx: Context) -> int:
        """A token chosen from the context's last logits, and accepted."""
        logits = ctx.logits  # the error when there are none
        chain = self._bound(ctx.model)
        return chain.sample(ctx._be, logits._row(), 0, len(logits))

    def sample_with_probs(self, ctx: Context) -> SampleResult:
        """`sample`, also giving the chosen token's log-probability and the top `n_probs` tokens' (a Sampler made
        with n_probs > 0; from the raw logits, or the sampled distribution with post_sampling_probs=True)."""
        logits = ctx.logits
        chain = self._bound(ctx.model)
        return chain.sample_ex(ctx._be, logits._row(), 0, len(logits))

    def accept(self, token: int) -> None:
        """Record a token chosen elsewhere (penalties, DRY and the constraint move past it)."""
        if self._chain is None:
            raise LlamayError("accept(token) needs the sampler's model: sample once first, or use accept_prompt")
        self._chain.accept(token)

    def accept_prompt(self, tokens: Iterable[int]) -> None:
        """Let the repetition penalties and DRY see the prompt (llama.cpp does; the constraint does not)."""
        if self._chain is None:
            self._pending.extend(tokens)
        else:
            self._chain.accept_prompt(tokens)

    def fork(self) -> Sampler:
        """A sampler that goes on exactly as this one would (its history, random state and constraint state
        copied; the compiled constraint shared): pair it with `ctx.fork()` to branch a generation."""
        other = Sampler.__new__(Sampler)
        other.config, other.constraint, other._core = self.config, self.constraint, self._core
        other._pending = list(self._pending)
        chain = self._chain
        shared = {id(chain.constraint): chain.constraint} if chain is not None and chain.constraint is not None else {}
        other._chain = copy.deepcopy(chain, shared)
        return other

    def reset(self) -> None:
        """Forget the history; the constraint and the random draws start again from the seed."""
        self._pending = []
        if self._chain is not None:
            self._chain.reset()

    @property
    def done(self) -> bool:
        """The constraint is complete and nothing can follow it (only an end-of-generation token may come)."""
        return self._chain is not None and self._chain.done

    @property
    def seed(self) -> int | None:
        """The seed the draws use (a random one is chosen when the chain is built, if none was given)."""
        return self._chain.seed if self._chain is not None else self.config.seed

    def __repr__(self) -> str:
        return f"<llamay.Sampler temp={self.config.temp} top_k={self.config.top_k} top_p={self.config.top_p}>"
