"""Counters and gauges, written in Prometheus' text exposition format for `GET /metrics`.

Counters are plain ints bumped by one thread each (the event loop counts requests, the model thread counts
tokens); gauges are read when the page is rendered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Metrics:
    requests: Counter[tuple[str, str, int]] = field(default_factory=Counter)  # (method, route, status)
    rejected: Counter[str] = field(default_factory=Counter)  # reason -> requests refused before queueing
    prompt_tokens: int = 0  # prompt tokens of admitted requests
    cached_prompt_tokens: int = 0  # of which reused from the prefix cache (cache hits)
    generated_tokens: int = 0
    steps: int = 0  # forward passes of the batcher
    step_sequences: int = 0  # sequences summed over steps (mean batch width = step_sequences / steps)
    step_tokens: int = 0  # tokens summed over steps
    finished: Counter[str] = field(default_factory=Counter)  # finish reason -> generations
    gauges: dict[str, tuple[str, Callable[[], float]]] = field(default_factory=dict)

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        self.gauges[name] = (help_text, read)

    def render(self) -> str:
        out: list[str] = []

        def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
            out.append(f"# HELP llamay_{name} {help_text}")
            out.append(f"# TYPE llamay_{name} {kind}")
            for labels, value in samples:
                out.append(f"llamay_{name}{labels} {_number(value)}")

        metric(
            "requests_total",
            "counter",
            "HTTP requests answered, by method, route and status.",
            [
                (_labels(method=m, route=r, status=str(s)), n)
                for (m, r, s), n in sorted(self.requests.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2]))
            ],
        )
        metric(
            "rejected_requests_total",
            "counter",
            "Requests refused before queueing, by reason.",
            [(_labels(reason=k), v) for k, v in sorted(self.rejected.items())],
        )
        metric("prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", [("", self.prompt_tokens)])
        metric(
            "cached_prompt_tokens_total",
            "counter",
            "Prompt tokens reused from the prefix cache (cache hit tokens).",
            [("", self.cached_prompt_tokens)],
        )
        metric("generated_tokens_total", "counter", "Tokens generated.", [("", self.generated_tokens)])
        metric("batch_steps_total", "counter", "Forward passes of the batcher.", [("", self.steps)])
        metric(
            "batch_sequences_total",
            "counter",
            "Sequences summed over batcher steps (mean batch width: divide by batch_steps_total).",
            [("", self.step_sequences)],
        )
        metric("batch_tokens_total", "counter", "Tokens summed over batcher steps.", [("", self.step_tokens)])
        metric(
            "generations_total",
            "counter",
            "Generations ended, by finish reason.",
            [(_labels(reason=k), v) for k, v in sorted(self.finished.items())],
        )
        for name, (help_text, read) in self.gauges.items():
            metric(name, "gauge", help_text, [("", read())])
        return "\n".join(out) + "\n"


def _labels(**kv: str) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in kv.items())
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
