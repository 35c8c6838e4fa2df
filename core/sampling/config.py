"""`SamplerConfig`: every llama.cpp sampling parameter, with llama.cpp's defaults, and the values each may take.

Names follow llama.cpp (`common_params_sampling`, and its server's request fields where those differ:
`repeat_last_n`, `repeat_penalty`, `presence_penalty`, `frequency_penalty`). `temperature=` is accepted as
an alias of `temp` (the name this project used first). `from_params` reads a llama.cpp request.

`BOUNDS` is the one table of what each numeric field admits: what its transform's arithmetic needs (a repeat
penalty divides, so it is > 0; a probability lies in [0, 1]; `-1` means "the whole context" where llama.cpp
says so), and always a number llama.cpp's float can hold (finite, |x| <= FLT_MAX). A config is checked when
it is made, so a value the math cannot take is a `SamplerConfigError` naming the field, never an exception
inside a batch step. Requests reach it through `llamay.sampling.request` (the server and the browser engine
alike); the server publishes the same table as its request schema's bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import LlamayError

# llama.cpp's default chain (common_params_sampling.samplers); mirostat replaces it when enabled
DEFAULT_SAMPLERS = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature")
LLAMA_DEFAULT_SEED = 0xFFFFFFFF  # llama.cpp's "pick a random seed"
DEFAULT_TOP_K = 40
MAX_BREAKERS = 32  # DRY sequence breakers: each costs a pass over the vocabulary when the sampler is made
MAX_BREAKER_CHARS = 40  # llama.cpp's cap on one breaker (it truncates; we refuse)
FLT_MAX = 3.4028234663852886e38  # llama.cpp holds these parameters as floats: beyond this they are infinite


class SamplerConfigError(LlamayError, ValueError):
    """A sampling parameter outside the values its math admits; `field` names it (as the caller spelled it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


@dataclass(frozen=True)
class Bound:
    """The values one numeric field admits: an interval (an end of None is unbounded), always finite."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False  # lo itself is excluded
    integer: bool = False
    why: str = ""

    def admits(self, value: float) -> bool:
        if not math.isfinite(value) or (not self.integer and abs(value) > FLT_MAX):
            return False
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        return self.hi is None or value <= self.hi

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {_num(self.lo)}")
        if self.hi is not None:
            parts.append(f"<= {_num(self.hi)}")
        return f"{kind} {' and '.join(parts)}".strip() + (f" ({self.why})" if self.why else "")

    def check(self, field: str, value: Any) -> int | float:
        """The value as the field's type; SamplerConfigError when it is not a number the bound admits."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SamplerConfigError(field, f"must be {self.describe()}, got {value!r}")
        if self.integer:
            if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
                raise SamplerConfigError(field, f"must be {self.describe()}, got {value!r}")
            value = int(value)
        if not self.admits(value):
            raise SamplerConfigError(field, f"must be {self.describe()}, got {value!r}")
        return value


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(x)


PROBABILITY = Bound(0.0, 1.0)
BOUNDS: dict[str, Bound] = {
    "temp": Bound(why="<= 0 samples greedily"),
    "top_k": Bound(integer=True, why="<= 0 keeps the whole vocabulary"),
    "top_p": Bound(0.0, 1.0, why="a probability mass; 1 is off"),
    "min_p": Bound(0.0, 1.0, why="a fraction of the top probability; 0 is off"),
    "typ_p": Bound(0.0, 1.0, why="a probability mass; 1 is off"),
    "seed": Bound(-(2**63), 2**64 - 1, integer=True),
    "repeat_last_n": Bound(-1, integer=True, why="-1: the whole context, 0: off"),
    "repeat_penalty": Bound(0.0, lo_open=True, why="positive logits are divided by it; 1 is off"),
    "presence_penalty": Bound(),
    "frequency_penalty": Bound(),
    "dry_multiplier": Bound(0.0, why="0 is off"),
    "dry_base": Bound(why="below 1 DRY is off"),
    "dry_allowed_length": Bound(0, integer=True),
    "dry_penalty_last_n": Bound(-1, integer=True, why="-1: the whole context, 0: off"),
    "xtc_probability": Bound(0.0, 1.0, why="a probability; 0 is off"),
    "xtc_threshold": Bound(0.0, 1.0, why="a probability; above 0.5 XTC is off"),
    "mirostat": Bound(0, 2, integer=True, why="0: off, 1: mirostat, 2: mirostat 2.0"),
    "mirostat_tau": Bound(0.0, why="a target surprise in bits"),
    "mirostat_eta": Bound(0.0, why="a learning rate"),
    "dynatemp_range": Bound(0.0, why="0 is off"),
    "dynatemp_exponent": Bound(0.0, why="the normalised entropy, which may be 0, is raised to it"),
    "top_n_sigma": Bound(why="<= 0 is off"),
    "min_keep": Bound(0, integer=True),
    "n_probs": Bound(0, integer=True),
}


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
        if kw.get("logit_bias"):
            kw["logit_bias"] = _bias_pairs(kw["logit_bias"])
        for name in ("dry_sequence_breakers", "samplers"):
            if name in kw and not isinstance(kw[name], tuple):
                kw[name] = tuple(kw[name])
        super().__init__(*args, **kw)
        self._check()

    def _check(self) -> None:
        """Every field within BOUNDS (integral floats become ints); the first one outside raises."""
        for name, bound in BOUNDS.items():
            value = getattr(self, name)
            if value is None and name == "seed":
                continue
            checked = bound.check(name, value)
            if checked is not value:
                object.__setattr__(self, name, checked)
        for token, bias in self.logit_bias:
            if isinstance(token, bool) or not isinstance(token, int) or token < 0:
                raise SamplerConfigError("logit_bias", f"keys are token ids (integers >= 0), got {token!r}")
            if math.isnan(bias) or bias == math.inf:
                raise SamplerConfigError("logit_bias", f"token {token}: a bias is finite or -inf (a ban), got {bias}")
        breakers = self.dry_sequence_breakers
        if len(breakers) > MAX_BREAKERS:
            raise SamplerConfigError("dry_sequence_breakers", f"at most {MAX_BREAKERS} breakers, got {len(breakers)}")
        for br in breakers:
            if not isinstance(br, str) or not 0 < len(br) <= MAX_BREAKER_CHARS:
                raise SamplerConfigError(
                    "dry_sequence_breakers",
                    f"each breaker is a string of 1 to {MAX_BREAKER_CHARS} characters, got {br!r}",
                )
        unknown = set(self.samplers) - set(DEFAULT_SAMPLERS)
        if unknown:
            raise SamplerConfigError(
                "samplers", f"unknown sampler(s) {sorted(unknown)}; known: {', '.join(DEFAULT_SAMPLERS)}"
            )

    @property
    def temperature(self) -> float:
        return self.temp

    @property
    def greedy(self) -> bool:
        return self.temp <= 0.0 and self.mirostat == 0

    @classmethod
    def from_params(cls, params: Mapping[str, Any], **defaults: Any) -> SamplerConfig:
        """A config from a llama.cpp `/completion` request body: `llamay.sampling.request`'s "llamacpp" names
        (other fields are ignored), over `defaults`; a RequestFieldError names the field as the request spelled it."""
        from .request import sampling_from_request

        req = sampling_from_request(params, "llamacpp")
        kw = {**defaults, **req.sampling}
        if req.seed is not None:
            kw["seed"] = req.seed
        return cls(**kw)


def _bias_pairs(bias: Any) -> tuple[tuple[int, float], ...]:
    """llama.cpp's [[token, bias | false], ...], OpenAI's {"token": bias} or (token, bias) pairs, as pairs of
    numbers; false and -inf ban the token. The values are checked with the rest of the config."""
    try:
        items = list(bias.items() if isinstance(bias, Mapping) else bias)
        out = []
        for token, value in items:
            tok = int(token) if isinstance(token, str) else token
            out.append((tok, -math.inf if value is False else float(value)))
    except (TypeError, ValueError) as e:
        raise SamplerConfigError("logit_bias", f"expected token -> bias pairs with integer tokens ({e})") from None
    return tuple(out)
