"""`SamplerConfig`: every llama.cpp sampling parameter, with llama.cpp's defaults.

Names follow llama.cpp (`common_params_sampling`, and its server's request fields where those differ:
`repeat_last_n`, `repeat_penalty`, `presence_penalty`, `frequency_penalty`). `temperature=` is accepted as
an alias of `temp` (the name this project used first). `from_params` reads a llama.cpp / OpenAI request.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# llama.cpp's default chain (common_params_sampling.samplers); mirostat replaces it when enabled
DEFAULT_SAMPLERS = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature")
LLAMA_DEFAULT_SEED = 0xFFFFFFFF  # llama.cpp's "pick a random seed"
DEFAULT_TOP_K = 40


@dataclass(frozen=True)
class _Fields:
    # the first five keep their positions: SamplerConfig(temp, top_k, top_p, min_p, seed)
    temp: float = 0.80  # <= 0: greedy
    top_k: int = DEFAULT_TOP_K  # <= 0: the whole vocabulary
    top_p: float = 0.95  # 1.0: off
    min_p: float = 0.05  # 0.0: off
    seed: int | None = None  # None or LLAMA_DEFAULT_SEED: random
    typ_p: float = 1.00  # 1.0: off
    repeat_last_n: int = 64  # tokens the penalties look back over (0: off, -1: all)
    repeat_penalty: float = 1.00  # 1.0: off
    presence_penalty: float = 0.00
    frequency_penalty: float = 0.00
    dry_multiplier: float = 0.0  # 0.0: off
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = -1  # -1: the whole context
    dry_sequence_breakers: tuple[str, ...] = ("\n", ":", '"', "*")
    xtc_probability: float = 0.00  # 0.0: off
    xtc_threshold: float = 0.10  # > 0.5: off
    mirostat: int = 0  # 0: off, 1: mirostat, 2: mirostat 2.0
    mirostat_tau: float = 5.00
    mirostat_eta: float = 0.10
    dynatemp_range: float = 0.00  # 0.0: off
    dynatemp_exponent: float = 1.00
    top_n_sigma: float = -1.00  # <= 0: off
    min_keep: int = 0
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token, bias); -inf bans
    n_probs: int = 0  # > 0: report the top n_probs tokens' log-probabilities
    post_sampling_probs: bool = False  # n_probs from the sampled distribution instead of the raw one
    ignore_eos: bool = False
    samplers: tuple[str, ...] = DEFAULT_SAMPLERS


class SamplerConfig(_Fields):
    __slots__ = ()

    def __init__(self, *args: Any, temperature: float | None = None, **kw: Any) -> None:
        if temperature is not None:
            kw["temp"] = temperature
        bias = kw.get("logit_bias")
        if isinstance(bias, Mapping):
            kw["logit_bias"] = tuple((int(t), float(b)) for t, b in bias.items())
        elif bias:
            kw["logit_bias"] = tuple((int(t), float(b)) for t, b in bias)
        for name in ("dry_sequence_breakers", "samplers"):
            if name in kw and not isinstance(kw[name], tuple):
                kw[name] = tuple(kw[name])
        super().__init__(*args, **kw)
        unknown = set(self.samplers) - set(DEFAULT_SAMPLERS)
        if unknown:
            raise ValueError(f"unknown sampler(s) {sorted(unknown)}; known: {', '.join(DEFAULT_SAMPLERS)}")
        if self.mirostat not in (0, 1, 2):
            raise ValueError(f"mirostat must be 0, 1 or 2, not {self.mirostat}")

    @property
    def temperature(self) -> float:
        return self.temp

    @property
    def greedy(self) -> bool:
        return self.temp <= 0.0 and self.mirostat == 0

    @classmethod
    def from_params(cls, params: Mapping[str, Any], **defaults: Any) -> SamplerConfig:
        """A config from a llama.cpp `/completion` or OpenAI request body (unknown fields are ignored)."""
        names = {f for f in _Fields.__dataclass_fields__}
        aliases = {"temperature": "temp", "typical_p": "typ_p", "penalty_last_n": "repeat_last_n",
                   "penalty_repeat": "repeat_penalty", "penalty_freq": "frequency_penalty",
                   "penalty_present": "presence_penalty", "top_logprobs": "n_probs"}  # fmt: skip
        kw = dict(defaults)
        for key, value in params.items():
            name = aliases.get(key, key)
            if name in names and value is not None:
                kw[name] = value
        if params.get("logprobs") is True and "n_probs" not in kw:
            kw["n_probs"] = 1
        if "logit_bias" in kw:
            kw["logit_bias"] = _parse_bias(kw["logit_bias"])
        if isinstance(kw.get("samplers"), str):
            kw["samplers"] = tuple(s for s in kw["samplers"].replace(",", ";").split(";") if s)
        return cls(**kw)


def _parse_bias(bias: Any) -> tuple[tuple[int, float], ...]:
    """llama.cpp's [[token, bias | false], ...] or OpenAI's {"token": bias}; false and -inf ban the token."""
    items = bias.items() if isinstance(bias, Mapping) else bias
    out = []
    for token, value in items:
        out.append((int(token), -math.inf if value is False else float(value)))
    return tuple(out)
