"""A stored model's PARAMETERs (Ollama's option names) as llamay's settings: sampling defaults, the stop
strings, the reply and context lengths, threads. Options with no counterpart here are listed by name (`show`
prints them as having no effect): nothing is dropped silently."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llamay.sampling.request import OLLAMA_FIELDS

SAMPLER_FIELDS = {**OLLAMA_FIELDS, "seed": "seed"}  # Ollama option -> SamplerConfig field (the server's table)
RUN_OPTIONS = ("stop", "num_predict", "num_ctx", "num_thread")
NO_EFFECT = {
    "num_keep": "llamay does not shift the context",
    "num_batch": "llamay sizes its own batches",
    "num_gpu": "llamay runs on the CPU",
    "main_gpu": "llamay runs on the CPU",
    "use_mmap": "llamay always maps the file",
    "draft_num_predict": "llamay has no speculative decoding",
}


@dataclass(frozen=True)
class Options:
    sampler: dict[str, Any] = field(default_factory=dict)  # SamplerConfig keyword arguments
    stop: tuple[str, ...] = ()
    num_predict: int | None = None  # None or < 0: until the context is full
    num_ctx: int | None = None
    num_thread: int | None = None
    no_effect: dict[str, str] = field(default_factory=dict)  # option -> why it changes nothing here
    unknown: tuple[str, ...] = ()  # names Ollama does not know either

    @classmethod
    def from_parameters(cls, params: dict[str, Any]) -> Options:
        sampler = {SAMPLER_FIELDS[k]: v for k, v in params.items() if k in SAMPLER_FIELDS}
        stop = params.get("stop") or ()
        known = {*SAMPLER_FIELDS, *RUN_OPTIONS, *NO_EFFECT}

        def count(name: str) -> int | None:
            v = params.get(name)
            return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        return cls(
            sampler=sampler,
            stop=tuple(str(s) for s in ([stop] if isinstance(stop, str) else stop)),
            num_predict=count("num_predict"),
            num_ctx=count("num_ctx"),
            num_thread=count("num_thread"),
            no_effect={k: NO_EFFECT[k] for k in params if k in NO_EFFECT},
            unknown=tuple(k for k in params if k not in known),
        )

    def sampler_config(self, defaults: dict[str, Any] | None = None, **given: Any) -> Any:
        """A SamplerConfig: what the caller gives (None: not given) over the model's values over `defaults`."""
        from llamay.sampling import SamplerConfig

        return SamplerConfig(
            **{**(defaults or {}), **self.sampler, **{k: v for k, v in given.items() if v is not None}}
        )
