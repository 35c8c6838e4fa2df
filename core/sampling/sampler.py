"""`Sampler`: llama.cpp's sampler chain over one logits row, with an optional constraint.

    logit bias -> penalties -> DRY -> top-n-sigma -> top-k -> typical -> top-p -> min-p -> XTC -> temperature
    -> draw                                         (cfg.samplers reorders the middle; mirostat replaces it:
                                                     logit bias -> temperature -> mirostat)

Greedy (temp <= 0, nothing that could move the maximum away) short-circuits to the backend's argmax (or its
top-k over the few edited tokens when bias or penalties are on).

With a constraint, the chain runs as usual and the chosen token is checked with `constraint.accepts` (one
token's bytes through the automaton); only when it is rejected is the mask computed and the chain run again
over the allowed tokens (as llama.cpp's common sampler does). `sample` accepts the chosen token, like
`llama_sampler_sample`: penalties and DRY remember it and the constraint advances. `accept(token)` does the
same for tokens chosen elsewhere; `accept_prompt(tokens)` feeds the prompt to the penalties only.
"""

from __future__ import annotations

import math
import random
from typing import Any, NamedTuple

from .candidates import Candidates, logsumexp
from .config import LLAMA_DEFAULT_SEED, SamplerConfig
from .dist import draw
from .dry import Dry, breaker_sequences
from .logit_bias import LogitBias
from .min_p import MinP
from .mirostat import Mirostat, MirostatV2
from .penalties import Penalties
from .temperature import Temperature
from .top_k import TopK
from .top_n_sigma import TopNSigma
from .top_p import TopP
from .typical import Typical
from .xtc import XTC


class TokenLogprob(NamedTuple):
    token: int
    logprob: float


class SampleResult(NamedTuple):
    """The chosen token; with n_probs > 0 also its log-probability and the top n_probs tokens' (from the raw
    logits, or from the sampled distribution with post_sampling_probs), most likely first."""

    token: int
    logprob: float | None = None
    top: tuple[TokenLogprob, ...] = ()
    resampled: bool = False  # the first choice broke the constraint and the masked chain chose again


class Sampler:
    def __init__(
        self,
        cfg: SamplerConfig | None = None,
        constraint: Any = None,
        tokenizer: Any = None,
        n_vocab: int | None = None,
    ) -> None:
        self.cfg = cfg = cfg or SamplerConfig()
        seed = cfg.seed
        random_seed = seed is None or seed in (LLAMA_DEFAULT_SEED, -1)  # llama.cpp's -1 is its 0xFFFFFFFF
        self.seed = random.randrange(1 << 32) if random_seed else seed
        self.rng = random.Random(self.seed)  # the final draw (and mirostat's)
        self.xtc_rng = random.Random(self.seed)  # XTC's own coin, as in llama.cpp
        self.constraint = constraint
        self.state = constraint.start() if constraint is not None else None
        bias = dict(cfg.logit_bias)
        if cfg.ignore_eos and tokenizer is not None:
            bias.update((t, -math.inf) for t in tokenizer.eos_ids)
        self.logit_bias = LogitBias(bias)
        self.penalties = Penalties(cfg.repeat_last_n, cfg.repeat_penalty, cfg.frequency_penalty, cfg.presence_penalty)
        breakers = {}
        if cfg.dry_multiplier != 0.0 and tokenizer is not None:
            breakers = breaker_sequences(cfg.dry_sequence_breakers, tokenizer)
        self.dry = Dry(cfg.dry_multiplier, cfg.dry_base, cfg.dry_allowed_length, cfg.dry_penalty_last_n, breakers)
        n_vocab = n_vocab or (tokenizer.n_vocab if tokenizer is not None else 0)
        self.mirostat: Mirostat | None = None
        if cfg.mirostat == 1:
            self.mirostat = Mirostat(n_vocab, cfg.mirostat_tau, cfg.mirostat_eta, self.rng)
        elif cfg.mirostat == 2:
            self.mirostat = MirostatV2(cfg.mirostat_tau, cfg.mirostat_eta, self.rng)
        self.chain = self._chain()

    def _chain(self) -> list[Any]:
        cfg = self.cfg
        if self.mirostat is not None:
            return [self.logit_bias, Temperature(cfg.temp)]
        by_name = {
            "penalties": self.penalties,
            "dry": self.dry,
            "top_n_sigma": TopNSigma(cfg.top_n_sigma),
            "top_k": TopK(cfg.top_k),
            "typ_p": Typical(cfg.typ_p, cfg.min_keep),
            "top_p": TopP(cfg.top_p, cfg.min_keep),
            "min_p": MinP(cfg.min_p, cfg.min_keep),
            "xtc": XTC(cfg.xtc_probability, cfg.xtc_threshold, cfg.min_keep, self.xtc_rng),
            "temperature": Temperature(cfg.temp, cfg.dynatemp_range, cfg.dynatemp_exponent),
        }
        return [self.logit_bias, *(by_name[name] for name in cfg.samplers)]

    @property
    def _argmax_is_exact(self) -> bool:
        """Greedy, and nothing in the chain can drop the most likely token (typical, XTC, top-n-sigma are off)."""
        cfg = self.cfg
        return (
            cfg.greedy
            and cfg.typ_p >= 1.0
            and (cfg.xtc_probability <= 0.0 or cfg.xtc_threshold > 0.5)
            and cfg.top_n_sigma <= 0.0
        )

    # -- choosing ---------------------------------------------------------------------------------------------

    def _choose(self, be: Any, logits: Any, offset: int, n_vocab: int, allowed: Any = None) -> tuple[int, Candidates]:
        c = Candidates(be, logits, offset, n_vocab, allowed)
        if allowed is not None and not len(allowed):
            from ..constraints import ConstraintError

            raise ConstraintError("the constraint allows no token here (a dead end in the grammar)")
        if self._argmax_is_exact:
            self.logit_bias.apply(c)
            self.penalties.apply(c)
            self.dry.apply(c)
            return c.best(), c
        for transform in self.chain:
            transform.apply(c)
        if self.mirostat is not None:
            return self.mirostat.choose(c), c
        return c.items[draw(c, self.rng)][0], c

    def sample(self, be: Any, logits: Any, offset: int, n_vocab: int) -> int:
        """Choose a token from the logits row at `offset`, and accept it."""
        return self.sample_ex(be, logits, offset, n_vocab, with_probs=False).token

    def sample_ex(self, be: Any, logits: Any, offset: int, n_vocab: int, with_probs: bool = True) -> SampleResult:
        """`sample`, also returning log-probabilities when cfg.n_probs > 0 (see SampleResult)."""
        token, cands = self._choose(be, logits, offset, n_vocab)
        resampled = False
        if self.constraint is not None and not self.constraint.accepts(self.state, token):
            token, cands = self._choose(be, logits, offset, n_vocab, self.constraint.allowed(self.state))
            resampled = True
        result = SampleResult(token, resampled=resampled)
        if with_probs and self.cfg.n_probs > 0:
            result = self._probs(token, cands, resampled)
        self.accept(token)
        return result

    def _probs(self, token: int, cands: Candidates, resampled: bool) -> SampleResult:
        n = self.cfg.n_probs
        if self.cfg.post_sampling_probs and cands.items:
            lse = logsumexp([v for _, v in cands.items])
            ranked = sorted(cands.items, key=lambda p: (-p[1], p[0]))
            logprob = next((v - lse for t, v in cands.items if t == token), -math.inf)
            top = tuple(TokenLogprob(t, v - lse) for t, v in ranked[:n])
            return SampleResult(token, logprob, top, resampled)
        row = cands.row()
        lse = logsumexp(row)
        top_raw = cands.be.top_k(cands.buf, cands.offset, cands.n_vocab, n)
        top = tuple(TokenLogprob(t, float(v) - lse) for t, v in top_raw)
        return SampleResult(token, row[token] - lse, top, resampled)

    # -- history ----------------------------------------------------------------------------------------------

    def set_constraint(self, constraint: Any) -> None:
        """Constrain the following tokens (None lifts the constraint); the constraint starts afresh."""
        self.constraint = constraint
        self.state = constraint.start() if constraint is not None else None

    def accept(self, token: int) -> None:
        """Record a generated token: penalties and DRY remember it, the constraint advances over it."""
        self.penalties.accept(token)
        self.dry.accept(token)
        if self.constraint is not None:
            self.state = self.constraint.advance(self.state, token)

    def accept_prompt(self, tokens: Any) -> None:
        """Record prompt tokens for the penalties and DRY (as llama.cpp does); the constraint is untouched."""
        for t in tokens:
            self.penalties.accept(t)
            self.dry.accept(t)

    def reset(self) -> None:
        """Forget the history, restart the constraint and the RNGs from the seed."""
        self.penalties.reset()
        self.dry.reset()
        self.rng.seed(self.seed)
        self.xtc_rng.seed(self.seed)
        if self.mirostat is not None:
            self.mirostat.reset()
        if self.constraint is not None:
            self.state = self.constraint.start()

    @property
    def done(self) -> bool:
        """The constraint is complete and nothing can follow (only an end-of-generation token is allowed)."""
        c = self.constraint
        return c is not None and hasattr(c, "is_finished") and c.is_finished(self.state)
